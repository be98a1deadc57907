"""`GET /v1/admin/metrics/destinations`: every live destination's /metrics figures, a page at
a time, also of those /metrics folds under `_other`; through the real ingest app on 127.0.0.1,
on both backends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead, Done
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

TOKEN = "t0ken-for-metric-figures"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NAMES = ("d1", "d2", "d3", "d4", "d5")


@pytest.fixture
async def client(real_store: Store, store_url: str) -> AsyncIterator[TestClient[Any, Any]]:
    config = Config(admin_token=TOKEN, db=store_url, metrics_destination_series_max=2)
    async with TestClient(TestServer(build_app(real_store, config), host="127.0.0.1")) as c:
        yield c


async def _get(client: TestClient[Any, Any], path: str) -> tuple[int, Any]:
    async with client.get(path, headers=AUTH) as resp:
        return resp.status, await resp.json()


async def _all_pages(client: TestClient[Any, Any], limit: int) -> tuple[list[Any], int]:
    """Every page from after=0; returns the figures and how many pages it took."""
    figures: list[Any] = []
    after: int | None = 0
    pages = 0
    while after is not None:
        status, page = await _get(client, f"/v1/admin/metrics/destinations?after={after}"
                                          f"&limit={limit}")
        assert status == 200, page
        figures += page["destinations"]
        after = page["next_after"]
        pages += 1
    return figures, pages


async def test_every_destination_has_its_figures_a_page_at_a_time(client, real_store):
    """With /metrics showing 2 of 5 destinations, the admin API still answers all 5 (not the
    removed one), in pages of 2 (next_after chains them, null on the last), each with the
    jobs, finished attempts by outcome and latency its rows say; bad paging is 400."""
    for name in (*NAMES, "gone"):
        await real_store.add_destination(name=name, url="http://127.0.0.1:9/h",
                                         secret=generate_secret(), event_types=[name],
                                         max_in_flight=5)
    await real_store.remove_destination("gone")
    events = [new_event(f"{name}-{i}", name) for name in NAMES for i in range(NAMES.index(name)
                                                                              + 1)]
    await real_store.add_events(events)
    claims = await real_store.claim("w", 100, 30.0, 3)
    now = time.time()
    finished = [(c, Done(), AttemptResult(started_at=now, duration_s=0.1, status_code=200))
                for c in claims if c.destination_name == "d2"]
    finished += [(c, Dead(error="HTTP 410"), AttemptResult(started_at=now, duration_s=0.1,
                                                            status_code=410))
                 for c in claims if c.destination_name == "d4"][:1]
    await real_store.finish(finished)

    figures, pages = await _all_pages(client, limit=2)
    assert pages == 3
    by_name = {f["name"]: f for f in figures}
    assert [f["name"] for f in figures] == list(NAMES)
    assert by_name["d1"]["jobs"] == {"running": 1} and by_name["d1"]["in_flight"] == 1
    assert by_name["d2"]["jobs"] == {"done": 2} and by_name["d2"]["attempts"] == {
        "delivered": 2}
    assert by_name["d2"]["latency"]["count"] == 2 and by_name["d2"]["in_flight"] == 0
    assert by_name["d4"]["jobs"] == {"dead": 1, "running": 3}
    assert by_name["d4"]["attempts"] == {"http_4xx": 1} and by_name["d4"]["latency"] is None
    assert by_name["d5"]["jobs"] == {"running": 5}
    assert all(f["folded"] == 1 and f["paused"] is False for f in figures)
    whole, pages = await _all_pages(client, limit=1000)
    assert (whole, pages) == (figures, 1)

    async with client.get("/metrics", headers=AUTH) as resp:
        text = await resp.text()
    assert 'destination="_other"' in text and 'hookline_destinations{series="folded"} 3.0' in text

    for bad, field in (("after=x", "after"), ("after=-1", "after"), ("limit=0", "limit"),
                       ("limit=1001", "limit")):
        status, err = await _get(client, f"/v1/admin/metrics/destinations?{bad}")
        assert (status, err["error"], err["field"]) == (400, "invalid_request", field), bad
    async with client.get("/v1/admin/metrics/destinations") as resp:
        assert resp.status == 401


async def test_same_named_destinations_of_two_tenants_get_series_of_their_own(real_store,
                                                                           store_url):
    """Every tenant may name a destination `billing`: /metrics labels another tenant's
    destination TENANT~NAME (`~` is in neither), so no two series share their labels (a
    scrape with duplicate series fails in Prometheus), and the figures API names it so too;
    a default destination named `_other` is told apart from the fold of the rest."""
    from prometheus_client.parser import text_string_to_metric_families
    for tenant in ("acme", "globex"):
        await real_store.put_tenant(tenant, TenantFields())
        await real_store.add_destination(name="billing", url="http://127.0.0.1:9/h",
                                         secret=generate_secret(), event_types=["*"],
                                         max_in_flight=5, tenant=tenant)
    for name in ("billing", "_other", "gone"):  # `_other` is also the fold's label
        await real_store.add_destination(name=name, url="http://127.0.0.1:9/h",
                                         secret=generate_secret(), event_types=["*"],
                                         max_in_flight=5)
    await real_store.add_events([new_event("a1", tenant="acme"), new_event("a2", tenant="acme"),
                                 new_event("g1", tenant="globex"), new_event("d1")])
    await real_store.remove_destination("gone")  # its job is folded under `_other`
    config = Config(admin_token=TOKEN, db=store_url, metrics_destination_series_max=10)
    async with TestClient(TestServer(build_app(real_store, config), host="127.0.0.1")) as c:
        async with c.get("/metrics", headers=AUTH) as resp:
            assert resp.status == 200
            text = await resp.text()
        status, page = await _get(c, "/v1/admin/metrics/destinations?limit=10")
    pending: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        seen = [(s.name, tuple(sorted(s.labels.items()))) for s in family.samples]
        assert len(seen) == len(set(seen)), f"duplicate series in {family.name}"
        if family.name == "hookline_jobs":
            pending.update({s.labels["destination"]: s.value for s in family.samples
                            if s.labels["status"] == "pending"})
    assert pending == {"billing": 1, "acme~billing": 2, "globex~billing": 1,
                       "_default~_other": 1, "_other": 0}
    assert status == 200
    assert sorted(d["name"] for d in page["destinations"]) == [
        "_default~_other", "acme~billing", "billing", "globex~billing"]

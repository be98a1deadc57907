"""The admin API and /metrics through the real ingest app on 127.0.0.1, on a real database
(each backend in turn: a SQLite file, then PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from hookline.ingest.app import build_app
from hookline.ingest.auth import warn_if_unconfigured
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead, Done
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from tests.conftest import new_event, opened_store

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def _call(client: TestClient[Any, Any], method: str, path: str,
                **kwargs: Any) -> tuple[int, Any]:
    async with client.request(method, path, headers=AUTH, **kwargs) as resp:
        return resp.status, await resp.json()


async def test_token_required_and_json_errors(client):
    """With a token configured, every admin route and /metrics answer 401 JSON without it or
    with a wrong one, and 200 with it."""
    for path in ("/v1/admin/destinations", "/v1/admin/dead", "/v1/admin/jobs", "/metrics"):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            async with client.get(path, headers=headers) as resp:
                assert resp.status == 401, (path, headers)
                assert (await resp.json())["error"] == "unauthorized"
                assert resp.headers["WWW-Authenticate"] == "Bearer"
        async with client.get(path, headers=AUTH) as resp:
            assert resp.status == 200, path


async def test_destination_lifecycle(client, real_store):
    """POST creates (secret shown once), GET redacts it, PATCH changes allowed fields and
    refuses others with 400, pause/resume flip the state, DELETE removes (then 404)."""
    status, created = await _call(client, "POST", "/v1/admin/destinations", json={
        "name": "billing", "url": "http://127.0.0.1:9/h", "event_types": ["invoice.*"],
        "max_in_flight": 2})
    assert status == 201 and created["secret"].startswith("whsec_")
    status, again = await _call(client, "POST", "/v1/admin/destinations",
                                json={"name": "billing", "url": "http://127.0.0.1:9/h"})
    assert (status, again["error"]) == (409, "conflict")
    status, shown = await _call(client, "GET", "/v1/admin/destinations/billing")
    assert status == 200 and shown["secret"] != created["secret"]
    assert created["secret"] not in str(shown)

    status, patched = await _call(client, "PATCH", "/v1/admin/destinations/billing",
                                  json={"max_in_flight": 1, "url": "https://example.com/x"})
    assert status == 200 and patched["max_in_flight"] == 1
    status, bad = await _call(client, "PATCH", "/v1/admin/destinations/billing",
                              json={"max_in_flight": "lots"})
    assert (status, bad["error"]) == (400, "invalid_request")
    status, bad = await _call(client, "PATCH", "/v1/admin/destinations/billing",
                              json={"id": 7})
    assert (status, bad["error"]) == (400, "invalid_request")
    status, bad = await _call(client, "PATCH", "/v1/admin/destinations/billing",
                              data=b"{not json")
    assert (status, bad["error"]) == (400, "invalid_request")
    assert (await real_store.get_destination("billing")).url == "https://example.com/x"

    status, _ = await _call(client, "POST", "/v1/admin/destinations/billing/pause",
                            json={"reason": "maintenance"})
    assert status == 200
    assert (await real_store.get_destination("billing")).paused_reason == "maintenance"
    status, _ = await _call(client, "POST", "/v1/admin/destinations/billing/resume")
    assert status == 200 and not (await real_store.get_destination("billing")).paused

    status, removed = await _call(client, "DELETE", "/v1/admin/destinations/billing")
    assert status == 200 and removed["jobs_ended"] == 0
    status, missing = await _call(client, "GET", "/v1/admin/destinations/billing")
    assert (status, missing["error"]) == (404, "not_found")


async def test_dead_jobs_replay_and_purge(client, real_store):
    """GET /dead lists a dead job, /jobs/{id} tells its story, /replay dry-runs then replays
    it (409 when not dead), and /purge answers what it removed."""
    await real_store.add_destination(name="d", url="http://127.0.0.1:9/h", secret=_secret(),
                                     event_types=["*"], max_in_flight=1)
    await real_store.add_events([new_event("e1")])
    (claim,) = await real_store.claim("w", 1, 30.0, 3)
    await real_store.finish([(claim, Dead(error="HTTP 410"),
                              AttemptResult(started_at=0.0, duration_s=0.1, status_code=410))])
    status, dead = await _call(client, "GET", "/v1/admin/dead?destination=d")
    assert status == 200 and [j["id"] for j in dead] == [claim.job_id]
    assert dead[0]["last_error"] == "HTTP 410"
    status, story = await _call(client, "GET", f"/v1/admin/jobs/{claim.job_id}")
    assert status == 200 and story["attempts"][0]["status_code"] == 410
    status, err = await _call(client, "GET", "/v1/admin/jobs/abc")
    assert status == 400 and err["error"] == "invalid_request"

    status, out = await _call(client, "POST", "/v1/admin/replay",
                              json={"all_dead": True, "since": "1h", "dry_run": True})
    assert (status, out) == (200, {"count": 1, "dry_run": True})
    status, out = await _call(client, "POST", "/v1/admin/replay", json={"job_id": claim.job_id})
    assert (status, out) == (200, {"count": 1, "dry_run": False})
    status, out = await _call(client, "POST", "/v1/admin/replay", json={"job_id": claim.job_id})
    assert (status, out["error"]) == (409, "conflict")
    status, out = await _call(client, "POST", "/v1/admin/replay", json={})
    assert (status, out["error"]) == (400, "invalid_request")
    status, jobs = await _call(client, "GET", "/v1/admin/jobs?status=pending")
    assert status == 200 and jobs[0]["attempts"] == 0

    status, out = await _call(client, "POST", "/v1/admin/purge", json={})
    assert status == 200 and out == {"bodies": 0, "attempts": 0, "jobs": 0, "events": 0,
                                     "previous_secrets": 0}
    status, out = await _call(client, "POST", "/v1/admin/purge",
                              json={"bodies_older_than": "30d", "metadata_older_than": "1d"})
    assert (status, out["error"]) == (400, "invalid_request")


async def test_metrics_parse_and_count_from_the_database(client, real_store, store_url):
    """/metrics is Prometheus text that prometheus_client parses, with jobs by destination and
    status, paused destinations, attempts by outcome and a latency histogram, all read from
    the database (rows written by another store connection, as another process would)."""
    await real_store.add_destination(name="a", url="http://127.0.0.1:9/h", secret=_secret(),
                                     event_types=["*"], max_in_flight=5)
    await real_store.add_destination(name="b", url="http://127.0.0.1:9/h", secret=_secret(),
                                     event_types=["*"], max_in_flight=5)
    await real_store.set_paused("b", True, "test")
    async with opened_store(store_url) as other:  # a second "process"
        await other.add_events([new_event("e1"), new_event("e2")])
        claims = await other.claim("w", 10, 30.0, 3)
        await other.finish([(c, Done(), AttemptResult(started_at=0.0, duration_s=0.1,
                                                      status_code=200)) for c in claims])
    async with client.get("/metrics", headers=AUTH) as resp:
        assert resp.status == 200 and resp.content_type == "text/plain"
        text = await resp.text()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("hookline_jobs", (("destination", "a"), ("status", "done")))] == 2
    assert samples[("hookline_jobs", (("destination", "b"), ("status", "pending")))] == 2
    assert samples[("hookline_destination_paused",
                    (("destination", "b"), ("reason", "manual")))] == 1
    assert samples[("hookline_destination_paused", (("destination", "a"), ("reason", "")))] == 0
    assert samples[("hookline_attempts_total", (("destination", "a"), ("outcome", "delivered")))] \
        == 2
    assert samples[("hookline_attempts_total", (("destination", "a"), ("outcome", "http_5xx")))] \
        == 0  # every outcome series exists from the start, so increase() sees a first failure
    assert samples[("hookline_delivery_latency_seconds_count", (("destination", "a"),))] == 2
    assert samples[("hookline_delivery_latency_seconds_bucket",
                    (("destination", "a"), ("le", "+Inf")))] == 2
    assert ("hookline_oldest_pending_age_seconds", ()) in samples
    assert samples[("hookline_ready", ())] == 0  # no supervisor: nothing would deliver

    # Retention deletes the done jobs and their attempts: the counters stay where they were.
    purged = await real_store.purge(bodies_before_s=1e12, metadata_before_s=1e12,
                                    dedupe_before_s=0)
    assert (purged.attempts, purged.jobs) == (2, 2)
    async with client.get("/metrics", headers=AUTH) as resp:
        text = await resp.text()
    after = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(text) for s in family.samples}
    assert after.get(("hookline_jobs", (("destination", "a"), ("status", "done"))), 0) == 0
    for key in [k for k in samples if k[0].startswith(("hookline_attempts_total",
                                                        "hookline_delivery_latency_seconds_"))]:
        assert after[key] == samples[key], key

    # A removed destination's series disappear.
    await real_store.remove_destination("a")
    async with client.get("/metrics", headers=AUTH) as resp:
        text = await resp.text()
    assert 'destination="a"' not in text and 'destination="b"' in text


async def test_without_token_every_request_refused_and_warned(real_store):
    """With no admin token configured, even a loopback peer gets 403 auth_not_configured
    naming the setting (a reverse proxy on this host would make every client loopback), on
    every admin route and /metrics; ingest logs auth_not_configured once at start, and not
    for a family whose token is set."""
    app = build_app(real_store, Config())
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        for path in ("/v1/admin/destinations", "/v1/admin/stats", "/metrics"):
            async with c.get(path, headers=AUTH) as resp:
                body = await resp.json()
                assert resp.status == 403, path
                assert body["error"] == "auth_not_configured"
                assert "HOOKLINE_ADMIN_TOKEN" in body["detail"]
    with capture_logs() as logs:
        warn_if_unconfigured(Config())
        warn_if_unconfigured(Config(admin_token=TOKEN, ingest_token="i"))
        warn_if_unconfigured(Config(admin_token=TOKEN))
    assert [(e["event"], e["route"]) for e in logs] == [
        ("auth_not_configured", "admin API"), ("auth_not_configured", "POST /v1/events"),
        ("auth_not_configured", "POST /v1/events")]


def _secret() -> str:
    from hookline.shared.signing import generate_secret

    return generate_secret()


# -- inputs schemathesis found answering 500 (tests/integration/test_api_contract.py) -------


@pytest.mark.parametrize(("method", "path", "kwargs"), [
    # a whsec_ secret with non-ASCII characters (base64 raised ValueError, not ConfigError)
    ("POST", "/v1/admin/destinations",
     {"json": {"name": "d", "url": "http://127.0.0.1:9/h", "secret": "whsec_\u00e9\u00e9\u00e9"}}),
    # max_in_flight past a 64-bit integer (SQLite OverflowError); past the documented maximum
    ("POST", "/v1/admin/destinations",
     {"json": {"name": "d", "url": "http://127.0.0.1:9/h", "max_in_flight": 2**63}}),
    ("PATCH", "/v1/admin/destinations/billing", {"json": {"max_in_flight": 2**63}}),
    ("PATCH", "/v1/admin/destinations/billing", {"json": {"max_in_flight": 1_000_001}}),
    # job ids and limits past a 64-bit integer, infinite or fractional
    ("GET", "/v1/admin/jobs/9223372036854775808", {}),
    ("GET", "/v1/admin/jobs?limit=9223372036854775808", {}),
    ("GET", "/v1/admin/dead?limit=10001", {}),
    ("POST", "/v1/admin/replay", {"data": b'{"job_id": 1e999}'}),
    ("POST", "/v1/admin/replay", {"json": {"job_id": 1.5}}),
    ("POST", "/v1/admin/replay", {"json": {"job_id": 2**63}}),
    # `since` of a JSON type parse_instant did not expect (AttributeError), or not finite
    ("POST", "/v1/admin/replay", {"json": {"all_dead": True, "since": {}}}),
    ("POST", "/v1/admin/replay", {"json": {"all_dead": True, "since": [1]}}),
    ("POST", "/v1/admin/replay", {"json": {"all_dead": True, "since": "nan"}}),
    ("GET", "/v1/admin/dead?since=1e999", {}),
])
async def test_out_of_range_or_mistyped_input_is_400_not_500(client, real_store, method, path,
                                                              kwargs):
    """Inputs that used to escape as 500 internal_error are 400 invalid_request, and change
    nothing (regressions found by the schemathesis contract test)."""
    await real_store.add_destination(name="billing", url="http://127.0.0.1:9/b",
                                     secret=generate_secret(), event_types=("*",),
                                     max_in_flight=3)
    status, answer = await _call(client, method, path, **kwargs)
    assert (status, answer["error"]) == (400, "invalid_request"), answer
    [billing] = await real_store.list_destinations()
    assert billing.max_in_flight == 3 and billing.name == "billing"


async def test_a_test_delivery_to_a_paused_destination_answers_at_once(client, real_store):
    """A paused destination takes no attempt until resumed: the test delivery is queued and
    the answer comes at once (202, attempt null, waited 0 s), not after the attempt timeout
    (10 s by default) and the claim allowance (2 s)."""
    await real_store.add_destination(name="p", url="http://127.0.0.1:9/p",
                                     secret=generate_secret(), event_types=["*"],
                                     max_in_flight=1)
    await real_store.set_paused("p", True, reason="maintenance")
    started = asyncio.get_running_loop().time()
    async with client.post("/v1/admin/destinations/p/test", json={}, headers=AUTH) as resp:
        answer = await resp.json()
    assert resp.status == 202, answer
    assert (answer["attempt"], answer["waited_s"], answer["job_status"]) == (None, 0.0, "pending")
    assert asyncio.get_running_loop().time() - started < 6

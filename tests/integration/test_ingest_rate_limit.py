"""Per-source rate limiting through the ingest app on 127.0.0.1 with a real SQLite file:
POST /v1/events and POST /v1/sources/{name} (ingest/rate_limit.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields
from tests.integration.test_ingest import event_body
from tests.integration.test_sources_api import GH_SECRET, github_headers

INGEST_TOKEN = "rate-ingest-token"
AUTH = {"Authorization": f"Bearer {INGEST_TOKEN}", "Content-Type": "application/json"}
LIMITED = Config(ingest_rate_per_s=0.5, ingest_burst=3, ingest_token=INGEST_TOKEN)


@pytest.fixture
async def real_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(str(tmp_path / "rate.db")) as store:
        await store.add_source(name="gh", scheme="github", secret=GH_SECRET)
        yield store


async def serve(store: SqliteStore, config: Config) -> TestClient[Any, Any]:
    return TestClient(TestServer(build_app(store, config), host="127.0.0.1"))


async def post_events(client: TestClient[Any, Any], bodies: list[bytes]
                      ) -> list[tuple[int, str | None, dict[str, Any]]]:
    """POST each body in turn; (status, Retry-After, JSON) of each."""
    out = []
    for body in bodies:
        async with client.post("/v1/events", data=body, headers=AUTH) as resp:
            out.append((resp.status, resp.headers.get("Retry-After"), await resp.json()))
    return out


async def events_stored(store: SqliteStore) -> int:
    return (await store.stats()).events


async def test_burst_over_the_limit_is_429_with_retry_after_and_stores_nothing(real_store):
    """With 0.5 events/s and a burst of 3, the 4th and 5th rapid events of one source get
    429 rate_limited with Retry-After (whole seconds until a token is back: 2) and are not
    stored; the first three are."""
    async with await serve(real_store, LIMITED) as client:
        with capture_logs() as logs:
            answers = await post_events(client, [event_body(f"e{i}", source="shop")
                                                 for i in range(5)])
    assert [status for status, _, _ in answers] == [202, 202, 202, 429, 429]
    for _, retry_after, answer in answers[3:]:
        # 2 s to the next token, less the moments since; exact arithmetic: tests/unit
        assert retry_after in ("1", "2")
        assert answer["error"] == "rate_limited" and "'shop'" in answer["detail"]
    assert await events_stored(real_store) == 3
    rejected = [e for e in logs if e["event"] == "event_rejected"]
    assert [(e["error"], e["source"]) for e in rejected] == [("rate_limited", "shop")] * 2


async def test_other_sources_are_unaffected(real_store):
    """One source over its limit does not slow another, nor the default source `api`."""
    async with await serve(real_store, LIMITED) as client:
        first = await post_events(client, [event_body(f"a{i}", source="noisy")
                                           for i in range(4)])
        others = await post_events(client, [event_body("b1", source="quiet"),
                                            event_body("c1")])
    assert [s for s, _, _ in first] == [202, 202, 202, 429]
    assert [s for s, _, _ in others] == [202, 202]
    assert await events_stored(real_store) == 5


async def test_off_by_default(real_store):
    """Without ingest_rate_per_s, 60 rapid events of one source are all accepted."""
    async with await serve(real_store, Config(ingest_token=INGEST_TOKEN)) as client:
        answers = await asyncio.gather(*(post_events(client, [event_body(f"x{i}")])
                                         for i in range(60)))
    assert {status for [(status, _, _)] in answers} == {202}
    assert await events_stored(real_store) == 60


async def test_provider_route_is_limited_per_source_and_forgeries_spend_nothing(real_store):
    """POST /v1/sources/{name} shares the limit by source name; requests failing verification
    (401) do not spend the source's tokens, so a forger cannot starve the real sender."""
    config = Config(ingest_rate_per_s=0.01, ingest_burst=1)
    body = b'{"action": "opened", "number": 1}'
    async with await serve(real_store, config) as client:
        for i in range(3):
            forged = github_headers(body, "pull_request", f"forged-{i}", secret="x" * 32)
            async with client.post("/v1/sources/gh", data=body, headers=forged) as resp:
                assert resp.status == 401
        statuses = []
        for delivery in ("d1", "d2"):
            async with client.post("/v1/sources/gh", data=body,
                                   headers=github_headers(body, "pull_request", delivery)
                                   ) as resp:
                statuses.append((resp.status, resp.headers.get("Retry-After")))
                answer = await resp.json()
    assert statuses[0] == (202, None)
    assert statuses[1][0] == 429 and statuses[1][1] in ("99", "100")
    assert answer["error"] == "rate_limited"
    assert await events_stored(real_store) == 1


async def test_each_tenant_has_buckets_of_its_own(real_store):
    """One tenant over its limit does not spend another tenant's tokens for the same source
    name (nor the default tenant's); the 429 names the tenant."""
    for tenant in ("acme", "globex"):
        await real_store.put_tenant(tenant, TenantFields())
    async with await serve(real_store, LIMITED) as client:
        noisy = await post_events(client, [event_body(f"a{i}", source="shop", tenant="acme")
                                           for i in range(4)])
        others = await post_events(client, [event_body("g1", source="shop", tenant="globex"),
                                            event_body("d1", source="shop")])
    assert [s for s, _, _ in noisy] == [202, 202, 202, 429]
    assert "'shop' of tenant 'acme'" in noisy[3][2]["detail"]
    assert [s for s, _, _ in others] == [202, 202]
    assert await events_stored(real_store) == 5

"""A tenant's `max_destinations` holds under concurrent creates through the tenant API
(the real ingest app on 127.0.0.1, each backend in turn: a SQLite file, then PostgreSQL).

docs/tenants.md: "`max_destinations` | most live destinations"; `POST /v1/tenant/destinations`
answers 409 for "a tenant at its `max_destinations`". Two creates racing must not both pass
the count: at most `max_destinations` live destinations may exist afterwards (each create
locks the tenant's row on PostgreSQL: check_destination_room).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields

ADMIN_TOKEN = "review-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
URL = "http://127.0.0.1:9/hook"
RACERS = 12


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=ADMIN_TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def test_concurrent_creates_never_exceed_max_destinations(client, real_store):
    await real_store.put_tenant("acme", TenantFields(max_destinations=1))
    async with client.post("/v1/admin/tenants/acme/tokens", json={}, headers=ADMIN) as resp:
        assert resp.status == 201
        token = (await resp.json())["token"]
    auth = {"Authorization": f"Bearer {token}"}

    async def create(i: int) -> int:
        async with client.post("/v1/tenant/destinations", headers=auth, json={
                "name": f"racer-{i}", "url": URL, "event_types": ["*"]}) as resp:
            await resp.read()
            return resp.status

    for _round in range(5):
        statuses = await asyncio.gather(*(create(i + 100 * _round) for i in range(RACERS)))
        live = await real_store.list_destinations(tenant="acme")
        assert len(live) <= 1, (f"max_destinations=1 but {len(live)} live destinations "
                                f"after {RACERS} concurrent creates (answers {statuses})")
        for d in live:  # make room again for the next round
            await real_store.remove_destination(d.name, tenant="acme")

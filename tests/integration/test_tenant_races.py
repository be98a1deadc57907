"""Tenant races (the real ingest app on 127.0.0.1, each backend in turn: a SQLite file, then
PostgreSQL, where under READ COMMITTED the races are real; SQLite's one writer serialises
them). A destination's create and a tenant's delete lock the tenant's row
(check_destination_room, _delete_tenant_tx).

- `max_destinations` holds under concurrent creates through the tenant API
  (`POST /v1/tenant/destinations` answers 409 for "a tenant at its `max_destinations`"): at
  most that many live destinations may exist afterwards.
- Deleting a tenant while destinations are being created for it leaves none live
  (docs/tenants.md: a delete "removes its live destinations"; a tenant created under the id
  "starts with no destinations"). The destinations table has no foreign key to tenants: when
  a create read the tenant without locking its row, a delete committing in between left a
  live destination that the next tenant of the id (a new customer, or `tenants_auto_create`
  on the next publish) owned, and its events went to the deleted customer's URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.models import Accepted
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

ADMIN_TOKEN = "review-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
OLD_CUSTOMER_URL = "http://127.0.0.1:9/old-customer"
URL = "http://127.0.0.1:9/hook"
RACERS = 12
ROUNDS = 15
CREATES = 8


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


async def _put(client: TestClient[Any, Any], tenant: str) -> tuple[int, Any]:
    async with client.put(f"/v1/admin/tenants/{tenant}", headers=ADMIN, json={}) as resp:
        return resp.status, await resp.json()


async def test_a_deleted_tenant_keeps_no_live_destination(client, real_store):
    orphans: list[str] = []
    for n in range(ROUNDS):
        tenant = f"gone-{n}"
        await real_store.put_tenant(tenant, TenantFields())

        async def create(i: int, tenant: str = tenant) -> int:
            async with client.post(f"/v1/admin/destinations?tenant={tenant}", headers=ADMIN,
                                   json={"name": f"d{i}", "url": OLD_CUSTOMER_URL,
                                         "tenant": tenant,
                                         "event_types": ["*"]}) as resp:
                await resp.read()
                return resp.status

        async def delete(tenant: str = tenant, n: int = n) -> int:
            await asyncio.sleep(0.002 * (n % 5))
            async with client.delete(f"/v1/admin/tenants/{tenant}", headers=ADMIN) as resp:
                await resp.read()
                return resp.status

        statuses = await asyncio.gather(delete(), *(create(i) for i in range(CREATES)))
        assert statuses[0] == 200, statuses
        left = await real_store.list_destinations(tenant=tenant)
        if left:
            # A new customer is given the id (no event is stored, so nothing refuses it):
            # its first event is delivered to the deleted customer's destinations.
            status, _ = await _put(client, tenant)
            accepted = await real_store.add_event(new_event("first", "order.paid",
                                                            tenant=tenant))
            jobs = len(accepted.job_ids) if isinstance(accepted, Accepted) else None
            orphans.append(f"{tenant}: {[d.name for d in left]} (answers {statuses}); "
                           f"re-created ({status}), its first event made {jobs} job(s) "
                           f"to {OLD_CUSTOMER_URL}")
    assert not orphans, ("live destinations of deleted tenants (a tenant created under the id "
                         f"would own them): {orphans}")

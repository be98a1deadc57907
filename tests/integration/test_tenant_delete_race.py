"""Deleting a tenant while destinations are being created for it must not leave a live
destination behind (the real ingest app on 127.0.0.1, each backend in turn: a SQLite file,
then PostgreSQL).

docs/tenants.md: deleting a tenant "removes its live destinations ... and forgets the
tenant"; "a tenant created under the id starts with no destinations, no history and new
tokens". The destinations table has no foreign key to tenants; when a destination's create
read the tenant without locking its row, under PostgreSQL's READ COMMITTED a delete
committing between that read and the insert left a live destination of a tenant that no
longer existed, and a tenant later created under the id (a new customer, or
`tenants_auto_create` on the next publish) owned it: its events went to the deleted
customer's URL. Both now lock the tenant's row (check_destination_room, _delete_tenant_tx).
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
URL = "http://127.0.0.1:9/old-customer"
ROUNDS = 15
CREATES = 8


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=ADMIN_TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


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
                                   json={"name": f"d{i}", "url": URL, "tenant": tenant,
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
                           f"to {URL}")
    assert not orphans, ("live destinations of deleted tenants (a tenant created under the id "
                         f"would own them): {orphans}")

"""A tenant auto-created on publish (`tenants_auto_create`) used to get the token epoch 0, every
time, so a token minted for an earlier auto-created tenant of the same id opens the next one
(the real ingest app on 127.0.0.1, each backend in turn: a SQLite file, then PostgreSQL).

docs/tenants.md: "Once retention has purged them, a tenant created under the id starts with
no destinations, no history and new tokens"; tokens carry the tenant's epoch, and a
`PUT /v1/admin/tenants/{id}` create draws a random one (tenants_tx.new_token_epoch). The
auto-create insert (`create_tenants` in sqlite.sql / postgres.sql) names no epoch: the
column's DEFAULT 0. So: customer 1 (`acme`, auto-created) gets a portal link (24 h); it is
offboarded (deleted) and retention purges its events; customer 2 is given `acme` by its
first event (auto-created again, epoch 0 again): customer 1's link shows customer 2's
tenant, destinations and deliveries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.store import Store

ADMIN_TOKEN = "review-admin-token"
INGEST_TOKEN = "review-ingest-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
INGEST = {"Authorization": f"Bearer {INGEST_TOKEN}"}


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=ADMIN_TOKEN, ingest_token=INGEST_TOKEN,
                                       tenants_auto_create=True,
                                       allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def _publish(client: TestClient[Any, Any], event_id: str) -> None:
    async with client.post("/v1/events", headers=INGEST, json={
            "id": event_id, "type": "order.paid", "data": {}, "tenant": "acme"}) as resp:
        assert resp.status == 202, await resp.text()


async def test_a_token_of_a_deleted_auto_created_tenant_does_not_open_its_successor(client):
    await _publish(client, "customer-1-first")  # auto-creates acme for customer 1
    async with client.post("/v1/admin/tenants/acme/tokens", json={"ttl_s": 86400},
                           headers=ADMIN) as resp:
        assert resp.status == 201
        old_link = (await resp.json())["token"]
    async with client.delete("/v1/admin/tenants/acme", headers=ADMIN) as resp:
        assert resp.status == 200  # customer 1 offboarded
    async with client.post("/v1/admin/purge", headers=ADMIN, json={
            "bodies_older_than": "0s", "metadata_older_than": "0s",
            "dedupe_keep": "0s"}) as resp:
        assert resp.status == 200, await resp.text()  # its events are purged
    async with client.get("/v1/tenant", headers={"Authorization": f"Bearer {old_link}"}
                          ) as resp:
        assert resp.status == 401  # while acme does not exist

    await _publish(client, "customer-2-first")  # a new customer is given the id acme
    async with client.get("/v1/admin/tenants/acme", headers=ADMIN) as resp:
        assert resp.status == 200
    async with client.get("/v1/tenant", headers={"Authorization": f"Bearer {old_link}"}
                          ) as resp:
        answer = await resp.json()
        assert resp.status == 401, (
            f"customer 1's token opens the re-created tenant acme: {resp.status} {answer}")

"""A restored backup does not accept tenant tokens that were revoked after the snapshot was
taken (restore gives the copy a new signing key: every earlier token stops working).

docs/tenants.md: "`POST /v1/admin/tenants/{id}/revoke-tokens` gives the tenant a new random
epoch, revoking every token minted before"; OPERATIONS.md: revoke "a leaked link, a customer
offboarded". A snapshot carries the token signing key and the tenant's old epoch
(OPERATIONS.md: "a backup carries the key"), so restoring a snapshot taken before the
revoke brings the leaked token back to life until its expiry (up to 24 h) - silently: the
operator who revoked it is never told. Same for a tenant disabled after the snapshot.

Real SQLite files, the real ingest app on 127.0.0.1, the real `take_snapshot` and `restore`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.store.backup import take_snapshot
from hookline.shared.store.backup_restore import restore
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields

ADMIN_TOKEN = "review-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def _status(db: str, token: str) -> tuple[int, Any]:
    async with SqliteStore(db) as store:
        app = build_app(store, Config(admin_token=ADMIN_TOKEN))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client, client.get(
                "/v1/tenant", headers={"Authorization": f"Bearer {token}"}) as resp:
            return resp.status, await resp.json()


async def test_restore_does_not_revive_revoked_tenant_tokens(tmp_path: Path):
    db = str(tmp_path / "live.db")
    async with SqliteStore(db) as store:
        await store.put_tenant("acme", TenantFields(name="Acme"))
        app = build_app(store, Config(admin_token=ADMIN_TOKEN))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client, client.post(
                "/v1/admin/tenants/acme/tokens", json={"ttl_s": 86400}, headers=ADMIN) as resp:
            assert resp.status == 201
            leaked = (await resp.json())["token"]
    snapshot = await asyncio.to_thread(take_snapshot, db, tmp_path / "backups")

    async with SqliteStore(db) as store:  # the link leaked: the operator revokes it
        app = build_app(store, Config(admin_token=ADMIN_TOKEN))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client, client.post(
                "/v1/admin/tenants/acme/revoke-tokens", headers=ADMIN) as resp:
            assert resp.status == 200
    status, answer = await _status(db, leaked)
    assert (status, answer["error"]) == (401, "token_revoked")

    restored = str(await asyncio.to_thread(restore, snapshot.path, tmp_path / "restored"))
    status, answer = await _status(restored, leaked)
    assert status == 401, (
        f"the restored database accepts a token revoked after the snapshot: {status} {answer}")

"""Tenants survive a backup, its restore and `migrate-store`: a SQLite database with two
tenants, their same-named destinations and events is snapshotted, restored, and the restored
file copied to PostgreSQL; everything arrives intact (tenants with their fields, destinations
with their tenant, events with theirs, the subscription index rebuilt by the target's
trigger), and fan-out stays isolated on both copies."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hookline.shared.models import DEFAULT_TENANT, Accepted
from hookline.shared.store import Store
from hookline.shared.store.backup import take_snapshot
from hookline.shared.store.backup_restore import restore
from hookline.shared.store.copy import copy_sqlite_to_postgres
from hookline.shared.store.postgres import PostgresStore
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event, query_db

SECRET = "whsec_" + "C" * 32


async def _reached(store: Store, url: str, event_id: str,
                  tenant: str) -> list[tuple[str, str]]:
    """(tenant, name) of the destinations a new event of `tenant` fans out to, as stored."""
    result = await store.add_event(new_event(event_id, "invoice.paid", tenant=tenant))
    assert isinstance(result, Accepted), result
    found = await query_db(url, "SELECT d.tenant_id, d.name FROM jobs j JOIN destinations d "
                                f"ON d.id = j.destination_id WHERE j.event_id = {result.event_id}")
    return sorted((r["tenant_id"], r["name"]) for r in found)


async def _facts(store: Store) -> tuple[object, ...]:
    tenants = [(t.id, t.name, t.metadata, t.max_destinations, t.disabled)
               for t in await store.list_tenants()]
    destinations = [(d.id, d.tenant, d.name, d.secret, d.event_types)
                    for d in await store.list_destinations()]
    jobs = [(j.id, j.destination, j.status) for j in await store.list_jobs(limit=1000)]
    return tenants, destinations, jobs


async def test_backup_restore_and_migrate_store_carry_tenants(tmp_path: Path, pg_url: str):
    db = str(tmp_path / "live.db")
    async with SqliteStore(db) as live:
        await live.put_tenant("acme", TenantFields(name="Acme", metadata='{"plan":"pro"}',
                                                   max_destinations=3))
        await live.put_tenant("globex", TenantFields(disabled=True))
        for tenant in (DEFAULT_TENANT, "acme", "globex"):
            await live.add_destination(name="hooks", url="http://127.0.0.1:9/x",
                                       secret=SECRET, event_types=["invoice.*"],
                                       max_in_flight=2, tenant=tenant)
        await live.add_destination(name="all", url="http://127.0.0.1:9/y", secret=SECRET,
                                   event_types=["*"], max_in_flight=2, tenant="acme")
        await live.add_event(new_event("e1", "invoice.paid", tenant="acme"))
        await live.add_event(new_event("e1", "invoice.paid"))
        before = await _facts(live)

    snapshot = await asyncio.to_thread(take_snapshot, db, tmp_path / "backups")
    restored = str(await asyncio.to_thread(restore, snapshot.path, tmp_path / "restored"))
    async with SqliteStore(restored) as back:
        assert await _facts(back) == before
        assert await _reached(back, restored, "r1", "acme") == [("acme", "all"), ("acme", "hooks")]
        assert await _reached(back, restored, "r2", DEFAULT_TENANT) == [(DEFAULT_TENANT, "hooks")]

    copied = await copy_sqlite_to_postgres(restored, pg_url)
    assert copied.rows["tenants"] == 3 and copied.rows["destinations"] == 4
    async with PostgresStore(pg_url) as moved:
        tenants, destinations, _ = await _facts(moved)
        assert (tenants, destinations) == before[:2]
        default = await moved.get_tenant(DEFAULT_TENANT)  # the source's row, not the seed
        assert default.name == "default"
        index = await query_db(pg_url, "SELECT tenant_id, pattern, destination_id FROM "
                                       "destination_subscriptions ORDER BY destination_id")
        assert [(r["tenant_id"], r["pattern"]) for r in index] == [
            (DEFAULT_TENANT, "invoice.*"), ("acme", "invoice.*"), ("globex", "invoice.*"),
            ("acme", "*")]
        assert await _reached(moved, pg_url, "m1", "acme") == [("acme", "all"), ("acme", "hooks")]
        assert await _reached(moved, pg_url, "m2", DEFAULT_TENANT) == [(DEFAULT_TENANT, "hooks")]
        # (tenant, source, id) stays the idempotency key after the move
        assert not isinstance(await moved.add_event(new_event("e1", "invoice.paid",
                                                              tenant="acme")), Accepted)

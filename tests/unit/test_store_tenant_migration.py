"""A database made before tenants (schema 11) upgrades in place on both backends: its
destinations, events and jobs move to the default tenant unchanged, the subscription index
is built from the stored subscriptions, and old idempotency keys still deduplicate."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from hookline.shared.models import DEFAULT_TENANT, Accepted, Duplicate
from hookline.shared.store.backup_restore import restore
from hookline.shared.store.postgres import PostgresStore
from hookline.shared.store.queries import load_migrations
from hookline.shared.store.sqlite import SqliteStore, _split_statements
from tests.conftest import new_event

BEFORE_TENANTS = 11
OLD_ROWS = [
    "INSERT INTO destinations (id, name, url, secret, event_types, max_in_flight, created_at) "
    "VALUES (1, 'old', 'http://127.0.0.1:9/x', 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', "
    "'[\"push\", \"pr.*\"]', 5, 1)",
    "INSERT INTO destinations (id, name, url, secret, event_types, max_in_flight, created_at, "
    "deleted_at) VALUES (2, 'gone~removed-2', 'http://127.0.0.1:9/y', "
    "'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', '[\"*\"]', 5, 1, 2)",
    "INSERT INTO events (id, message_id, source, source_event_id, type, body, received_at) "
    "VALUES (1, 'msg_1', 'api', 'e1', 'push', 'x', 1)",
    "INSERT INTO jobs (id, event_id, destination_id, run_at, created_at, updated_at) "
    "VALUES (1, 1, 1, 1, 1, 1)",
]


async def make_old_database(url: str) -> None:
    if url.startswith("postgresql://"):
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("CREATE TABLE schema_version (version integer NOT NULL)")
            for version, script in load_migrations("postgres"):
                if version <= BEFORE_TENANTS:
                    await conn.execute(script)
                    await conn.execute("INSERT INTO schema_version VALUES ($1)", version)
            for statement in OLD_ROWS:
                await conn.execute(statement.replace("'x'", "'x'::bytea"))
            # identities continue after the rows inserted with explicit ids
            for table in ("destinations", "events", "jobs"):
                await conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                   f"(SELECT max(id) FROM {table}))")
        finally:
            await conn.close()
        return
    db = sqlite3.connect(url)
    with db:
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version, script in load_migrations("sqlite"):
            if version <= BEFORE_TENANTS:
                for statement in _split_statements(script):
                    db.execute(statement)
                db.execute("INSERT INTO schema_version VALUES (?)", (version,))
        for statement in OLD_ROWS:
            db.execute(statement)
    db.close()


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no schema at all): a SQLite path, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "old.db")
        return
    server = request.getfixturevalue("pg_server")
    url = server.create_database(f"old_{uuid.uuid4().hex[:12]}")
    try:
        yield url
    finally:
        server.drop_database(url)


async def test_a_database_from_before_tenants_upgrades_in_place(empty_url, clock):
    store_url = empty_url
    await make_old_database(store_url)
    store = (PostgresStore(store_url, clock=clock) if store_url.startswith("postgresql://")
             else SqliteStore(store_url, clock=clock))
    await store.open()
    try:
        [old] = await store.list_destinations()
        assert (old.name, old.tenant, old.event_types) == ("old", DEFAULT_TENANT,
                                                           ("push", "pr.*"))
        assert [j.id for j in await store.list_jobs()] == [1]
        # The old key (source api, id e1) is the default tenant's: still a duplicate.
        assert isinstance(await store.add_event(new_event("e1")), Duplicate)
        # The index was built from the stored subscriptions (the removed one is not in it).
        for event_id, type_, jobs in (("e2", "push", 1), ("e3", "pr.opened", 1),
                                      ("e4", "issue", 0)):
            result = await store.add_event(new_event(event_id, type_))
            assert isinstance(result, Accepted) and len(result.job_ids) == jobs
        assert (await store.get_tenant(DEFAULT_TENANT)).disabled is False
        # The old job is claimed with its body's bytes (on SQLite the row holds TEXT).
        [claim] = [c for c in await store.claim("w", 10, 30.0, 5) if c.job_id == 1]
        assert claim.body == b"x"
    finally:
        await store.close()


async def test_a_snapshot_from_before_tenants_restores_and_migrates_forward(tmp_path: Path):
    """`hookline restore` of a snapshot older than tenants (no signing_keys table yet: no
    token key to forget) writes the copy; the service migrates it when it opens it."""
    old = tmp_path / "old.db"
    await make_old_database(str(old))
    restored = restore(old, tmp_path / "into", require_manifest=False)
    async with SqliteStore(str(restored)) as store:
        [destination] = await store.list_destinations()
        assert (destination.name, destination.tenant) == ("old", DEFAULT_TENANT)

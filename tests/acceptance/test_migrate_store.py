"""`hookline migrate-store`: a SQLite database moves to PostgreSQL with its queued work."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys

import asyncpg
from procs import ROOT, child_env

from hookline.shared.catalogue import event_type_fields
from hookline.shared.errors import StoreBusy
from hookline.shared.models import AttemptResult, Dead, Done, Retry
from hookline.shared.store.copy import copy_sqlite_to_postgres
from hookline.shared.store.postgres import PostgresStore
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

OK = AttemptResult(started_at=1.0, duration_s=0.01, status_code=200)
FAILED = AttemptResult(started_at=2.0, duration_s=0.02, status_code=503, error=None,
                       response_excerpt="busy")


def hookline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60)


async def test_migrate_store_copies_everything_with_ids(tmp_path, pg_url):
    """Destinations, sources, events (exact bytes), jobs in every state with their leases, and
    attempts arrive with the same ids; new rows get ids after the copied ones; a pending job
    is claimable on PostgreSQL; a second run refuses (target not empty) and changes nothing."""
    db = str(tmp_path / "old.db")
    async with SqliteStore(db) as old:
        for name in ("a", "b"):
            await old.add_destination(name=name, url="http://127.0.0.1:9/", event_types=["*"],
                                      secret="whsec_" + "A" * 32, max_in_flight=5)
        await old.set_paused("b", True, reason="maintenance")
        await old.add_source(name="gh", scheme="github", secret="s" * 32)
        await old.put_event_types([event_type_fields("invoice.paid", {
            "schemas": {"1": {"type": "object"}}, "examples": {"1": {}},
            "validation": "warn"})])
        before_catalogue = (await old.list_event_types(), await old.catalogue_revision())
        await old.add_events([new_event(f"e{i}", body=b'{"x": "\xc3\xa9 ", "i": %d}' % i)
                              for i in range(4)])
        claims = await old.claim("w1", 3, lease_s=600, max_attempts=5)
        await old.finish([(claims[0], Done(), OK),
                          (claims[1], Retry(delay_s=0, error="HTTP 503"), FAILED),
                          (claims[2], Dead(error="HTTP 410"), FAILED)])
        await old.claim("w2", 1, lease_s=600, max_attempts=5)  # one stays running
        before_jobs = await old.list_jobs(limit=1000)
        before_attempts = await old.list_attempts()
        before_destinations = await old.list_destinations()
        before_stats = await old.stats()

    done = hookline("migrate-store", "--from", f"sqlite:///{db}", "--to", pg_url, "--json")
    assert done.returncode == 0, done.stderr
    copied = json.loads(done.stdout)
    assert copied.pop("metric_counts") > 0  # /metrics' maintained figures go along
    assert copied == {"tenants": 1, "destinations": 2, "sources": 1, "events": 4, "jobs": 8,
                      "attempts": 4, "event_types": 1, "event_type_schemas": 1,
                      "catalogue_state": 1}

    async with PostgresStore(pg_url) as new:
        assert await new.list_jobs(limit=1000) == before_jobs
        assert await new.list_attempts() == before_attempts
        assert await new.list_destinations() == before_destinations
        assert [(x.id, x.name, x.secret) for x in await new.list_sources()] == [
            (1, "gh", "s" * 32)]
        assert (await new.list_event_types(), await new.catalogue_revision()) == \
            before_catalogue
        after = await new.stats()
        assert after.jobs_by_status == before_stats.jobs_by_status
        assert after.events == before_stats.events
        [accepted] = await new.add_events([new_event("later")])
        assert accepted.event_id == 5 and min(accepted.job_ids) == 9
        claimed = await new.claim("pg-w", 10, lease_s=30, max_attempts=5)
        assert {c.destination_name for c in claimed} == {"a"}  # b stays paused
        # The pending job of `a` is claimed (exact bytes, its attempt count carried over); the
        # running one keeps its SQLite lease; the new event's job is there too.
        [retried] = [j for j in before_jobs if j.status == "pending" and j.destination == "a"]
        by_event = {c.event_id: c for c in claimed}
        assert set(by_event) == {retried.event_id, 5}
        i = retried.event_id - 1
        assert by_event[retried.event_id].body == b'{"x": "\xc3\xa9 ", "i": %d}' % i
        assert by_event[retried.event_id].attempt == retried.attempts + 1

    again = hookline("migrate-store", "--from", db, "--to", pg_url)
    assert again.returncode == 1 and "empty database only" in again.stderr


def test_migrate_store_refuses_bad_urls(tmp_path):
    """--from must be SQLite and exist, --to must be PostgreSQL: one-line errors, exit 2."""
    wrong_way = hookline("migrate-store", "--from", "postgresql://x@127.0.0.1/db",
                         "--to", "postgresql://y@127.0.0.1/db")
    assert wrong_way.returncode == 2 and "--from must be a SQLite" in wrong_way.stderr
    not_pg = hookline("migrate-store", "--from", str(tmp_path / "a.db"), "--to", "b.db")
    assert not_pg.returncode == 2 and "--to must be a postgresql://" in not_pg.stderr
    missing = hookline("migrate-store", "--from", str(tmp_path / "none.db"),
                       "--to", "postgresql://y@127.0.0.1/db")
    assert missing.returncode == 2 and "no SQLite database" in missing.stderr


def test_migrate_store_refuses_a_database_being_served(tmp_path):
    """A SQLite database whose `hookline serve` lock is held (the service runs) is not
    copied: exit 1, saying to stop the service first; a claim or an event committed after
    the copy would be lost to PostgreSQL."""
    db = tmp_path / "served.db"
    assert hookline("--db", str(db), "init").returncode == 0
    fd = os.open(str(db) + ".serve.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running `hookline serve` holds it
        refused = hookline("migrate-store", "--from", str(db), "--to",
                           "postgresql://y@127.0.0.1:1/db")
    finally:
        os.close(fd)
    assert refused.returncode == 1, refused.stderr
    assert "is being served" in refused.stderr and "stop the service first" in refused.stderr


async def test_a_write_during_the_copy_is_refused_not_left_behind(tmp_path, pg_url):
    """A hookline command writing to the SQLite file while migrate-store copies it (here
    held mid-copy by a PostgreSQL lock on a target table) is refused as busy: nothing
    committed after the snapshot can miss PostgreSQL. Once the copy ends, writes work."""
    db = str(tmp_path / "old.db")
    async with SqliteStore(db) as old:
        await old.add_destination(name="a", url="http://127.0.0.1:9/", event_types=["*"],
                                  secret="whsec_" + "A" * 32, max_in_flight=5)
    async with PostgresStore(pg_url):  # the schema, so its tables can be locked
        pass
    blocker = await asyncpg.connect(pg_url)
    try:
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        copy = asyncio.create_task(copy_sqlite_to_postgres(db, pg_url))
        for _ in range(200):  # until the copy waits for the lock, its snapshot taken
            if await blocker.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted"):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the copy never reached the locked table")
        try:  # opening writes too (the clock's anchor): refused there already
            async with SqliteStore(db, busy_timeout_s=0.3) as writer:
                await writer.add_destination(name="late", url="http://127.0.0.1:9/",
                                             event_types=["*"], secret="whsec_" + "B" * 32,
                                             max_in_flight=5)
        except StoreBusy:
            pass
        else:
            raise AssertionError("a write during the copy was committed")
        await holding.rollback()
        result = await copy
    finally:
        await blocker.close()
    assert result.rows["destinations"] == 1
    async with SqliteStore(db) as after:
        assert [d.name for d in await after.list_destinations()] == ["a"]
        await after.add_destination(name="late", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret="whsec_" + "B" * 32, max_in_flight=5)

"""PostgreSQL-only store behaviour: many "hosts" (store instances) against one server."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections import Counter

import asyncpg
import pytest

from hookline.shared.errors import StoreError
from hookline.shared.models import AttemptResult, Done
from hookline.shared.store import open_store
from hookline.shared.store.pg_limits import PostgresLimits
from hookline.shared.store.postgres import PostgresStore
from hookline.shared.store.queries import load_migrations, load_queries
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)


def test_named_queries_have_the_same_names_on_both_backends():
    """Every SQLite named query exists for PostgreSQL too (the contract of shared/store/queries);
    PostgreSQL may only add `lock_claimable_destinations` (its lock-then-count claim step)."""
    sqlite, postgres = set(load_queries("sqlite")), set(load_queries("postgres"))
    assert sqlite - postgres == set()
    assert postgres - sqlite <= {"lock_claimable_destinations"}


def test_both_backends_have_the_same_migration_steps():
    """Every SQLite migration number has its PostgreSQL counterpart (and no more)."""
    assert ([v for v, _ in load_migrations("postgres")]
            == [v for v, _ in load_migrations("sqlite")])


def test_postgres_store_has_every_store_method_with_the_same_parameters():
    """Each public method of SqliteStore exists on PostgresStore with the same parameters
    (but the SQLite-only diagnostics)."""
    sqlite_only = {"write_lock_stats", "write_lock_waits", "wal_bytes"}
    for name, method in inspect.getmembers(SqliteStore, inspect.isfunction):
        if not name.startswith("_") and name not in sqlite_only:
            assert hasattr(PostgresStore, name), name
            assert (list(inspect.signature(method).parameters)
                    == list(inspect.signature(getattr(PostgresStore, name)).parameters)), name


def test_open_store_selects_postgres_for_its_urls():
    """postgresql:// and postgres:// URLs build a PostgresStore; a path stays SQLite."""
    assert isinstance(open_store("postgresql://u@127.0.0.1:1/db"), PostgresStore)
    assert isinstance(open_store("postgres://u@127.0.0.1:1/db"), PostgresStore)
    assert not isinstance(open_store("x.db"), PostgresStore)


async def test_unreachable_server_is_a_clear_store_error():
    """A server that is not there gives StoreError naming the URL without its password."""
    store = PostgresStore("postgresql://u:sekrit@127.0.0.1:1/db", connect_timeout_s=2)
    with pytest.raises(StoreError, match="cannot connect") as info:
        await store.open()
    assert "sekrit" not in str(info.value)


async def test_max_in_flight_holds_across_hosts_under_concurrent_claims(pg_url):
    """Six store instances (as six hosts) claiming at once never lease more than a
    destination's max_in_flight, and no job is leased twice."""
    hosts = [PostgresStore(pg_url, pool_size=2) for _ in range(6)]
    for h in hosts:
        await h.open()
    try:
        await hosts[0].add_destination(name="two", url="http://127.0.0.1:9/", event_types=["*"],
                                       secret="whsec_" + "A" * 32, max_in_flight=2)
        await hosts[0].add_destination(name="five", url="http://127.0.0.1:9/",
                                       event_types=["*"], secret="whsec_" + "B" * 32,
                                       max_in_flight=5)
        await hosts[0].add_events([new_event(f"e{i}") for i in range(40)])
        for _ in range(3):  # several rounds: claim all at once, check, finish everything
            rounds = await asyncio.gather(*(h.claim(f"w{i}", 10, 30, 5)
                                            for i, h in enumerate(hosts)))
            claims = [c for r in rounds for c in r]
            per_destination = Counter(c.destination_name for c in claims)
            assert per_destination == {"two": 2, "five": 5}
            assert len({c.job_id for c in claims}) == len(claims)
            await hosts[1].finish([(c, Done(), OK) for c in claims])
    finally:
        for h in hosts:
            await h.close()


async def test_notify_wakes_a_waiter_on_another_host(pg_url):
    """wait_for_jobs on one store returns True soon after another store commits new jobs
    (LISTEN/NOTIFY), long before its timeout."""
    async with PostgresStore(pg_url) as ingest, PostgresStore(pg_url) as worker:
        await ingest.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                     secret="whsec_" + "A" * 32, max_in_flight=1)
        assert await worker.wait_for_jobs(0.05) is False  # nothing yet; the listener is up
        waiter = asyncio.create_task(worker.wait_for_jobs(10.0))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await ingest.add_events([new_event("e1")])
        assert await waiter is True
        assert loop.time() - t0 < 5.0


async def test_connections_name_their_process_unless_the_url_names_one(pg_url):
    """Each connection's application_name is `hookline [SLOT] PID` (pg_stat_activity tells
    the hosts' processes apart), unless the URL sets its own."""
    watcher = await asyncpg.connect(pg_url)
    try:
        async def names() -> set[str]:
            return {r["application_name"] for r in await watcher.fetch(
                "SELECT application_name FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()")}

        async with PostgresStore(pg_url) as store:
            await store.stats()
            [ours] = await names()
            assert ours.startswith("hookline ") and ours.endswith(f" {os.getpid()}"), ours
        sep = "&" if "?" in pg_url else "?"
        async with PostgresStore(f"{pg_url}{sep}application_name=mine") as store:
            await store.stats()
            deadline = asyncio.get_running_loop().time() + 5
            while (seen := await names()) != {"mine"}:  # the closed store's may linger
                assert asyncio.get_running_loop().time() < deadline, seen
                await asyncio.sleep(0.05)
    finally:
        await watcher.close()


async def test_lease_times_come_from_the_database_clock(pg_url):
    """A claim's lease_until is the server's now + lease_s, whatever the host believes."""
    async with PostgresStore(pg_url) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret="whsec_" + "A" * 32, max_in_flight=1)
        await store.add_events([new_event("e1")])
        [claim] = await store.claim("w", 1, lease_s=30, max_attempts=5)
        async with store._tx() as tx:  # read the server's clock
            server_now = await tx.now()
        assert server_now + 25 < claim.lease_until <= server_now + 30


async def test_check_writable_passes_and_refuses_a_read_only_database(pg_url, pg_server):
    """check_writable succeeds on a writable database, changes nothing, and raises
    StoreError once the database is read-only (as on a standby)."""
    import asyncpg

    async with PostgresStore(pg_url) as store:
        await store.check_writable()
        assert (await store.stats()).events == 0
        name = pg_url.rsplit("/", 1)[1]
        admin = await asyncpg.connect(pg_server.url())
        await admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
        await admin.close()
        await store._pool.expire_connections()  # new sessions: read-only
        with pytest.raises(StoreError, match="not writable"):
            await store.check_writable()


async def test_sources_crud_on_both_backends(store):
    """Sources: add, refuse a taken name (Conflict), get, list, soft-remove (the name is
    free again), NotFound for missing names: the same on SQLite and PostgreSQL."""
    from hookline.shared.errors import Conflict, NotFound

    added = await store.add_source(name="gh", scheme="github", secret="s" * 32)
    with pytest.raises(Conflict):
        await store.add_source(name="gh", scheme="token", secret="t" * 32)
    assert (await store.get_source("gh")).id == added.id
    assert [s.name for s in await store.list_sources()] == ["gh"]
    await store.remove_source("gh")
    assert await store.list_sources() == []
    with pytest.raises(NotFound):
        await store.get_source("gh")
    with pytest.raises(NotFound):
        await store.remove_source("gh")
    again = await store.add_source(name="gh", scheme="token", secret="t" * 32)
    assert again.id != added.id and again.scheme == "token"


def _scan_rows(plan: dict) -> list[tuple[str, float]]:
    """(node type, actual rows per loop) of every scan node in an EXPLAIN (ANALYZE, FORMAT
    JSON) plan tree."""
    found = [(plan["Node Type"], plan["Actual Rows"])] if "Scan" in plan["Node Type"] else []
    for child in plan.get("Plans", []):
        found += _scan_rows(child)
    return found


@pytest.mark.parametrize("analyzed", [False, True], ids=["no_statistics", "analyzed"])
async def test_claim_reads_only_what_it_takes_however_long_the_backlog(pg_url, analyzed):
    """With a 4,000-job backlog, the claim's queries read about as many rows as they return:
    due_jobs no more than its limit (it walks the due index in order instead of sorting the
    destination's whole backlog), lock_claimable_destinations one row per destination of the
    claim's window (claim_window's own reads: tests/unit/test_claim_window.py). A claim's cost
    must not grow with the backlog, neither with table statistics nor before autovacuum has
    gathered any (a burst into a new table)."""
    import asyncpg

    from hookline.shared.store.postgres import _query  # the named SQL itself

    async with PostgresStore(pg_url) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret="whsec_" + "A" * 32, max_in_flight=50)
        for batch in range(8):
            await store.add_events([new_event(f"e{batch}-{i}") for i in range(500)])
    conn = await asyncpg.connect(pg_url)
    try:
        if analyzed:
            await conn.execute("ANALYZE")
        values = {"destination_ids": [1], "limits": [10], "limit": 10, "pending_limit": 10,
                  "max_attempts": 5, "test_now_s": None}
        for name, most in (("due_jobs", 10), ("lock_claimable_destinations", 1)):
            sql, names = _query(name)
            async with conn.transaction():  # FOR UPDATE: locks end with the transaction
                [[plan]] = await conn.fetch("EXPLAIN (ANALYZE, FORMAT JSON) " + sql,
                                            *[values[n] for n in names])
            scans = _scan_rows(json.loads(plan)[0]["Plan"])
            assert scans and max(rows for _, rows in scans) <= most, (name, scans)
    finally:
        await conn.close()


async def test_the_servers_tcp_user_timeout_outlasts_the_pools_reset(pg_url):
    """The server's `tcp_user_timeout` is set after connecting (older servers refuse it in
    the startup packet), and asyncpg's reset (RESET ALL) on each release of a connection to
    the pool would return it to the server's default (0: none): the pool's reset sets it
    again. Read from the connection every transaction of the store uses."""
    settings = await _late_settings_after_resets(pg_url, PostgresLimits(
        tcp_user_timeout_s=7.0, client_check_interval_s=0.3))
    assert settings == {"tcp_user_timeout": "7000", "client_connection_check_interval": "300"}


async def _late_settings_after_resets(pg_url: str, limits: PostgresLimits) -> dict[str, str]:
    """The late settings as the store's one pooled connection has them after three
    transactions, each acquired, then released (reset)."""
    async with PostgresStore(pg_url, pool_size=1, limits=limits) as store:
        for _ in range(3):
            await store.list_destinations()
        assert store._pool is not None
        async with store._pool.acquire() as conn:
            return dict(await conn.fetch(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('tcp_user_timeout', 'client_connection_check_interval')"))


async def _sessions_waiting(conn: asyncpg.Connection) -> int:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    return int(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "wait_event_type = 'Lock' AND datname = current_database()"))


async def test_a_transaction_whose_client_left_ends_while_it_waits_for_a_lock(pg_url):
    """A store transaction cancelled while it waits for a row lock (a worker stopped, or its
    deadline passed): the store terminates its connection, and the server, checking its
    client every `client_check_interval_s`, ends the wait, the transaction and the locks it
    held at once, not at `lock_timeout_s` (30 s here; 5 s by default, the time a killed
    worker's transaction kept every lock it held before)."""
    limits = PostgresLimits(lock_timeout_s=30.0, client_check_interval_s=0.2)
    async with PostgresStore(pg_url, limits=limits) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret="whsec_" + "A" * 32, max_in_flight=5)
        blocker = await asyncpg.connect(pg_url)
        try:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM destinations WHERE name = 'd' FOR UPDATE")
                pause = asyncio.ensure_future(store.set_paused("d", True, "test"))
                for _ in range(200):
                    if await _sessions_waiting(blocker) == 1:
                        break
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("the pause never waited for the destination's lock")
                pause.cancel()
                waited = 0.0
                while await _sessions_waiting(blocker) and waited < 5.0:
                    await asyncio.sleep(0.05)
                    waited += 0.05
                assert waited < 5.0, "the abandoned transaction still waits for its lock"
        finally:
            await blocker.close()


async def test_a_server_that_refuses_the_client_check_is_served_without_it(pg_url):
    """A server whose platform cannot tell a closed socket mid-query refuses a non-zero
    `client_connection_check_interval` (22023, as it refuses a value out of range, which
    stands in for it here): the store does without the check, on every connection and
    after every reset, and keeps the other late settings."""
    settings = await _late_settings_after_resets(pg_url, PostgresLimits(
        tcp_user_timeout_s=7.0, client_check_interval_s=1e10))
    assert settings == {"tcp_user_timeout": "7000", "client_connection_check_interval": "0"}

"""Every operation of the store contract, run on both backends by one script.

The script goes through a recorder that notes each Store method it calls; the test then
checks that no method of the Protocol was left out, so a new operation must be added here
(and so runs on SQLite and PostgreSQL alike)."""

from __future__ import annotations

import inspect
import re
import sqlite3
from typing import Any

import asyncpg
import pytest

from hookline.shared.catalogue import event_type_fields
from hookline.shared.errors import ConfigError, Conflict, NotFound
from hookline.shared.models import (
    Accepted,
    AttemptResult,
    ClaimRequest,
    Dead,
    Done,
    Duplicate,
    Retry,
)
from hookline.shared.operator_models import EventFilter, JobSelection
from hookline.shared.policy.delivery import BreakerPolicy
from hookline.shared.store import SqliteDiagnostics, Store
from hookline.shared.store.postgres import PostgresStore, _query
from hookline.shared.store.queries import load_queries, parse_blocks
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

SECRET = "whsec_" + "A" * 32
OTHER_SECRET = "whsec_" + "B" * 32
SAMPLE_VALUES = {"scheme": "token", "validation": "off", **dict.fromkeys(
    ("pairs", "claims", "attempts", "job_ids", "lease_tokens", "destination_ids",
     "event_ids", "tenants", "keys", "deltas", "ids"), "[]")}
"""Parameter values the SQLite queries accept on an empty database (the rest get 1)."""


class Recorder:
    """Forwards to the store and remembers which methods were called."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.called: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.called.add(name)
        return getattr(self.store, name)


def contract_methods() -> set[str]:
    return {name for name, _ in inspect.getmembers(Store, inspect.isfunction)
            if not name.startswith("_")}


async def test_every_store_operation_runs_on_both_backends(store, clock):
    """Each operation of the contract, with its main result checked, on each backend."""
    s: Any = Recorder(store)
    dest = await s.add_destination(name="d", url="http://127.0.0.1:9/x", secret=SECRET,
                                   event_types=["*"], max_in_flight=5, headers={"X-A": "1"})
    with pytest.raises(Conflict):
        await s.add_destination(name="d", url="http://127.0.0.1:9/x", secret=SECRET,
                                event_types=["*"], max_in_flight=5)
    assert [d.name for d in await s.list_destinations()] == ["d"]
    assert (await s.get_destination("d")).id == dest.id
    assert (await s.update_destination("d", max_in_flight=7)).max_in_flight == 7
    rotated = await s.rotate_secret("d", OTHER_SECRET, overlap_s=60)
    assert rotated.secret == OTHER_SECRET

    first = await s.add_event(new_event("e1"))
    assert isinstance(first, Accepted) and len(first.job_ids) == 1
    batch = await s.add_events([new_event("e2"), new_event("e1"), new_event("e3")])
    assert [type(r) for r in batch] == [Accepted, Duplicate, Accepted]
    assert await s.add_backlog([new_event("e1"), new_event("e3")]) == 0  # known: no jobs

    claims = await s.claim("w1", 2, lease_s=30, max_attempts=5)
    assert len(claims) == 2 and claims[0].secrets == (OTHER_SECRET, SECRET)
    expired, was_signing = await s.expire_previous_secret("d")
    assert was_signing and expired.previous_secret is None and expired.secret == OTHER_SECRET
    assert await s.extend(claims, lease_s=60) == []
    ok = AttemptResult(started_at=clock(), duration_s=0.01, status_code=200)
    failed = AttemptResult(started_at=clock(), duration_s=0.01, status_code=500)
    assert await s.finish([(claims[0], Done(), ok)]) == [True]
    kept, more, waiting = await s.finish_and_claim(
        [(claims[1], Retry(delay_s=3600, error="500"), failed)],
        BreakerPolicy(), ClaimRequest(worker="w1", limit=5, lease_s=30, max_attempts=5))
    assert kept == [True] and len(more) == 1 and not waiting
    assert await s.hand_back(more) == 1
    [again] = await s.claim("w1", 1, lease_s=30, max_attempts=5)
    assert await s.hand_back_unheld("w1", "0000000a", "", []) == []  # none under that tag
    assert await s.finish([(again, Dead(error="gone"), failed)]) == [True]
    assert await s.wait_for_jobs(0.05) is False  # nothing due: the retry is an hour away
    s.pass_on_wake_up()  # a timed-out wait has no wake-up to pass on: nothing happens

    assert {j.status for j in await s.list_jobs()} == {"done", "pending", "dead"}
    assert len(await s.list_attempts()) == 4
    [dead] = [d.job for d in await s.list_dead()]
    assert (await s.get_job(dead.id)).job.status == "dead"
    assert (await s.event_body(dead.id, 4)).head == new_event("e3").body[:4]
    assert await s.replay(job_id=dead.id, dry_run=True) == 1
    assert await s.replay(all_dead=True) == 1
    with pytest.raises(ConfigError):
        await s.replay()
    assert (await s.find_event("e1")).event.source_event_id == "e1"
    assert len(await s.list_events(EventFilter(destination="d"))) == 3
    # dry runs (more: test_store_events.py): the done job, and the retry an hour away
    assert (await s.resend(JobSelection(destination="d"), dry_run=True)).count == 1
    assert (await s.retry_now(JobSelection(destination="d"), dry_run=True)).count == 1
    stats = await s.stats()
    assert stats.events == 3 and stats.jobs_by_status["done"] == 1
    [summary] = await s.destination_summaries()
    assert summary.name == "d"
    buckets = await s.throughput(window_s=120, bucket_s=60)
    assert sum(b.events for b in buckets) == 3
    await s.set_paused("d", True, reason="operator")
    await s.set_paused("d", False)
    await s.check_writable()
    figures = await s.maintenance()
    if isinstance(store, SqliteDiagnostics):  # the WAL checkpoint, and its figures
        assert set(figures) == {"busy", "log_frames", "checkpointed_frames", "wal_bytes"}
        health = await s.health()
        assert health.backend == "sqlite" and health.wal_check is not None
        assert health.wal_bytes == store.wal_bytes() >= 0 and not health.degraded
        assert [g.name for g in health.gauges] == ["hookline_sqlite_wal_bytes",
                                                   "hookline_sqlite_wal_limit_bytes"]
        assert store.write_lock_stats()["hold"]["count"] > 0
    else:
        health = await s.health()
        assert figures == {} and health.backend == "postgresql"
        assert (health.wal_bytes, health.wal_check, health.gauges) == (None, None, ())
    assert await s.fold_metric_deltas() >= 0  # PostgreSQL's deltas folded, or none
    [before] = (await s.metric_figures(100)).destinations
    assert before.attempts["delivered"] == 1
    assert before.latency is not None and before.latency.count == 1
    assert (before.name, before.paused) == ("d", False)
    page, next_after = await s.destination_figures(after_id=0, limit=5)
    assert page == [before] and next_after is None
    clock.advance(7200)
    assert await s.now_s() == clock()  # the clock the store writes with (here: the test's)
    purged = await s.purge(bodies_before_s=clock(), metadata_before_s=clock() - 3600,
                           dedupe_before_s=clock() - 3600)
    # The delivered job and its one attempt end; its event loses its body, then its key.
    assert (purged.bodies, purged.attempts, purged.jobs, purged.events) == (1, 1, 1, 1)
    # /metrics' counts keep what the purge deleted: they never go down.
    [after] = (await s.metric_figures(100)).destinations
    assert (after.attempts, after.latency) == (before.attempts, before.latency)
    await s.recount_metrics()  # the repair path keeps the counters
    [recounted] = (await s.metric_figures(100)).destinations
    assert recounted == after

    source = await s.add_source(name="gh", scheme="token", secret="t" * 32)
    with pytest.raises(Conflict):  # more of sources: test_sources_crud_on_both_backends
        await s.add_source(name="gh", scheme="token", secret="t" * 32)
    got = await s.get_source("gh")
    assert [x.id for x in await s.list_sources()] == [got.id] == [source.id]
    await s.remove_source("gh")
    assert await s.remove_destination("d") == 2  # the pending retry and the replayed job
    with pytest.raises(NotFound):
        await s.get_destination("d")

    key = await s.token_signing_key("tenant_tokens")
    assert len(key) == 32 and await s.token_signing_key("tenant_tokens") == key
    state = await s.tenant_token_state("_default")
    assert state.exists and state.token_epoch is not None and state.now_s == clock()
    assert not (await s.tenant_token_state("nobody")).exists
    await s.add_destination(name="t", url="http://127.0.0.1:9/x", secret=SECRET,
                            event_types=["order.*"], max_in_flight=5)
    sent = await s.send_test_event("t", tenant="_default")
    assert [j.id for j in await s.list_tenant_jobs("_default", destination="t")] == [sent.job_id]
    assert (await s.destination_stats("t", tenant="_default", window_s=60)).pending == 1
    assert await s.tenant_event_types("_default") == ["hookline.ping", "order.*", "push"]
    changed = await s.update_destination("t", filter={"data.n": {"$gte": 2}})
    assert changed.filter == {"data.n": {"$gte": 2}}
    kept, turned_away = await s.add_events([
        new_event("f2", "order.x", b'{"id":"f2","type":"order.x","data":{"n":2}}'),
        new_event("f1", "order.x", b'{"id":"f1","type":"order.x","data":{"n":1}}')])
    assert isinstance(kept, Accepted) and len(kept.job_ids) == 1
    assert isinstance(turned_away, Accepted) and turned_away.job_ids == ()
    [t_figures] = [d for d in (await s.destination_figures())[0] if d.name == "t"]
    assert t_figures.filtered == 1
    tried = await s.filter_test("t", tenant="_default", last=2)
    assert [(r.event_id, r.matched) for r in tried] == [(turned_away.event_id, False),
                                                        (kept.event_id, True)]
    assert [r.matched for r in await s.filter_test("t", use_stored=False, last=2)] == [True] * 2

    tenant, created = await s.put_tenant("acme", TenantFields(max_destinations=3))
    assert created and (await s.get_tenant("acme")).max_destinations == 3
    assert [t.id for t in await s.list_tenants(after="_default")] == ["acme"]
    assert await s.tenant_destination_counts(["_default", "acme", "ghost"]) == {
        "_default": 1, "acme": 0, "ghost": 0}  # "t", the test delivery's
    await s.add_destination(name="t", url="http://127.0.0.1:9/x", secret=SECRET,
                            event_types=["*"], max_in_flight=5, tenant="acme")
    assert await s.destination_tenants("t", first="acme") == (["acme", "_default"], 2)
    assert await s.destination_tenants("t", first="_default", limit=1) == (["_default"], 2)
    assert await s.destination_tenants("d") == ([], 0)  # removed: named d~removed-ID
    assert await s.destination_tenants(f"d~removed-{dest.id}") == (["_default"], 1)
    gone = f"d~removed-{dest.id}"
    assert await s.removed_destination_names("d", tenant="_default") == ([gone], 1)
    assert await s.removed_destination_names("d", tenant="acme") == ([], 0)
    assert await s.removed_destination_names("t", tenant="_default") == ([], 0)  # t is live
    again = await s.add_destination(name="d", url="http://127.0.0.1:9/x", secret=SECRET,
                                    event_types=["x"], max_in_flight=5)
    await s.remove_destination("d")
    assert await s.removed_destination_names("d", tenant="_default") == (
        [f"d~removed-{again.id}", gone], 2)  # newest first
    assert await s.removed_destination_names("d", tenant="_default", limit=1) == (
        [f"d~removed-{again.id}"], 2)
    assert await s.has_destination("t", tenant="acme")
    assert not await s.has_destination("t", tenant="ghost")  # only _default and acme have one
    assert not await s.has_destination("d", tenant="_default")  # removed: d~removed-ID
    assert await s.has_destination(f"d~removed-{dest.id}", tenant="_default")
    assert (await s.revoke_tenant_tokens("acme")).token_epoch != tenant.token_epoch
    assert (await s.delete_tenant("acme")).destinations == 1
    assert await s.tenant_was_deleted("_default") is False  # live
    assert await s.deleted_tenants(["acme", "_default"]) == {"acme"}  # acme: no row now

    # The event-type catalogue (tests/unit/test_store_catalogue.py checks it in detail).
    revision = await s.catalogue_revision()
    [(stored, created)] = await s.put_event_types([event_type_fields(
        "order.paid", {"schemas": {"1": {"type": "object"}}, "validation": "warn"})])
    assert created and stored.latest_version == 1
    assert [t.name for t in await s.list_event_types()] == ["order.paid"]
    assert (await s.get_event_type("order.paid")).validation == "warn"
    assert (await s.archive_event_type("order.paid")).archived
    await s.remove_event_type("order.paid")
    assert await s.catalogue_revision() == revision + 3

    s.called.discard("store")
    assert contract_methods() - s.called - {"open", "close"} == set()


def test_only_sqlite_reports_write_lock_figures(tmp_path):
    """Write-lock figures are SQLite's diagnostics, not part of the contract."""
    assert {"write_lock_stats", "write_lock_waits", "wal_bytes"} & contract_methods() == set()
    assert isinstance(SqliteStore(str(tmp_path / "x.db")), SqliteDiagnostics)
    assert not isinstance(PostgresStore("postgresql://u@127.0.0.1:1/db"), SqliteDiagnostics)


async def test_same_named_queries_return_the_same_columns(pg_url, tmp_path):
    """Each named query answers with the same column names, in the same order, on SQLite
    (run on an empty database, rolled back) and PostgreSQL (prepared, not run)."""
    path = str(tmp_path / "columns.db")
    async with SqliteStore(path):
        pass  # creates the schema
    sqlite_columns: dict[str, list[str]] = {}
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for name, sql in load_queries("sqlite").items():
            db.execute("BEGIN")
            cursor = db.execute(sql, {p: SAMPLE_VALUES.get(p, 1)
                                      for p in re.findall(r":(\w+)", sql)})
            sqlite_columns[name] = [d[0] for d in cursor.description or ()]
            db.execute("ROLLBACK")
    finally:
        db.close()
    async with PostgresStore(pg_url):
        pass
    conn = await asyncpg.connect(pg_url)
    try:
        for name, columns in sqlite_columns.items():
            statement = await conn.prepare(_query(name)[0])
            assert [a.name for a in statement.get_attributes()] == columns, name
    finally:
        await conn.close()


BATCH_COLUMNS = {
    ("extend_lease", "claims"): {"job_ids", "lease_tokens"},
    ("finish_delivered", "claims"): {"job_ids", "lease_tokens", "waited_s"},
    ("insert_attempt", "claims"): {"job_ids", "attempts", "lease_tokens"},
    ("record_attempts", "attempts"): {
        "lease_tokens", "started_ats", "durations_s", "status_codes", "errors",
        "response_excerpts", "response_headers", "locations"},
    ("fan_out_view", "keys"): {"tenant_id", "pattern"},
    ("fan_out_view", "tenants"): {"id"},
    ("create_tenants", "tenants"): {"id", "epoch"},
    ("due_jobs", "offers"): {"destination_ids", "limits"},
    ("tenant_metadata", "tenants"): {"id"},
}
"""A batch parameter (hookline.shared.store.ops.Rows) reaches SQLite as one JSON array of arrays
under its own name and PostgreSQL as one array per column: (query, SQLite name) -> the columns."""
SQLITE_IGNORES: dict[str, set[str]] = {}
"""Parameters the logic passes that SQLite's query does not read (none at present)."""
POSTGRES_ONLY = {"lock_claimable_destinations"}
"""PostgreSQL's lock-then-count step of a claim (its claimers run concurrently)."""


def _sqlite_parameters(sql: str) -> set[str]:
    """The :named parameters sqlite3 binds in `sql` (comment lines are not SQL)."""
    text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return set(re.findall(r"(?<![:\w]):([a-z_][a-z0-9_]*)", text))


def test_both_backends_define_the_same_queries_with_the_same_parameters():
    """Every named query exists in both dialects (common.sql, sqlite.sql, postgres.sql as
    loaded) and takes the same parameter names: PostgreSQL's as its driver binds them
    (`:now` is its `hookline_now(:test_now_s)`), SQLite's as sqlite3 binds them, a batch
    expanded into its columns. So the logic can call each query one way on both."""
    sqlite, postgres = load_queries("sqlite"), load_queries("postgres")
    assert set(sqlite) == set(postgres) - POSTGRES_ONLY
    differences = {}
    for name, sql in sqlite.items():
        expected = set()
        for param in _sqlite_parameters(sql) | SQLITE_IGNORES.get(name, set()):
            expected |= BATCH_COLUMNS.get((name, param), {param})
        expected = {"test_now_s" if p == "now" else p for p in expected}
        bound = set(_query(name)[1])
        if expected != bound:
            differences[name] = (sorted(expected - bound), sorted(bound - expected))
    assert differences == {}, "(SQLite only, PostgreSQL only) parameters per query"


def test_finish_retry_is_one_query_of_a_delay():
    """A retry's next attempt is `now + delay_s` on the store's clock in both dialects: one
    text (common.sql), no instant from the caller's host."""
    assert load_queries("sqlite")["finish_retry"] == load_queries("postgres")["finish_retry"]
    assert _sqlite_parameters(load_queries("sqlite")["finish_retry"]) == {
        "job_id", "lease_token", "error", "delay_s", "now"}


def test_a_query_file_slip_is_refused_when_loaded():
    """A comment line inside a query that reads `-- word: ...` starts a query of its own,
    leaving the one before it without a statement; a name given twice would hide the first.
    Both are refused when the file is read, naming the query, rather than failing later as
    a missing statement or the wrong SQL."""
    slipped = ("-- mark_jobs: marks them\n-- statuses: pending and running, in one\n"
               "UPDATE jobs SET ordered = 1\n")
    with pytest.raises(ValueError, match="'mark_jobs' holds no statement"):
        parse_blocks(slipped, "common.sql")
    twice = "-- a: one\nSELECT 1\n\n-- a: again\nSELECT 2\n"
    with pytest.raises(ValueError, match="'a' is defined twice"):
        parse_blocks(twice, "common.sql")
    assert parse_blocks("-- a: one\n-- (why)\nSELECT 1\n", "x.sql") == {
        "a": "-- (why)\nSELECT 1"}

"""SQLite's writers append their metric deltas to a log (schema 21) that folds itself into
metric_counts each time it reaches 1,024 rows and whenever the figures are read, so the
figures stay exact while a commit writes no counter page per destination it reached."""

from __future__ import annotations

import sqlite3

import pytest

from hookline.shared.signing import generate_secret
from hookline.shared.store.copy import copy_sqlite_to_postgres
from hookline.shared.store.postgres import PostgresStore
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

FOLD_ROWS = 1024  # sqlite_migrations/021_metric_log.sql


def raw(path: str, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def pending_counts(path: str, table: str) -> dict[int, int]:
    """Pending jobs per destination: from the rows (`jobs`) or as maintained."""
    if table == "jobs":
        sql = "SELECT destination_id, count(*) FROM jobs WHERE status = 'pending' GROUP BY 1"
    else:
        sql = ("SELECT destination_id, n FROM metric_counts WHERE family = 'jobs' "
               "AND label = 'pending' AND destination_id <> 0 AND n <> 0")
    return {int(d): int(n) for d, n in raw(path, sql)}  # type: ignore[call-overload]


@pytest.mark.sqlite_only
async def test_the_log_folds_itself_at_its_limit_and_before_reads(store, destination_factory):
    """Ingest to 64 destinations appends about 130 delta rows a commit: the log never holds
    FOLD_ROWS rows, what it folded is in metric_counts, and a read of the figures folds the
    rest (the log then empty, the maintained pending counts those of the rows)."""
    for i in range(64):
        await destination_factory(f"d{i}", event_types=(f"t{i}",))
    longest = 0
    for batch in range(40):
        await store.add_events([new_event(f"e{batch}-{i}", type_=f"t{i}") for i in range(64)])
        longest = max(longest, int(raw(store.path, "SELECT count(*) FROM metric_count_deltas")
                                   [0][0]))  # type: ignore[call-overload]
    assert 0 < longest < FOLD_ROWS
    waiting = int(raw(store.path, "SELECT count(*) FROM metric_count_deltas")[0][0])  # type: ignore[call-overload]
    assert 0 < waiting < FOLD_ROWS  # 40 commits x ~130 rows: the log folded on its own
    folded = pending_counts(store.path, "metric_counts")
    assert folded and sum(folded.values()) < 40 * 64  # some folded, the last ones not yet
    stats = await store.stats()
    assert raw(store.path, "SELECT count(*) FROM metric_count_deltas")[0][0] == 0
    assert pending_counts(store.path, "metric_counts") == pending_counts(store.path, "jobs")
    assert stats.jobs_by_status.get("pending") == 40 * 64


@pytest.mark.sqlite_only
async def test_an_explicit_fold_reports_what_it_folded(store, destination_factory):
    await destination_factory("d1")
    await store.add_events([new_event("e1"), new_event("e2")])
    waiting = int(raw(store.path, "SELECT count(*) FROM metric_count_deltas")[0][0])  # type: ignore[call-overload]
    assert waiting > 0
    assert await store.fold_metric_deltas() == waiting
    assert await store.fold_metric_deltas() == 0


async def test_migrate_store_carries_the_deltas_not_yet_folded(tmp_path, pg_url):
    """`hookline migrate-store` folds the source's log before it copies metric_counts, so
    the target's figures count the last events too."""
    source = str(tmp_path / "source.db")
    async with SqliteStore(source) as sqlite:
        await sqlite.add_destination(name="d", url="http://127.0.0.1:9/d",
                                     secret=generate_secret(), event_types=["*"],
                                     max_in_flight=1)
        await sqlite.add_events([new_event("e1"), new_event("e2")])
    assert raw(source, "SELECT count(*) FROM metric_count_deltas")[0][0] != 0
    await copy_sqlite_to_postgres(source, pg_url)
    async with PostgresStore(pg_url) as target:
        stats = await target.stats()
    assert stats.jobs_by_status.get("pending") == 2 and stats.events == 2

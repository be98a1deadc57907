"""What one `/metrics` scrape costs with millions of jobs stored (SQLite).

    python -m hookline.rehearsal.metrics_scale --jobs 10000000 --destinations 10000 \\
        --path DIR/h.db

builds a database of `--jobs` jobs (one per event, with one attempt each unless pending),
spread over `--destinations` destinations, written straight in SQL (recursive CTEs: minutes,
not the hours ingest would take) at schema version :data:`FILL_SCHEMA`, the last one before
the store kept its figures; opening it then applies the later migrations, as an upgrade
would (011 derives the maintained figures from the rows once; its time is printed). Then
it times the database's part of a scrape, what ingest's `scrape()` reads from the store and
renders (:meth:`Store.metric_figures` and :func:`hookline.ingest.metrics.render`), a few
times, and prints each figure and the query plan of every query a scrape runs, so one can see
that none reads the jobs table. The file is kept (`--path`): `--reuse` times it again
without rebuilding. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time

from hookline.ingest.metrics import render
from hookline.shared.store import open_store
from hookline.shared.store.queries import load_migrations, load_queries

SERIES_MAX = 100
"""Destinations shown with series of their own (the default metrics_destination_series_max)."""
FILL_SCHEMA = 10
"""The schema the rows are written at (later migrations run when the store opens)."""
STATUS_SHARES = (("done", 80), ("dead", 9), ("pending", 10), ("running", 1))
"""Share of each job status, percent: most of a long-lived store is finished history."""
SCRAPE_QUERIES = ("fold_metric_deltas", "destination_ranking", "metric_counts_of")
"""The named queries one scrape runs (Store.metric_figures)."""


def _status_case(column: str) -> str:
    """A SQL CASE giving a job's status from `column` (0..99) by STATUS_SHARES."""
    parts, upto = [], 0
    for status, share in STATUS_SHARES:
        upto += share
        parts.append(f"WHEN {column} < {upto} THEN '{status}'")
    return "CASE " + " ".join(parts) + " END"


def create_schema(path: str) -> None:
    """A new SQLite file at schema version FILL_SCHEMA, by the store's own migration steps."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version, script in load_migrations("sqlite"):
        if version <= FILL_SCHEMA:
            _run_script(db, script)
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode = WAL")
    db.close()


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Run a migration script's statements inside the open transaction."""
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    for statement in "\n".join(lines).split(";\n"):
        if statement.strip().rstrip(";"):
            db.execute(statement)


def fill_sqlite(path: str, jobs: int, destinations: int) -> None:
    """Write `destinations` destinations, `jobs` events with one job each, and an attempt per
    job that was claimed, into the SQLite file `path`, in SQL (no fsync)."""
    t0 = time.time() - 86_400.0  # a day of history; a tenth of the pending jobs not yet due
    step = 86_400.0 / jobs
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("PRAGMA cache_size = -1000000")
    db.execute("BEGIN")
    db.execute(
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
        "INSERT INTO destinations (name, url, secret, created_at) "
        "SELECT 'd' || i, 'https://example.com/hook/' || i, 'whsec_' || hex(randomblob(16)), ? "
        "FROM c", (destinations, t0))
    db.execute(
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
        "INSERT INTO events (id, message_id, source, source_event_id, type, body, received_at) "
        "SELECT i, 'msg_' || i, 'api', 'e' || i, 'bench.event', X'7b7d', ? + i * ? FROM c",
        (jobs, t0, step))
    # A multiplicative hash, so every destination (i % destinations) gets every status.
    status = _status_case("(i * 2654435761 % 4294967291) % 100")
    db.execute(
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "  # noqa: S608  (status: a constant CASE)
        "INSERT INTO jobs (id, event_id, destination_id, status, attempts, run_at, lease_token, "
        "lease_owner, lease_until, created_at, updated_at, finished_at) "
        "SELECT i, i, 1 + i % ?, s, CASE s WHEN 'pending' THEN 0 ELSE 1 END, "
        "  r + CASE WHEN s = 'pending' AND i % 10 = 0 THEN 86400 * 2 ELSE 0.5 END, "
        "  CASE s WHEN 'running' THEN 'tok' || i END, CASE s WHEN 'running' THEN 'w' END, "
        "  CASE s WHEN 'running' THEN r + 86400 * 2 END, r, r, "
        "  CASE WHEN s IN ('done', 'dead') THEN r + (i % 1000) * 0.01 END "
        f"FROM (SELECT i, {status} AS s, ? + i * ? AS r FROM c)",
        (jobs, destinations, t0, step))
    db.execute(
        "INSERT INTO attempts (job_id, attempt, worker, lease_token, started_at, duration_s, "
        "status_code, error) "
        "SELECT id, 1, 'w', coalesce(lease_token, 'a' || id), created_at, "
        "  CASE WHEN status <> 'running' THEN 0.05 END, "
        "  CASE status WHEN 'done' THEN 200 WHEN 'dead' THEN 500 END, "
        "  CASE status WHEN 'dead' THEN 'HTTP 500' END "
        "FROM jobs WHERE status <> 'pending' ORDER BY id")
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.close()


def explain_sqlite(path: str, names: tuple[str, ...]) -> dict[str, list[str]]:
    """EXPLAIN QUERY PLAN of each named query (every parameter bound to 0)."""
    queries = load_queries("sqlite")
    db = sqlite3.connect(path)
    plans = {}
    for name in names:
        sql = queries[name]
        params = {p: 0 for p in re.findall(r"(?<![:\w]):([a-z_][a-z0-9_]*)", sql)}
        if "destination_ids" in params:  # a JSON list on SQLite
            params["destination_ids"] = "[0, 1]"  # type: ignore[assignment]
        plans[name] = [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params)]
    db.close()
    return plans


async def time_scrapes(path: str, rounds: int) -> list[float]:
    """Seconds each of `rounds` store parts of a scrape took (the first on a cold cache)."""
    store = open_store(path)
    start = time.perf_counter()
    await store.open()
    print(f"store opened (pending migrations applied) in {time.perf_counter() - start:.1f} s")
    took = []
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            render(await store.metric_figures(SERIES_MAX))
            took.append(time.perf_counter() - start)
    finally:
        await store.close()
    return took


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the database, time scrapes, print figures and plans."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.metrics_scale",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--destinations", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--path", help="SQLite file to build (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="time the file at --path as is")
    parser.add_argument("--build-only", action="store_true",
                        help="build the file at schema FILL_SCHEMA and stop (no migration)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.destinations < 1 or args.rounds < 1:
        parser.error("--jobs, --destinations and --rounds must be at least 1")
    path = args.path or os.path.join(tempfile.mkdtemp(prefix="hookline-metrics-"), "h.db")
    if not args.reuse:
        if os.path.exists(path):
            print(f"{path} exists; remove it or pass --reuse", file=sys.stderr)
            return 2
        start = time.perf_counter()
        create_schema(path)
        fill_sqlite(path, args.jobs, args.destinations)
        print(f"filled {args.jobs:,} jobs over {args.destinations:,} destinations in "
              f"{time.perf_counter() - start:.0f} s: {path} "
              f"({os.path.getsize(path) / 1e9:.1f} GB)")
        if args.build_only:
            return 0
    elif not os.path.exists(path):
        print(f"{path} does not exist", file=sys.stderr)
        return 2
    took = asyncio.run(time_scrapes(path, args.rounds))
    print("scrape (store figures + exposition), ms: "
          + ", ".join(f"{t * 1000:.1f}" for t in took)
          + f"; median {statistics.median(took) * 1000:.1f}")
    for name, plan in explain_sqlite(path, SCRAPE_QUERIES).items():
        print(f"  {name}: " + " | ".join(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`hookline bench --scenario backlog`: claims and worker memory with a big backlog.

Starts like `hookline bench` (rehearsal/bench.py): a fresh database, the receiver fixture
(3 endpoints d1, d2, d3 = 3 destinations per event) and `hookline serve` with W workers,
everything on 127.0.0.1.

N pending jobs (default 1,000,000) are written through the store's own ingest call
(rehearsal/backlog_seed.py: one event, then one job per destination, due at its arrival).
Then (a) the query plan of every
query the claim path runs (and the worker's wake-up check and finish path), each checked for a
full scan or a sort of jobs; (b) `store.claim` timed against that backlog and against a small
one (default 1,000 jobs), alternately so machine noise hits both alike; (c) the service
delivering from the backlog for a fixed time while each worker's RSS is read from /proc every
second. Passes when claim p50 with the backlog is within 2x of the small one, every worker's
RSS stays under 80 MiB and does not keep growing. The databases (about 1 GB per million
jobs) are deleted afterwards.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.rehearsal.backlog_seed import fill_backlog
from hookline.rehearsal.bench import (
    bench_env,
    proc_peak_rss_mb,
    query,
    receiver_process,
    service_process,
    setup_destinations,
)
from hookline.rehearsal.scenario_common import ScenarioOptions, pick
from hookline.shared.config import Config
from hookline.shared.policy.delivery import late_slots
from hookline.shared.store import SqliteOptions, open_store
from hookline.shared.store.queries import load_queries

RSS_LIMIT_MIB = 80.0
# "No steady growth": a worker's highest RSS in the last third of the delivery window is at
# most this much above its highest in the middle third (the first third is warm-up: pools
# and buffers filling). A slope over a short window is mostly noise; it is reported too.
RSS_PLATEAU_MIB = 1.0
CLAIM_SLOWDOWN_LIMIT = 2.0

# Queries of the delivery path whose plans the backlog scenario checks: everything
# SqliteStore.claim runs (ordered_head and advance_next_send only for ordered or rate-limited
# destinations), the idle worker's wake-up check, and the lease and finish writes.
CLAIM_QUERIES = ("claim_probe", "kill_lost_at_cap", "claim_window", "destination_slots",
                 "due_jobs", "ordered_head", "claim_job", "advance_next_send", "mark_attempt_lost",
                 "insert_attempt", "claim_details")
OTHER_WORKER_QUERIES = ("extend_lease", "finish_delivered",
                        "finish_done", "finish_retry", "finish_dead", "record_attempts",
                        "record_attempt", "destination_failed", "destination_succeeded",
                        "unheld_leases")


def run_backlog(opts: ScenarioOptions, work: Path, db: str, config: Config) -> dict[str, Any]:
    """Fill, explain, time claims, then deliver while sampling RSS (see the module doc)."""
    env = bench_env(work)
    small_db = str(work / "small.db")
    with receiver_process(env) as receiver:
        for path in (db, small_db):
            asyncio.run(setup_destinations(path, receiver.port, list(receiver.secrets),
                                           paused=False))
        t0 = time.monotonic()
        fill_backlog(db, opts.backlog_jobs, opts.body_bytes)
        fill_s = time.monotonic() - t0
        fill_backlog(small_db, opts.small_backlog_jobs, opts.body_bytes)
        plans = query_plans(db)
        dbs = {"small": small_db, "backlog": db}
        claims = asyncio.run(time_claims(dbs, opts.claim_samples, config.worker_synchronous,
                                          config))
        # The same with d1 ordered (FIFO): its claims read ordered_head instead of due_jobs.
        for path in dbs.values():
            asyncio.run(_set_ordered(path, "d1", True))
        ordered = asyncio.run(time_claims(dbs, max(10, opts.claim_samples // 4),
                                          config.worker_synchronous, config))
        for path in dbs.values():
            asyncio.run(_set_ordered(path, "d1", False))
        with service_process(db, work, env, workers=opts.workers,
                             synchronous=opts.synchronous) as (_port, procs):
            delivery = watch_delivery(db, procs, opts.deliver_s, opts.backlog_jobs)
    db_bytes = Path(db).stat().st_size
    for path in (db, small_db):  # about 1 GB per million jobs: not kept (service.log is)
        for suffix in ("", "-wal", "-shm", "-lock"):
            Path(path + suffix).unlink(missing_ok=True)
    slowdown = claims["backlog"]["p50_ms"] / max(claims["small"]["p50_ms"], 1e-9)
    workers = {slot: fig for slot, fig in delivery["rss_mib"].items()
               if slot.startswith("worker-")}
    ordered_slowdown = ordered["backlog"]["p50_ms"] / max(ordered["small"]["p50_ms"], 1e-9)
    checks = {
        "plans_use_indexes": all(not p["problems"] for p in plans.values()),
        "claim_p50_within_2x": slowdown <= CLAIM_SLOWDOWN_LIMIT,
        # an ordered destination's head is one index entry (schema 25, jobs_ordered); from
        # schema 20 to 24 it was every pending job of the destination, sorted
        "ordered_claim_p50_within_2x": ordered_slowdown <= CLAIM_SLOWDOWN_LIMIT,
        "worker_rss_under_80_mib": all(w["max"] < RSS_LIMIT_MIB for w in workers.values()),
        "worker_rss_not_growing": all(w["growth_last_third"] <= RSS_PLATEAU_MIB
                                      for w in workers.values()),
    }
    return {"backlog": {"jobs": opts.backlog_jobs, "small_jobs": opts.small_backlog_jobs,
                        "fill_s": round(fill_s, 1), "db_bytes": db_bytes},
            "query_plans": plans,
            "claim_ms": {**claims, "backlog_over_small_p50": round(slowdown, 2)},
            "claim_ms_d1_ordered": {**ordered,
                                    "backlog_over_small_p50": round(ordered_slowdown, 2),
                                    "note": "d1 is FIFO (ordered) here, so its claims run "
                                            "ordered_head"},
            "delivery": delivery, "checks": checks, "pass": all(checks.values())}


def query_plans(db: str) -> dict[str, dict[str, Any]]:
    """`EXPLAIN QUERY PLAN` of each delivery-path query (CLAIM_QUERIES, then
    OTHER_WORKER_QUERIES) on the SQLite file `db`, read-only.

    Returns:
        query name -> {"path": "claim" or "worker", "plan": [lines, indented as the sqlite3
        shell shows them], "problems": [plan lines that read a whole table or sort every
        job an index range yields (see _plan_problems), each with why]}.
    """
    queries = load_queries("sqlite")
    values = {"now": time.time(), "destination_id": 1, "limit": 16, "pending_limit": 3,
              "id": 1, "job_id": 1, "event_id": 1, "worker": "w", "lease_s": 30.0,
              "max_attempts": 18, "lease_token": "t", "attempt": 1, "next_send_at": 0.0,
              "until": 0.0,
              "run_at": 0.0, "delay_s": 1.0, "error": None, "duration_s": 0.1, "status_code": 200,
              "response_excerpt": None, "started_at": 0.0, "response_headers": None,
              "location": None, "job_ids": "[1, 2]", "lease_tokens": '["t"]',
              "claims": '[[1, "t", 0.0]]', "attempts": '[["t", 0.0, 0.1, 200]]',
              "waited_s": 0.0,
              "destination_ids": "[1, 2, 3]", "offers": "[[1, 16], [2, 16], [3, 16]]",
              "after": 0, "upto": 2**62, "window": 64, "expired": 1,
              "full_destinations": "[]", "capped_tenants": "[]", "dead": 0,
              "token_tag": "0000000a", "tag": "0000000a", "newer_than": "", "held": "[]"}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out: dict[str, dict[str, Any]] = {}
    try:
        schema = Schema.of(conn)
        for name in (*CLAIM_QUERIES, *OTHER_WORKER_QUERIES):
            sql = queries[name]
            params = {p: values[p] for p in set(re.findall(r":([a-z_]+)", sql))}
            rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
            out[name] = {"path": "claim" if name in CLAIM_QUERIES else "worker",
                         "plan": _plan_lines(rows),
                         "problems": _plan_problems(rows, sql, schema)}
    finally:
        conn.close()
    return out


def _plan_lines(rows: list[tuple[int, int, int, str]]) -> list[str]:
    """(id, parent, _, detail) rows of EXPLAIN QUERY PLAN as indented lines."""
    depth: dict[int, int] = {0: -1}
    lines = []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + detail)
    return lines


# The table the backlog fills; a scan of it reads every job, whatever index it walks, except
# a walk of jobs_leased, which holds running jobs only: at most the workers' slots in flight.
BACKLOG_TABLE = "jobs"
BOUNDED_BACKLOG_INDEXES = frozenset({"jobs_leased"})


@dataclass(frozen=True)
class Schema:
    """The names a plan line may mention: tables, and each index's table."""

    tables: frozenset[str]
    index_tables: dict[str, str]

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> Schema:
        rows = conn.execute("SELECT type, name, tbl_name FROM sqlite_master "
                            "WHERE type IN ('table', 'index')").fetchall()
        return cls(tables=frozenset(name for kind, name, _ in rows if kind == "table"),
                   index_tables={name: table for kind, name, table in rows if kind == "index"})


@dataclass(frozen=True)
class PlanRead:
    """A SCAN or SEARCH line of a plan. `tables`: the tables its name may stand for (a name
    reused as the alias of two tables in one query stands for both); empty for a CTE, a
    subquery, a table-valued function or a constant row; None when the query's text does not
    say what the name is. `index`: the index it goes through, None for the table's own
    b-tree (a SCAN without one reads every row); `automatic`: SQLite builds that index for
    the statement, reading every row of the table first."""

    op: str
    name: str
    tables: frozenset[str] | None
    index: str | None
    automatic: bool


# `SCAN j USING INDEX x` since SQLite 3.36; `SCAN TABLE jobs AS j USING INDEX x` before it
_PLAN_READ = re.compile(r"(?P<op>SCAN|SEARCH) (?:TABLE )?(?P<name>\([^)]*\)|\S+)"
                        r"(?: AS (?P<alias>\S+))?(?P<rest>.*)")
# an automatic index has no name: `SEARCH a USING AUTOMATIC COVERING INDEX (job_id=?)`
_PLAN_INDEX = re.compile(r" USING (?P<automatic>AUTOMATIC )?(?:PARTIAL )?(?:COVERING )?"
                         r"INDEX(?: (?P<index>[^\s(]+))?")
_SQL_COMMENT = re.compile(r"--[^\n]*")


def read_of_plan_line(detail: str, sql: str, schema: Schema) -> PlanRead | None:
    """What one EXPLAIN QUERY PLAN line of `sql` reads (None: no SCAN or SEARCH line).

    The line names a table by its alias when the query gives one (`FROM jobs j`: `SCAN j`),
    so the alias is looked up in the query's FROM and JOIN clauses."""
    found = _PLAN_READ.match(detail)
    if not found:
        return None
    name, rest = found["name"], found["rest"]
    using = _PLAN_INDEX.search(rest)
    index = using["index"] if using else None
    automatic = bool(using and using["automatic"])
    tables: frozenset[str] | None
    if index in schema.index_tables:  # an index belongs to one table, whatever the alias
        tables = frozenset({schema.index_tables[index]})
    elif name in schema.tables:  # unaliased, or the pre-3.36 form (`TABLE jobs AS j`)
        tables = frozenset({name})
    elif (name.startswith("(") or name in ("CONSTANT", "SUBQUERY")
          or " VIRTUAL TABLE" in rest):
        tables = frozenset()
    else:
        tables = _what_name_stands_for(name, sql, schema)
    return PlanRead(found["op"], name, tables, index, automatic)


def _what_name_stands_for(name: str, sql: str, schema: Schema) -> frozenset[str] | None:
    """The tables `name` is an alias of in `sql` (`FROM jobs j`, `JOIN jobs AS j`); empty
    when it is a CTE's name or alias, or a subquery's or table-valued function's alias;
    None when the text does not say."""
    text = _SQL_COMMENT.sub("", sql)
    word = re.escape(name)
    sources = set(re.findall(rf"(?i)(?:\bFROM|\bJOIN|\bUPDATE|,)\s+(\w+)\s+(?:AS\s+)?{word}\b",
                             text))
    tables = frozenset(s for s in sources if s in schema.tables)
    if tables:
        return tables
    ctes = set(re.findall(r"(?i)(?:\bRECURSIVE|\bWITH|,)\s+(\w+)\s*(?:\([^)]*\))?\s*AS\s+"
                          r"(?:NOT\s+)?(?:MATERIALIZED\s+)?\(", text))
    if name in ctes or sources & ctes or re.search(rf"\)\s+(?:AS\s+)?{word}\b", text):
        return frozenset()
    return None


def _plan_problems(rows: list[tuple[int, int, int, str]], sql: str,
                   schema: Schema) -> list[str]:
    """Plan lines of `sql` that cost in proportion to a table, under any alias: a full scan
    of any table (a SCAN without an index, or an index SQLite builds for the statement, which
    reads every row first); any SCAN of jobs through an index but jobs_leased (a walk of
    jobs_due or jobs_status reads every pending or finished job); a SCAN or SEARCH whose
    name the query does not explain (the check cannot clear it); and a temporary b-tree sort
    in the same query block as a read of jobs (it sorts every job the index range yields).
    A sort of a LIMITed subquery's few rows (its sibling is `SCAN (subquery-N)`) is fine."""
    reads = {node: read_of_plan_line(detail, sql, schema) for node, _, _, detail in rows}
    problems = []
    for node, _, _, detail in rows:
        read = reads[node]
        if read is None:
            continue
        if read.tables is None:
            problems.append(f"{detail} (which table is {read.name}?)")
        elif read.tables and (read.automatic or (read.op == "SCAN" and read.index is None)):
            problems.append(f"{detail} (a full scan of {', '.join(sorted(read.tables))})")
        elif (BACKLOG_TABLE in read.tables and read.op == "SCAN"
              and read.index not in BOUNDED_BACKLOG_INDEXES):
            problems.append(f"{detail} (every entry of {read.index})")
    reads_jobs = {node for node, read in reads.items()
                  if read is not None and read.tables and BACKLOG_TABLE in read.tables}
    for _, parent, _, detail in rows:
        if "TEMP B-TREE" in detail and any(p == parent and node in reads_jobs
                                           for node, p, _, _ in rows):
            problems.append(detail)
    return problems


async def time_claims(dbs: dict[str, str], samples: int, synchronous: str,
                      config: Config) -> dict[str, dict[str, float]]:
    """Time `store.claim` on each SQLite file in `dbs`, taking turns so machine noise hits
    each alike; each claimed batch is handed back untimed (so the backlog stays the same).

    A claim is the workers' own call: up to `claim_batch` jobs, `config`'s lease, attempt
    cap and late-retry reservation.

    Args:
        dbs: label -> SQLite file with due pending jobs.
        samples: timed claims per database.
        synchronous: SQLite synchronous mode of the claims' commits (the workers':
            Config.worker_synchronous).
        config: the settings the workers use.

    Returns:
        label -> {"p50_ms", "p99_ms", "mean_ms", "jobs_per_claim"} (milliseconds).

    Raises:
        RuntimeError: a claim found nothing to take (the database has no due job).
    """
    stores = {label: open_store(path, SqliteOptions(synchronous=synchronous))
              for label, path in dbs.items()}
    times: dict[str, list[float]] = {label: [] for label in dbs}
    taken: dict[str, int] = dict.fromkeys(dbs, 0)
    max_late = late_slots(config.worker_concurrency, config.late_retry_share)
    for store in stores.values():
        await store.open()
    try:
        for _ in range(samples):
            for label, store in stores.items():
                t0 = time.perf_counter()
                claims = await store.claim(
                    "bench-claim-probe", config.claim_batch, config.lease_s,
                    config.max_attempts, late_after=config.late_retry_after_attempts,
                    max_late=max_late)
                times[label].append((time.perf_counter() - t0) * 1000)
                if not claims:
                    raise RuntimeError(f"a claim on the {label} database found no due job")
                taken[label] += len(claims)
                await store.hand_back(claims)
    finally:
        for store in stores.values():
            await store.close()
    return {label: {"p50_ms": round(pick(sorted(ms), 0.5), 3),
                    "p99_ms": round(pick(sorted(ms), 0.99), 3),
                    "mean_ms": round(sum(ms) / len(ms), 3),
                    "jobs_per_claim": round(taken[label] / len(ms), 1)}
            for label, ms in times.items()}


async def _set_ordered(db: str, name: str, ordered: bool) -> None:
    """Make destination `name` of database `db` ordered (FIFO) or not, as the operator's
    `hookline destinations update NAME --set ordered=...` does; bench setup."""
    store = open_store(db)
    await store.open()
    try:
        await store.update_destination(name, ordered=ordered)
    finally:
        await store.close()


def proc_rss_mib(pid: int) -> float | None:
    """Current resident set size (VmRSS) of a live process, MiB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def watch_delivery(db: str, procs: dict[str, int], deliver_s: float,
                   total_jobs: int) -> dict[str, Any]:
    """Sample every process's RSS and the done count once a second while the service
    delivers, for `deliver_s` seconds or until `total_jobs` are done.

    Args:
        db: the SQLite file (read-only here).
        procs: slot -> pid (supervisor, ingest, worker-N).
        deliver_s: longest watch, seconds.
        total_jobs: jobs in the database; the watch ends early once all are done.

    Returns:
        {"seconds", "delivered", "deliveries_per_s", "all_delivered", "rss_mib": slot ->
        {"start", "max", "end", "growth_last_third" (MiB: highest in the last third minus
        highest in the middle third), "peak_hwm", "slope_mib_per_min",
        "slope_second_half_mib_per_min"}, "samples": [{"t_s", "done", slot: MiB, ...}]}.
    """
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    while True:
        t_s = time.monotonic() - t0
        done = int(query(db, "SELECT COUNT(*) FROM jobs WHERE status = 'done'")[0][0])
        sample: dict[str, Any] = {"t_s": round(t_s, 2), "done": done}
        for slot, pid in procs.items():
            now_mib = proc_rss_mib(pid)
            if now_mib is not None:
                sample[slot] = round(now_mib, 2)
        samples.append(sample)
        if done >= total_jobs or t_s >= deliver_s:
            break
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0 - t_s)))
    span_s = samples[-1]["t_s"] - samples[0]["t_s"]
    delivered = samples[-1]["done"] - samples[0]["done"]
    rss: dict[str, dict[str, float]] = {}
    for slot, pid in procs.items():
        points = [(s["t_s"], s[slot]) for s in samples if slot in s]
        if not points:
            continue
        values = [v for _, v in points]
        third = max(1, len(values) // 3)
        rss[slot] = {"start": values[0], "max": max(values), "end": values[-1],
                     "growth_last_third": round(
                         max(values[-third:]) - max(values[-2 * third:-third] or values), 2),
                     "peak_hwm": round(proc_peak_rss_mb(pid), 2),
                     "slope_mib_per_min": round(_slope(points) * 60, 3),
                     "slope_second_half_mib_per_min": round(
                         _slope(points[len(points) // 2:]) * 60, 3)}
    return {"seconds": round(span_s, 1), "delivered": samples[-1]["done"],
            "deliveries_per_s": round(delivered / span_s, 1) if span_s else None,
            "all_delivered": samples[-1]["done"] >= total_jobs, "rss_mib": rss,
            "samples": samples}


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points (0.0 for fewer than two distinct x)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def print_backlog(result: dict[str, Any]) -> None:
    """The backlog part of the human summary of a scenario's `result`."""
    backlog, claims, delivery = result["backlog"], result["claim_ms"], result["delivery"]
    print(f"backlog: {backlog['jobs']:,} pending jobs written in {backlog['fill_s']} s "
          f"({backlog['db_bytes'] / 2**20:,.0f} MiB)")
    for name, plan in result["query_plans"].items():
        marker = "  <-- " + "; ".join(plan["problems"]) if plan["problems"] else ""
        print(f"  {name}: {' | '.join(line.strip() for line in plan['plan'])}{marker}")
    print(f"claim ms: {backlog['jobs']:,} jobs p50 {claims['backlog']['p50_ms']} p99 "
          f"{claims['backlog']['p99_ms']}; {backlog['small_jobs']:,} jobs p50 "
          f"{claims['small']['p50_ms']} p99 {claims['small']['p99_ms']} "
          f"(x{claims['backlog_over_small_p50']})")
    ordered = result["claim_ms_d1_ordered"]
    print(f"claim ms with d1 ordered (FIFO): backlog p50 {ordered['backlog']['p50_ms']}, small "
          f"p50 {ordered['small']['p50_ms']} (x{ordered['backlog_over_small_p50']})")
    print(f"delivery: {delivery['deliveries_per_s']} deliveries/s over {delivery['seconds']} s")
    for slot, rss in delivery["rss_mib"].items():
        print(f"  rss MiB {slot}: start {rss['start']} max {rss['max']} end {rss['end']} "
              f"growth in the last third {rss['growth_last_third']}, slope "
              f"{rss['slope_mib_per_min']} MiB/min")

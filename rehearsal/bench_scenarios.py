"""`hookline bench --scenario backlog|outage`: the memory and recovery targets of issue #10.

Both start like `hookline bench` (rehearsal/bench.py): a fresh database, the receiver fixture
(3 endpoints d1, d2, d3 = 3 destinations per event) and `hookline serve` with W workers,
everything on 127.0.0.1. Each writes `scenario-<name>.json` to the output folder.

**backlog**: N pending jobs (default 1,000,000) written straight into a database the store
created (so the schema and migrations are the real ones), in the row shapes ingest writes (one
event, then one job per destination, due at its arrival). Then (a) the query plan of every
query the claim path runs (and the worker's wake-up check and finish path), each checked for a
full scan or a sort of jobs; (b) `store.claim` timed against that backlog and against a small
one (default 1,000 jobs), alternately so machine noise hits both alike; (c) the service
delivering from the backlog for a fixed time while each worker's RSS is read from /proc every
second. Passes when claim p50 with the backlog is within 2x of the small one, every worker's
RSS stays under 80 MiB and does not keep growing. The databases (about 1 GB per million
jobs) are deleted afterwards.

**outage**: load at a steady rate (default 300 events/s = 900 deliveries/s) for a baseline
period; then d3 fails (answers 503, or hangs until the worker's attempt timeout) for the
outage period while load continues, so d3 builds a backlog of retries; then d3 recovers (the
receiver switches back on the same port; when the circuit breaker auto-paused d3, it is
resumed, as an operator would; `drain_rate_per_s` also paces the drain with d3's rate limit)
and load continues until d3's backlog is delivered. Reports
d1/d2 accept->delivered latency (jobs.finished_at - events.received_at) in the three windows
and its ratio to the baseline (passes at <= 2x), d3's drain time, and whether d3 was paused.
Runs with the delivery policy a user gets (HOOKLINE_* in the environment still apply).

Times: `*_unix` are unix seconds (time.time()); durations are seconds unless named `_ms`.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rehearsal.bench import (
    BenchOptions,
    bench_database,
    bench_env,
    count_events,
    fsync_latency_ms,
    proc_peak_rss_mb,
    query,
    receiver_process,
    redact,
    service_process,
    setup_destinations,
    wait_settled,
)
from rehearsal.loadgen import event_body
from shared.config import Config
from shared.delivery_policy import late_slots
from shared.queries import load_queries
from shared.signing import new_message_id
from shared.store import SqliteOptions, open_store

SCENARIOS = ("backlog", "outage")
OUTAGE_KINDS = {"503": "status:503", "hang": "hang"}
RSS_LIMIT_MIB = 80.0
# "No steady growth": a worker's highest RSS in the last third of the delivery window is at
# most this much above its highest in the middle third (the first third is warm-up: pools
# and buffers filling). A slope over a short window is mostly noise; it is reported too.
RSS_PLATEAU_MIB = 1.0
CLAIM_SLOWDOWN_LIMIT = 2.0
LATENCY_RATIO_LIMIT = 2.0

# Queries of the delivery path whose plans the backlog scenario checks: everything
# SqliteStore.claim runs (ordered_head and advance_next_send only for ordered or rate-limited
# destinations), the idle worker's wake-up check, and the lease and finish writes.
CLAIM_QUERIES = ("claim_probe", "kill_lost_at_cap", "destination_slots", "due_jobs",
                 "ordered_head", "claim_job", "advance_next_send", "mark_attempt_lost",
                 "insert_attempt", "claim_details")
# Run only for ordered (FIFO) destinations; its plan is reported but left out of the plans
# check, since it shows a temporary b-tree although SQLite sorts at most one row per status
# there: the index yields each (status, destination) range in id order and ORDER BY id
# LIMIT 1 stops each range after its first row. The backlog scenario times claims with an
# ordered destination to show it (claim_ms_d1_ordered).
ORDERED_ONLY = ("ordered_head",)
OTHER_WORKER_QUERIES = ("due_work_exists", "extend_lease", "finish_delivered",
                        "finish_done", "finish_retry", "finish_dead", "record_attempts",
                        "record_attempt", "destination_failed", "destination_succeeded")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioOptions:
    """What to run.

    Attributes:
        scenario: `backlog` or `outage`.
        out_dir: folder for scenario-<name>.json and the run's work folder.
        workers: worker processes of `hookline serve`.
        synchronous: SQLite synchronous mode of the service and of the timed claims.
        backend: `sqlite`, or `postgres` (outage only; see rehearsal.bench.BenchOptions).
        postgres_url: a server to use instead of a throwaway one (postgres only).
        body_bytes: size of each event body, bytes (the bench's default).
        backlog_jobs: pending jobs of the backlog (split evenly over d1, d2, d3).
        small_backlog_jobs: pending jobs of the small backlog claims are compared with.
        claim_samples: timed claims against each backlog.
        deliver_s: seconds the service delivers from the backlog (less if it empties).
        rate_per_s: events per second offered during the outage scenario (x3 deliveries).
        concurrency: connections of the load generator.
        baseline_s: seconds of load before the outage.
        outage_s: seconds d3 fails.
        outage_kind: `503` (d3 answers 503 at once) or `hang` (d3 never answers; each attempt
            ends at the worker's attempt timeout).
        drain_timeout_s: seconds to wait for d3's backlog after recovery (None: the larger
            of 120 s and 1.5 x outage_s).
        drain_rate_per_s: when set, the operator paces d3's drain: its rate_limit_per_s is
            set to this at recovery (before a resume) and cleared once it has drained.
    """

    scenario: str
    out_dir: Path = Path("results/bench")
    workers: int = 2
    synchronous: str = "FULL"
    backend: str = "sqlite"
    postgres_url: str | None = None
    body_bytes: int = 1500
    backlog_jobs: int = 1_000_000
    small_backlog_jobs: int = 1_000
    claim_samples: int = 200
    deliver_s: float = 30.0
    rate_per_s: float = 300.0
    concurrency: int = 64
    baseline_s: float = 60.0
    outage_s: float = 600.0
    outage_kind: str = "503"
    drain_timeout_s: float | None = None
    drain_rate_per_s: float | None = None


def run_scenario(opts: ScenarioOptions, config: Config | None = None) -> dict[str, Any]:
    """Run one scenario; returns the figures also written to `out_dir/scenario-<name>.json`.

    Args:
        opts: what to run.
        config: the effective settings (flags, HOOKLINE_* environment, file) whose delivery
            policy the service gets; recorded in the result. None: the defaults.

    Raises:
        ValueError: an unknown scenario, outage kind or backend, or a backlog on PostgreSQL.
        TimeoutError: the service did not come up, or jobs were not delivered in time.
    """
    if opts.scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, not {opts.scenario!r}")
    if opts.outage_kind not in OUTAGE_KINDS:
        raise ValueError(f"outage kind must be 503 or hang, not {opts.outage_kind!r}")
    if opts.scenario == "backlog" and opts.backend != "sqlite":
        raise ValueError("the backlog scenario runs on SQLite only")
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"hookline-{opts.scenario}-", dir=opts.out_dir))
    config = config or Config()
    load_at_start = list(os.getloadavg())
    bench_opts = BenchOptions(backend=opts.backend, postgres_url=opts.postgres_url,
                              out_dir=opts.out_dir)
    with bench_database(bench_opts, work) as (db, description, _postmaster):
        if opts.scenario == "backlog":
            figures = _run_backlog(opts, work, db, config)
        else:
            figures = _run_outage(opts, work, db, config)
    result = {
        "scenario": opts.scenario,
        "backend": {"name": opts.backend, "database": description},
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0],
                    "fsync_ms": fsync_latency_ms(work),
                    "load_average_at_start": load_at_start,
                    "load_average_at_end": list(os.getloadavg())},
        "options": {f: redact(str(getattr(opts, f))) for f in opts.__slots__},
        "policy": {name: getattr(config, name) for name in (
            "worker_concurrency", "claim_batch", "lease_s", "attempt_timeout_s",
            "max_attempts", "retry_base_s", "breaker_failures", "breaker_min_span_s",
            "breaker_window_s", "late_retry_after_attempts", "late_retry_share")},
        **figures,
    }
    (opts.out_dir / f"scenario-{opts.scenario}.json").write_text(json.dumps(result, indent=2))
    return result


# -- backlog --------------------------------------------------------------------------------


def _run_backlog(opts: ScenarioOptions, work: Path, db: str, config: Config) -> dict[str, Any]:
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
        claims = asyncio.run(time_claims(dbs, opts.claim_samples, opts.synchronous, config))
        # The same with d1 ordered (FIFO): its claims read ordered_head instead of due_jobs.
        for path in dbs.values():
            _set_ordered(path, "d1", True)
        ordered = asyncio.run(time_claims(dbs, max(10, opts.claim_samples // 4),
                                          opts.synchronous, config))
        for path in dbs.values():
            _set_ordered(path, "d1", False)
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
        "plans_use_indexes": all(not p["problems"] for name, p in plans.items()
                                 if name not in ORDERED_ONLY),
        "claim_p50_within_2x": slowdown <= CLAIM_SLOWDOWN_LIMIT,
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
                                            "ordered_head; see ORDERED_ONLY"},
            "delivery": delivery, "checks": checks, "pass": all(checks.values())}


def fill_backlog(db: str, jobs: int, body_bytes: int, chunk_events: int = 20_000) -> None:
    """Write `jobs` pending jobs into the SQLite file `db`, spread evenly over its live
    destinations: one event per destination set (`POST /v1/events` bodies of `body_bytes`
    bytes, source `api`), then one job per destination due at the event's arrival, as ingest
    writes them (shared/queries/sqlite.sql insert_event and insert_jobs). Arrivals are spread
    over the hour before now, oldest first. Big transactions with synchronous=OFF on this
    connection only (setup, not measured); nothing else may write to `db` meanwhile.

    Raises:
        ValueError: `db` has no live destination, or `jobs` is below 1.
    """
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        dest_ids = [r[0] for r in conn.execute(
            "SELECT id FROM destinations WHERE deleted_at IS NULL ORDER BY id")]
        if not dest_ids or jobs < 1:
            raise ValueError("fill_backlog needs a destination and at least one job")
        events = math.ceil(jobs / len(dest_ids))
        now = time.time()
        step_s = 3600.0 / events
        run_id = os.urandom(4).hex()
        for first in range(0, events, chunk_events):
            last = min(events, first + chunk_events)
            arrivals = [now - 3600.0 + i * step_s for i in range(first, last)]
            conn.execute("BEGIN")
            before = conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
            conn.executemany(
                "INSERT INTO events (message_id, source, source_event_id, type, body, "
                "received_at) VALUES (?, 'api', ?, 'bench.event', ?, ?)",
                ((new_message_id(at), f"bench-{run_id}-{i}", event_body(i, run_id, body_bytes),
                  at) for i, at in zip(range(first, last), arrivals, strict=True)))
            conn.execute(
                "INSERT INTO jobs (event_id, destination_id, run_at, created_at, updated_at) "
                "SELECT e.id, d.value, e.received_at, e.received_at, e.received_at "
                "FROM events e, json_each(?) d WHERE e.id > ? ORDER BY e.id, d.key",
                (json.dumps(dest_ids), before))
            conn.execute("COMMIT")
        extra = events * len(dest_ids) - jobs  # the newest event's last jobs, if any
        if extra:
            conn.execute("DELETE FROM jobs WHERE id IN "
                         "(SELECT id FROM jobs ORDER BY id DESC LIMIT ?)", (extra,))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def query_plans(db: str) -> dict[str, dict[str, Any]]:
    """`EXPLAIN QUERY PLAN` of each delivery-path query (CLAIM_QUERIES, then
    OTHER_WORKER_QUERIES) on the SQLite file `db`, read-only.

    Returns:
        query name -> {"path": "claim" or "worker", "plan": [lines, indented as the sqlite3
        shell shows them], "problems": [plan lines that scan the jobs table (any `SCAN` of
        jobs, with or without an index, reads every row) or sort with a temporary b-tree
        inside a query that reads jobs]}.
    """
    queries = load_queries("sqlite")
    values = {"now": time.time(), "destination_id": 1, "limit": 16, "id": 1, "job_id": 1,
              "event_id": 1, "worker": "w", "lease_s": 30.0, "max_attempts": 18,
              "lease_token": "t", "attempt": 1, "next_send_at": 0.0, "until": 0.0,
              "run_at": 0.0, "error": None, "duration_s": 0.1, "status_code": 200,
              "response_excerpt": None, "started_at": 0.0, "response_headers": None,
              "location": None, "job_ids": "[1, 2]", "lease_tokens": '["t"]',
              "claims": '[[1, "t"]]', "attempts": '[["t", 0.0, 0.1, 200]]'}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out: dict[str, dict[str, Any]] = {}
    try:
        for name in (*CLAIM_QUERIES, *OTHER_WORKER_QUERIES):
            sql = queries[name]
            params = {p: values[p] for p in set(re.findall(r":([a-z_]+)", sql))}
            rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
            out[name] = {"path": "claim" if name in CLAIM_QUERIES else "worker",
                         "plan": _plan_lines(rows), "problems": _plan_problems(rows)}
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


_READS_JOBS = re.compile(r"(SEARCH|SCAN) (jobs|j)\b")


def _plan_problems(rows: list[tuple[int, int, int, str]]) -> list[str]:
    """Plan steps that cost in proportion to the jobs table: any SCAN of jobs (its alias `j`
    too; with or without an index, a scan reads every row), and a temporary b-tree sort in
    the same query block as a read of jobs (it sorts every job the index range yields). A
    sort of a LIMITed subquery's few rows (its sibling is `SCAN (subquery-N)`) is fine."""
    problems = [d for _, _, _, d in rows if re.match(r"SCAN (jobs|j)\b", d)]
    for _, parent, _, detail in rows:
        if "TEMP B-TREE" in detail and any(
                p == parent and _READS_JOBS.match(d) for _, p, _, d in rows):
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
        synchronous: SQLite synchronous mode of the claims' commits.
        config: the settings the workers use.

    Returns:
        label -> {"p50_ms", "p99_ms", "mean_ms", "jobs_per_claim"} (milliseconds).

    Raises:
        RuntimeError: a claim found nothing to take (the database has no due job).
    """
    stores = {label: open_store(path, SqliteOptions(synchronous=synchronous)) for label, path in dbs.items()}
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
    return {label: {"p50_ms": round(_pick(sorted(ms), 0.5), 3),
                    "p99_ms": round(_pick(sorted(ms), 0.99), 3),
                    "mean_ms": round(sum(ms) / len(ms), 3),
                    "jobs_per_claim": round(taken[label] / len(ms), 1)}
            for label, ms in times.items()}


def _set_ordered(db: str, name: str, ordered: bool) -> None:
    """Make destination `name` of the SQLite file `db` ordered (FIFO) or not; bench setup."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("UPDATE destinations SET ordered = ? WHERE name = ?", (int(ordered), name))
    finally:
        conn.close()


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


def _pick(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list."""
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


# -- outage ---------------------------------------------------------------------------------


def _run_outage(opts: ScenarioOptions, work: Path, db: str, config: Config) -> dict[str, Any]:
    """Baseline, outage of d3, recovery and drain under steady load (see the module doc)."""
    env = bench_env(work)
    drain_timeout_s = opts.drain_timeout_s or max(120.0, 1.5 * opts.outage_s)
    # The receiver fixture: d3's behaviour is switched over PUT /_behaviour/d3.
    with receiver_process(env, ("ok", "ok", "ok")) as receiver:
        asyncio.run(setup_destinations(db, receiver.port, list(receiver.secrets),
                                       paused=False))
        with service_process(db, work, env, workers=opts.workers,
                             synchronous=opts.synchronous) as (port, procs):
            events = int(opts.rate_per_s * (opts.baseline_s + opts.outage_s
                                            + drain_timeout_s + 30))
            load = subprocess.Popen(
                [sys.executable, "-m", "rehearsal.loadgen", "--url",
                 f"http://127.0.0.1:{port}/v1/events", "--events", str(events),
                 "--concurrency", str(opts.concurrency), "--body-bytes", str(opts.body_bytes),
                 "--rate", str(opts.rate_per_s)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            try:
                marks = _drive_outage(opts, db, receiver.port, load, drain_timeout_s,
                                      config.late_retry_after_attempts)
            finally:
                if load.poll() is None:
                    load.send_signal(signal.SIGTERM)
                load.wait()
            marks["load_end_unix"] = time.time()
            # A request the stopped load generator gave up on may still commit after it
            # exits: count again once settled, until the count holds still.
            accepted, settled_for = count_events(db), -1
            while settled_for != accepted:
                wait_settled(db, accepted * 3, timeout_s=max(120.0, drain_timeout_s))
                settled_for, accepted = accepted, count_events(db)
            rss = {slot: round(proc_peak_rss_mb(pid), 1) for slot, pid in procs.items()}
    figures = outage_figures(db, marks, opts.baseline_s)
    figures["events_accepted"] = accepted
    figures["peak_rss_mib"] = rss
    return figures


def _set_behaviour(receiver_port: int, endpoint: str, spec: str) -> None:
    """Switch a receiver endpoint's behaviour through its control route.

    Raises:
        urllib.error.URLError: the receiver refused or is gone.
    """
    request = urllib.request.Request(f"http://127.0.0.1:{receiver_port}/_behaviour/{endpoint}",
                                     data=spec.encode(), method="PUT")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def _d3_state(db: str, up_to_job_id: int | None = None) -> dict[str, Any]:
    """d3's paused flag, reason, failure streak, and its unfinished jobs (all of them, or
    those with an id up to `up_to_job_id`: ids grow, and the index holds them, so this
    counts without reading the table)."""
    paused, reason, streak = query(
        db, "SELECT paused, paused_reason, failure_streak FROM destinations WHERE name = 'd3'")[0]
    older = "" if up_to_job_id is None else f" AND j.id <= {int(up_to_job_id)}"
    unfinished = query(db, "SELECT COUNT(*) FROM jobs j JOIN destinations d "
                           "ON d.id = j.destination_id WHERE d.name = 'd3' "
                           f"AND j.status IN ('pending', 'running'){older}")[0][0]
    return {"paused": bool(paused), "paused_reason": reason, "failure_streak": int(streak),
            "unfinished": int(unfinished)}


def _drive_outage(opts: ScenarioOptions, db: str, receiver_port: int,
                  load: subprocess.Popen[bytes], drain_timeout_s: float,
                  late_after: int) -> dict[str, Any]:
    """Baseline, outage and recovery of d3 while `load` runs; returns the marks (unix
    seconds), d3's state at recovery (with how many of its waiting jobs are late retries:
    `late_after` attempts or more), and d3's backlog sampled once a second.

    Raises:
        RuntimeError: the load generator exited early.
        TimeoutError: d3's backlog was not delivered within `drain_timeout_s` of recovery.
    """
    track: list[dict[str, Any]] = []
    start = time.time()

    def wait_until(deadline_unix: float) -> None:
        while time.time() < deadline_unix:
            if load.poll() is not None:
                raise RuntimeError(f"the load generator exited early ({load.returncode})")
            state = _d3_state(db)
            track.append({"t_s": round(time.time() - start, 1),
                          "d3_unfinished": state["unfinished"], "d3_paused": state["paused"]})
            time.sleep(min(1.0, max(0.0, deadline_unix - time.time())))

    wait_until(start + opts.baseline_s)
    down = time.time()
    _set_behaviour(receiver_port, "d3", OUTAGE_KINDS[opts.outage_kind])
    wait_until(down + opts.outage_s)
    up = time.time()
    _set_behaviour(receiver_port, "d3", "ok")
    last_job = int(query(db, "SELECT COALESCE(MAX(id), 0) FROM jobs")[0][0])
    at_recovery = _d3_state(db, up_to_job_id=last_job)
    at_recovery["late_retries"] = int(query(
        db, "SELECT COUNT(*) FROM jobs j JOIN destinations d ON d.id = j.destination_id "
            "WHERE d.name = 'd3' AND j.status IN ('pending', 'running') "
            f"AND j.attempts >= {int(late_after)}")[0][0])
    if opts.drain_rate_per_s:  # `hookline destinations update d3 --set rate_limit_per_s=R`
        asyncio.run(_update_d3(db, rate_limit_per_s=opts.drain_rate_per_s))
    resumed = None
    if at_recovery["paused"]:
        asyncio.run(_update_d3(db, paused=False))  # the operator's `hookline resume d3`
        resumed = time.time()
    backlog = max(1, at_recovery["unfinished"])
    drained_99 = drained = None
    while drained is None:
        if time.time() - up > drain_timeout_s:
            raise TimeoutError(f"d3's backlog not delivered {drain_timeout_s} s after recovery")
        state = _d3_state(db, up_to_job_id=last_job)
        track.append({"t_s": round(time.time() - start, 1),
                      "d3_unfinished": state["unfinished"], "d3_paused": state["paused"]})
        if drained_99 is None and state["unfinished"] <= backlog / 100:
            drained_99 = time.time()
        if state["unfinished"] == 0:
            drained = time.time()
            if opts.drain_rate_per_s:
                asyncio.run(_update_d3(db, rate_limit_per_s=None))
        else:
            time.sleep(1.0)
    return {"start_unix": start, "outage_unix": down, "recovery_unix": up,
            "resumed_unix": resumed, "drained_99_unix": drained_99, "drained_unix": drained,
            "d3_at_recovery": at_recovery, "track": track}


async def _update_d3(db: str, *, paused: bool | None = None,
                     **changes: float | None) -> None:
    """What an operator does to d3: `paused=False` resumes it (`hookline resume d3`);
    `changes` go to store.update_destination (`hookline destinations update d3 --set`)."""
    store = open_store(db)
    await store.open()
    try:
        if changes:
            await store.update_destination("d3", **changes)
        if paused is not None:
            await store.set_paused("d3", paused)
    finally:
        await store.close()


def outage_figures(db: str, marks: dict[str, Any], baseline_s: float) -> dict[str, Any]:
    """Latency per window and destination, ratios to the baseline, d3's drain, from the
    database (jobs.finished_at - events.received_at of done jobs).

    Args:
        db: the SQLite file or PostgreSQL URL, every job settled.
        marks: from :func:`_drive_outage`, plus `load_end_unix`.
        baseline_s: seconds of the baseline; its first fifth (at most 5 s) is warm-up and
            left out of the "before" window.

    Returns:
        {"windows": {name: [from, to] s after start}, "latency_ms": window -> destination
        (d1, d2, d1+d2, d3) -> {"n", "p50", "p99"}, "ratio_to_baseline": window -> d1/d2/d1+d2
        -> {"p50", "p99"}, "d3": {...}, "jobs_by_status", "timeline": [...], "checks",
        "pass"}.
    """
    start = marks["start_unix"]
    after_end = marks["drained_unix"] or marks["load_end_unix"]
    windows = {"before": (start + min(5.0, baseline_s / 5), marks["outage_unix"]),
               "during": (marks["outage_unix"], marks["recovery_unix"]),
               "after": (marks["recovery_unix"], after_end)}
    rows = query(db, "SELECT d.name, e.received_at, j.finished_at, j.attempts "
                     "FROM jobs j JOIN events e ON e.id = j.event_id "
                     "JOIN destinations d ON d.id = j.destination_id WHERE j.status = 'done'")
    latency: dict[str, dict[str, dict[str, Any]]] = {}
    for window, (lo, hi) in windows.items():
        picked: dict[str, list[float]] = {"d1": [], "d2": [], "d3": []}
        for name, received, finished, _ in rows:
            if lo <= received < hi:
                picked[name].append((finished - received) * 1000)
        picked["d1+d2"] = picked["d1"] + picked["d2"]
        latency[window] = {name: _percentiles(ms) for name, ms in picked.items()}
    ratios: dict[str, dict[str, dict[str, float | None]]] = {}
    for window in ("during", "after"):
        ratios[window] = {}
        for name in ("d1", "d2", "d1+d2"):
            base, now = latency["before"][name], latency[window][name]
            ratios[window][name] = {
                p: round(now[p] / base[p], 2) if now[p] is not None and base[p] else None
                for p in ("p50", "p99")}
    by_status = dict(query(db, "SELECT status, COUNT(*) FROM jobs GROUP BY status"))
    d3_attempts = [r[3] for r in rows if r[0] == "d3"]
    up = marks["recovery_unix"]
    d3 = {"at_recovery": marks["d3_at_recovery"],
          "auto_paused": marks["d3_at_recovery"]["paused"],
          "resumed_after_recovery_s": (round(marks["resumed_unix"] - up, 2)
                                       if marks["resumed_unix"] else None),
          "drain_s": round(marks["drained_unix"] - up, 1) if marks["drained_unix"] else None,
          "drain_99_percent_s": (round(marks["drained_99_unix"] - up, 1)
                                 if marks["drained_99_unix"] else None),
          "max_attempts_of_a_job": max(d3_attempts, default=0)}
    within = [r[p] for w in ratios.values() for r in w.values() for p in ("p50", "p99")]
    checks = {"every_job_delivered": set(by_status) == {"done"},
              "healthy_latency_within_2x": all(v is not None and v <= LATENCY_RATIO_LIMIT
                                               for v in within),
              "d3_drained": marks["drained_unix"] is not None}
    return {"windows": {w: [round(lo - start, 1), round(hi - start, 1)]
                        for w, (lo, hi) in windows.items()},
            "latency_ms": latency, "ratio_to_baseline": ratios, "d3": d3,
            "jobs_by_status": by_status,
            "timeline": _timeline(rows, start, marks["load_end_unix"], marks["track"]),
            "checks": checks, "pass": all(checks.values())}


def _percentiles(ms: list[float]) -> dict[str, Any]:
    """{"n", "p50", "p99"} of latencies in milliseconds (None when empty)."""
    ms.sort()
    return {"n": len(ms), "p50": round(_pick(ms, 0.5), 2) if ms else None,
            "p99": round(_pick(ms, 0.99), 2) if ms else None}


def _timeline(rows: list[tuple[Any, ...]], start: float, end: float,
              track: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """About 60 time buckets from `start` to `end` (unix seconds): d1+d2 latency of events
    received in the bucket, d3 deliveries finished in it, and d3's last sampled backlog."""
    bucket_s = max(1.0, round((end - start) / 60))
    count = int((end - start) // bucket_s) + 1
    healthy: list[list[float]] = [[] for _ in range(count)]
    d3_done = [0] * count
    for name, received, finished, _ in rows:
        if name == "d3":
            index = int((finished - start) // bucket_s)
            if 0 <= index < count:
                d3_done[index] += 1
        else:
            index = int((received - start) // bucket_s)
            if 0 <= index < count:
                healthy[index].append((finished - received) * 1000)
    track_t = [t["t_s"] for t in track]
    out = []
    for index in range(count):
        at = bisect.bisect_right(track_t, (index + 1) * bucket_s) - 1
        out.append({"t_s": index * bucket_s, **{
            f"d1+d2_{k}": v for k, v in _percentiles(healthy[index]).items()},
            "d3_delivered": d3_done[index],
            "d3_unfinished": track[at]["d3_unfinished"] if at >= 0 else None,
            "d3_paused": track[at]["d3_paused"] if at >= 0 else None})
    return out


# -- report ---------------------------------------------------------------------------------


def print_scenario(result: dict[str, Any]) -> None:
    """A short human summary of a scenario's `result`."""
    print(f"scenario {result['scenario']} on {result['backend']['name']} "
          f"({result['backend']['database']}); load average at start "
          f"{result['machine']['load_average_at_start']}, at end "
          f"{result['machine']['load_average_at_end']}")
    if result["scenario"] == "backlog":
        _print_backlog(result)
    else:
        _print_outage(result)
    print(f"checks: {result['checks']}")
    print("PASS" if result["pass"] else "FAIL")


def _print_backlog(result: dict[str, Any]) -> None:
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


def _print_outage(result: dict[str, Any]) -> None:
    opts, d3 = result["options"], result["d3"]
    print(f"load {opts['rate_per_s']} events/s; d3 {opts['outage_kind']} for "
          f"{opts['outage_s']} s; windows (s after start) {result['windows']}")
    for window, per in result["latency_ms"].items():
        shown = ", ".join(f"{name} p50 {f['p50']} p99 {f['p99']} (n {f['n']})"
                          for name, f in per.items())
        print(f"  {window}: {shown}")
    print(f"ratio to baseline: {result['ratio_to_baseline']}")
    paused = (f"auto-paused ({d3['at_recovery']['paused_reason']}), resumed as an operator "
              "would" if d3["auto_paused"] else "not auto-paused")
    if opts["drain_rate_per_s"] != "None":
        paused += f", drain paced at {opts['drain_rate_per_s']} jobs/s"
    print(f"d3: {d3['at_recovery']['unfinished']:,} jobs waiting at recovery "
          f"({d3['at_recovery']['late_retries']:,} late retries), {paused}; "
          f"drained in {d3['drain_s']} s (99 % in {d3['drain_99_percent_s']} s); "
          f"jobs {result['jobs_by_status']}")

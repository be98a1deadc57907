"""`hookline bench --scenario outage`: one destination down under steady load.

Starts like `hookline bench` (rehearsal/bench.py): a fresh database, the receiver fixture
(3 endpoints d1, d2, d3 = 3 destinations per event) and `hookline serve` with W workers,
everything on 127.0.0.1.

Load at a steady rate (default 300 events/s = 900 deliveries/s) for a baseline
period; then d3 fails (answers 503, or hangs until the worker's attempt timeout) for the
outage period while load continues, so d3 builds a backlog of retries; then d3 recovers (the
receiver switches back on the same port; when the circuit breaker auto-paused d3, it is
resumed, as an operator would; `drain_rate_per_s` also paces the drain with d3's rate limit)
and load continues until d3's backlog is delivered. Reports
d1/d2 accept->delivered latency (jobs.finished_at - events.received_at) in the three windows
and its ratio to the baseline (passes at <= 2x), d3's drain time, and whether d3 was paused.
Runs with the delivery policy a user gets (HOOKLINE_* in the environment still apply).
"""

from __future__ import annotations

import asyncio
import bisect
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from hookline.rehearsal.bench import (
    bench_env,
    count_events,
    proc_peak_rss_mb,
    query,
    receiver_process,
    service_process,
    setup_destinations,
    wait_settled,
)
from hookline.rehearsal.scenario_common import OUTAGE_KINDS, ScenarioOptions, pick
from hookline.shared.config import Config
from hookline.shared.store import open_store

LATENCY_RATIO_LIMIT = 2.0


def run_outage(opts: ScenarioOptions, work: Path, db: str, config: Config) -> dict[str, Any]:
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
                [sys.executable, "-m", "hookline.rehearsal.loadgen", "--url",
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
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310  (127.0.0.1)
        response.read()


def _d3_state(db: str, up_to_job_id: int | None = None) -> dict[str, Any]:
    """d3's paused flag, reason, failure streak, and its unfinished jobs (all of them, or
    those with an id up to `up_to_job_id`: ids grow, and the index holds them, so this
    counts without reading the table)."""
    paused, reason, streak = query(
        db, "SELECT paused, paused_reason, failure_streak FROM destinations WHERE name = 'd3'")[0]
    older = "" if up_to_job_id is None else f" AND j.id <= {int(up_to_job_id)}"
    unfinished = query(db, "SELECT COUNT(*) FROM jobs j JOIN destinations d "  # noqa: S608  (an int)
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
        db, "SELECT COUNT(*) FROM jobs j JOIN destinations d ON d.id = j.destination_id "  # noqa: S608  (the only value is an int())
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
            await store.update_destination("d3", **dict[str, Any](changes))
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
    return {"n": len(ms), "p50": round(pick(ms, 0.5), 2) if ms else None,
            "p99": round(pick(ms, 0.99), 2) if ms else None}


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


def print_outage(result: dict[str, Any]) -> None:
    """The outage part of the human summary of a scenario's `result`."""
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

"""`hookline bench --scenario fairness`: one tenant's backlog and hanging endpoints against
another tenant's steady traffic, in one run.

Starts like `hookline bench` (a fresh database, `hookline serve` with W workers, everything on
127.0.0.1) with the receiver fixture (rehearsal/receiver.py: it can hang) and two tenants:

* **a**: `A_HEALTHY` destinations that answer at once and `A_HANGING` that never answer (each
  attempt ends at the worker's attempt timeout), all subscribed to `a.invoice.paid`, created
  paused over a backlog of `backlog_jobs` jobs written through the store (events of A fan
  out to all of them);
* **b**: one destination subscribed to `b.invoice.paid`.

Phase *alone*: B publishes at `rate_per_s` for `phase_s` seconds (the load generator, tenant
`b` in the body) while A's destinations are paused. Phase *with A*: A's destinations are
resumed (the backlog floods the workers and the hanging endpoints hold their slots) and B
publishes the same way again. B's accept-to-delivered latency (jobs.finished_at -
events.received_at) per phase, and the ratio of the p99s, come from the database; the target
is a ratio of at most 2. Every B job must end delivered.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hookline.rehearsal.bench import (
    bench_env,
    proc_peak_rss_mb,
    query,
    receiver_process,
    service_process,
)
from hookline.rehearsal.scenario_common import ScenarioOptions, pick
from hookline.shared.config import Config
from hookline.shared.models import NewEvent
from hookline.shared.store import Store, open_store
from hookline.shared.tenant_models import TenantFields

A_HEALTHY = 20
A_HANGING = 20
LATENCY_RATIO_LIMIT = 2.0
SEED_BATCH_EVENTS = 500
SETTLE_TIMEOUT_S = 120.0


def run_fairness(opts: ScenarioOptions, work: Path, db: str, config: Config) -> dict[str, Any]:
    """Both phases (see the module doc); returns the figures.

    Raises:
        RuntimeError: B's load generator failed.
        TimeoutError: B's jobs were not all delivered within SETTLE_TIMEOUT_S of a phase.
    """
    env = bench_env(work)
    behaviours = ("ok",) * A_HEALTHY + ("hang",) * A_HANGING + ("ok",)
    with receiver_process(env, behaviours) as receiver:
        seeded = asyncio.run(_setup(db, receiver.port, list(receiver.secrets),
                                    opts.backlog_jobs, opts.body_bytes))
        with service_process(db, work, env, workers=opts.workers,
                             synchronous=opts.synchronous) as (port, procs):
            url = f"http://127.0.0.1:{port}/v1/events"
            alone = _publish_b(opts, env, url, "alone")
            _wait_b_settled(db)
            resumed_at = time.time()
            asyncio.run(_resume_a(db))
            with_a = _publish_b(opts, env, url, "with-a")
            _wait_b_settled(db)
            a_state = _a_state(db, resumed_at)
            rss = {slot: round(proc_peak_rss_mb(pid), 1) for slot, pid in procs.items()}
    return fairness_figures(db, alone, with_a, seeded, a_state, rss, config)


async def _setup(db: str, receiver_port: int, secrets: list[str], backlog_jobs: int,
                 body_bytes: int) -> int:
    """Tenants a and b, their destinations (A's paused), A's backlog; returns A's jobs."""
    store = open_store(db)
    await store.open()
    try:
        for tenant in ("a", "b"):
            await store.put_tenant(tenant, TenantFields(name=f"tenant {tenant}"))
        names = [f"d{n}" for n in range(1, len(secrets) + 1)]
        for name, secret in zip(names[:-1], secrets[:-1], strict=True):
            await store.add_destination(
                name=name, url=f"http://127.0.0.1:{receiver_port}/{name}", secret=secret,
                event_types=["a.invoice.paid"], max_in_flight=1000, tenant="a")
            await store.set_paused(name, True, reason="bench: the backlog waits",
                                   tenant="a")
        await store.add_destination(
            name=names[-1], url=f"http://127.0.0.1:{receiver_port}/{names[-1]}",
            secret=secrets[-1], event_types=["b.invoice.paid"], max_in_flight=64, tenant="b")
        return await _seed_backlog(store, -(-backlog_jobs // (len(names) - 1)), body_bytes)
    finally:
        await store.close()


async def _seed_backlog(store: Store, events: int, body_bytes: int) -> int:
    """`events` events of tenant a (each one job per A destination); returns the jobs."""
    body = json.dumps({"pad": "x" * max(0, body_bytes - 12)}).encode()
    jobs, counter = 0, itertools.count()
    for start in range(0, events, SEED_BATCH_EVENTS):
        batch = [NewEvent(source="api", source_event_id=f"a-{next(counter)}",
                          type="a.invoice.paid", body=body, tenant="a")
                 for _ in range(start, min(events, start + SEED_BATCH_EVENTS))]
        jobs += await store.add_backlog(batch)
    return jobs


async def _resume_a(db: str) -> None:
    """Resume A's destinations (the operator's `hookline resume NAME --tenant a`)."""
    store = open_store(db)
    await store.open()
    try:
        for destination in await store.list_destinations(tenant="a"):
            await store.set_paused(destination.name, False, tenant="a")
    finally:
        await store.close()


def _publish_b(opts: ScenarioOptions, env: dict[str, str], url: str,
               phase: str) -> dict[str, Any]:
    """B publishes at `opts.rate_per_s` for `opts.phase_s`; returns the phase's window (unix
    seconds) and the load generator's figures.

    Raises:
        RuntimeError: the load generator failed.
    """
    events = max(1, int(opts.rate_per_s * opts.phase_s))
    start = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "hookline.rehearsal.loadgen", "--url", url, "--events",
         str(events), "--concurrency", "16", "--body-bytes", str(opts.body_bytes), "--rate",
         str(opts.rate_per_s), "--tenant", "b", "--type", "b.invoice.paid", "--run-id", phase],
        capture_output=True, text=True, env=env, check=False, timeout=opts.phase_s * 4 + 60)
    if done.returncode != 0:
        raise RuntimeError(f"B's load generator failed: {done.stderr[-2000:]}")
    return {"from_unix": start, "to_unix": time.time(), "load": json.loads(done.stdout)}


def _wait_b_settled(db: str) -> None:
    """Wait until every job of tenant b is done or dead.

    Raises:
        TimeoutError: not so within SETTLE_TIMEOUT_S.
    """
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        if not query(db, _B_JOBS.format(what="COUNT(*)")
                     + " AND j.status NOT IN ('done', 'dead')")[0][0]:
            return
        time.sleep(0.2)
    raise TimeoutError(f"tenant b's jobs not delivered within {SETTLE_TIMEOUT_S} s")


_B_JOBS = ("SELECT {what} FROM jobs j JOIN destinations d ON d.id = j.destination_id "
           "JOIN events e ON e.id = j.event_id WHERE d.tenant_id = 'b'")


def _a_state(db: str, resumed_unix: float) -> dict[str, Any]:
    """A's jobs by status, and how many it had delivered since its resume."""
    rows = query(db, "SELECT j.status, COUNT(*) FROM jobs j JOIN destinations d "
                     "ON d.id = j.destination_id WHERE d.tenant_id = 'a' GROUP BY j.status")
    delivered = query(db, "SELECT COUNT(*) FROM jobs j JOIN destinations d "  # noqa: S608  (a float)
                          "ON d.id = j.destination_id WHERE d.tenant_id = 'a' "
                          f"AND j.status = 'done' AND j.finished_at >= {float(resumed_unix)}")
    return {"jobs_by_status": {str(s): int(n) for s, n in rows},
            "delivered_while_b_published": int(delivered[0][0])}


def fairness_figures(db: str, alone: dict[str, Any], with_a: dict[str, Any], seeded: int,
                     a_state: dict[str, Any], rss: dict[str, float],
                     config: Config) -> dict[str, Any]:
    """B's latency per phase (ms), the p99 ratio, A's progress, and the checks."""
    rows = query(db, _B_JOBS.format(what="j.status, e.received_at, j.finished_at"))
    latency: dict[str, dict[str, Any]] = {}
    for phase, window in (("alone", alone), ("with_a", with_a)):
        inside = sorted((finished - received) * 1000 for status, received, finished in rows
                        if status == "done"
                        and window["from_unix"] <= received <= window["to_unix"])
        latency[phase] = {"n": len(inside), "p50": round(pick(inside, 0.5), 2) if inside
                          else None, "p99": round(pick(inside, 0.99), 2) if inside else None,
                          "max": round(inside[-1], 2) if inside else None,
                          "ingest": window["load"]}
    b_by_status: dict[str, int] = {}
    for status, _, _ in rows:
        b_by_status[str(status)] = b_by_status.get(str(status), 0) + 1
    p99_alone, p99_with = latency["alone"]["p99"], latency["with_a"]["p99"]
    ratio = round(p99_with / p99_alone, 2) if p99_alone and p99_with is not None else None
    checks = {"every_b_job_delivered": b_by_status.get("done", 0) == len(rows) > 0,
              "b_p99_within_2x": ratio is not None and ratio <= LATENCY_RATIO_LIMIT}
    return {"a": {"destinations": {"healthy": A_HEALTHY, "hanging": A_HANGING},
                  "backlog_jobs": seeded, **a_state},
            "b": {"jobs_by_status": b_by_status},
            "b_latency_ms": latency, "b_p99_ratio_with_a_to_alone": ratio,
            "tenant_slot_share": config.tenant_slot_share,
            "peak_rss_mib": rss, "checks": checks, "pass": all(checks.values())}


def print_fairness(result: dict[str, Any]) -> None:
    """The fairness scenario's lines of the summary."""
    a = result["a"]
    print(f"tenant a: {a['backlog_jobs']} jobs over {a['destinations']['healthy']} healthy and "
          f"{a['destinations']['hanging']} hanging destinations; delivered "
          f"{a['delivered_while_b_published']} while b published; jobs {a['jobs_by_status']}")
    for phase in ("alone", "with_a"):
        figures = result["b_latency_ms"][phase]
        print(f"tenant b {phase:>6}: {figures['n']} jobs, accept-to-delivered p50 "
              f"{figures['p50']} ms, p99 {figures['p99']} ms, max {figures['max']} ms")
    print(f"b p99 with a / alone: {result['b_p99_ratio_with_a_to_alone']} "
          f"(target <= {LATENCY_RATIO_LIMIT})")

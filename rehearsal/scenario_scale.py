"""`hookline bench --scenario destinations|tenants`: ingest with many destinations or many
tenants, against a small installation in the same run.

Each size gets its own fresh database (a file beside the scenario's on SQLite, a database of
the same server on PostgreSQL) and its own `hookline serve` (W workers); the sizes are
measured in turn, `rounds` times, so the machine's other load and the tables' growth fall on
every size alike, and each figure is the median of its rounds. Ingest is driven with `wrk`
(one thread, `concurrency` connections, `phase_s` seconds, ~1.5 KB events). Every
destination is paused, so only ingest works (paused destinations still get their jobs), and
each event matches exactly one destination:

* **destinations**: for each N of `destination_counts`, destinations `c0 .. c{N-1}` of the
  default tenant, `c{i}` subscribed to `c{i}.*`; events of type `c{random}.invoice.paid`.
  Reports ingest events/s, ingest CPU per event (split into its event-loop thread and its
  other threads, the database thread above all: `ingest_threads_cpu_us_per_event`) and the
  time and size of one `GET /metrics` per N.
* **tenants**: the default tenant alone with `c0 .. c2`, then (another database) `tenants`
  tenants `t0 ..` each with `c0 .. c2`; events for random tenants, of type
  `c{random 0..2}.invoice.paid`. Reports ingest events/s of both and their ratio, then
  (service stopped) the claim latency: `store.claim` with the workers' arguments, timed with
  only the default tenant's 3 destinations live and then with every tenant's destinations
  live too, the latter also with claims of the single tenant's size (one tenant may take
  only its share of a claim: like for like), and those once more with only a tenth of the
  tenants live (the same jobs and destinations per claim: what the number of tenants
  alone does to a claim); each claim's jobs handed back.

Times: `*_unix` are unix seconds; durations are seconds unless named `_ms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.rehearsal import wrk
from hookline.rehearsal.bench import (
    bench_env,
    proc_cpu_s,
    proc_thread_cpu_s,
    query,
    service_process,
)
from hookline.rehearsal.drill import fresh_postgres_database
from hookline.rehearsal.harness import ADMIN_TOKEN, INGEST_TOKEN
from hookline.rehearsal.scenario_common import ScenarioOptions, pick, with_store
from hookline.shared.config import Config
from hookline.shared.models import DEFAULT_TENANT, NewEvent
from hookline.shared.policy.delivery import destination_slots, late_slots, tenant_slots
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store, open_store
from hookline.shared.tenant_models import TenantFields

DESTINATIONS_PER_TENANT = 3
INGEST_RATIO_LIMIT = 0.9  # the many-destinations or many-tenants figure / the small one
CLAIM_SAMPLES = 20
CLAIM_JOBS = 600  # the default tenant's pending jobs while its claims are timed
UNREACHABLE_URL = "http://127.0.0.1:9/hook"  # never called: every destination is paused


def run_scale(opts: ScenarioOptions, work: Path, db: str, config: Config) -> dict[str, Any]:
    """The destinations or tenants scenario (see the module doc); returns the figures.

    Raises:
        RuntimeError: wrk is not installed.
    """
    if not wrk.available():
        raise RuntimeError("the destinations and tenants scenarios need wrk (Debian package "
                           "wrk) for their load")
    if opts.scenario == "destinations":
        return _destinations(opts, work, db)

    async def setup_many(store: Store) -> None:
        await _add_tenant_destinations(store, DEFAULT_TENANT)  # for the claim's first timing
        await _add_tenants(store, opts.tenants)

    many_db = _fresh_database(db, "tenants")
    sizes = [Size("single_tenant", _fresh_database(db, "single"), DESTINATIONS_PER_TENANT, 0,
                  lambda store: _add_tenant_destinations(store, DEFAULT_TENANT)),
             Size("tenants", many_db, DESTINATIONS_PER_TENANT, opts.tenants, setup_many)]
    figures = _measure_alternated(opts, work, sizes)
    single, many = figures["single_tenant"], figures["tenants"]
    ratio, checks = _compare(single, many)
    claims = asyncio.run(_time_claims(many_db, opts.tenants, config))
    return {"ingest": figures, "ingest_ratio": ratio,
            "cpu_per_event_ratio": _cpu_ratio(single, many), "claim_ms": claims,
            "checks": checks, "pass": all(checks.values())}


def _destinations(opts: ScenarioOptions, work: Path, db: str) -> dict[str, Any]:
    """Ingest per N of opts.destination_counts (each N its own database and service, the
    measurements alternated) and one /metrics scrape per N."""
    sizes = []
    for n in sorted(opts.destination_counts):
        async def setup(store: Store, upto: int = n) -> None:
            for i in range(upto):
                await _add_paused(store, f"c{i}", DEFAULT_TENANT)
        sizes.append(Size(str(n), _fresh_database(db, f"n{n}"), n, 0, setup))
    per_n = _measure_alternated(opts, work, sizes, scrape=True)
    counts = [str(n) for n in sorted(opts.destination_counts)]
    smallest, largest = per_n[counts[0]], per_n[counts[-1]]
    ratio, checks = _compare(*per_n.values())
    return {"ingest": per_n, "ingest_ratio_largest_to_smallest": ratio,
            "cpu_per_event_ratio": _cpu_ratio(smallest, largest), "checks": checks,
            "pass": all(checks.values())}


def _compare(small: dict[str, Any], *others: dict[str, Any]
             ) -> tuple[float | None, dict[str, bool]]:
    """(the largest size's events/s over the smallest's, the checks) of sizes measured in
    ascending order: one job per event everywhere, and that ratio within INGEST_RATIO_LIMIT."""
    large = others[-1]
    ratio = round(large["events_per_s"] / small["events_per_s"], 3) \
        if small["events_per_s"] else None
    return ratio, {
        "every_event_has_one_job": all(f["jobs_per_event"] == 1.0 for f in (small, *others)),
        "ingest_within_10_percent": ratio is not None and ratio >= INGEST_RATIO_LIMIT}


@dataclass(frozen=True, slots=True)
class Size:
    """One size measured: its label, database, event types (`c{random 0..types-1}`),
    tenants the events are for (0: none named) and what `setup(store)` creates first."""

    label: str
    db: str
    type_count: int
    tenant_count: int
    setup: Callable[[Store], Awaitable[None]]


def _measure_alternated(opts: ScenarioOptions, work: Path, sizes: list[Size], *,
                        scrape: bool = False) -> dict[str, Any]:
    """Set up every size's database, start one service on each, then opts.rounds rounds of
    one wrk measurement per size in turn (so the machine's other load and the tables' growth
    fall on every size alike); per size, the median round by events/s with every round's
    events/s and ingest CPU per event, and, when `scrape`, one /metrics scrape at the end."""
    setup_s: dict[str, float] = {}
    for size in sizes:
        started = time.monotonic()
        asyncio.run(with_store(size.db, size.setup))
        setup_s[size.label] = round(time.monotonic() - started, 1)
    rounds: dict[str, list[dict[str, Any]]] = {size.label: [] for size in sizes}
    with contextlib.ExitStack() as services:
        running = []
        for size in sizes:  # a folder each: one service per runtime folder
            folder = work / f"serve-{size.label}"
            folder.mkdir(exist_ok=True)
            running.append((size, *services.enter_context(service_process(
                size.db, folder, bench_env(folder), workers=opts.workers,
                synchronous=opts.synchronous))))
        for n in range(opts.rounds):
            for size, port, procs in running:
                rounds[size.label].append(_ingest(opts, size.db, port, procs,
                                                  f"{size.label}-r{n}",
                                                  type_count=size.type_count,
                                                  tenant_count=size.tenant_count))
        out: dict[str, Any] = {}
        for size, port, _procs in running:
            runs = sorted(rounds[size.label], key=lambda r: r["events_per_s"])
            figures = dict(runs[len(runs) // 2])
            figures["rounds_events_per_s"] = [r["events_per_s"] for r in rounds[size.label]]
            figures["rounds_ingest_cpu_us_per_event"] = [r["ingest_cpu_us_per_event"]
                                                         for r in rounds[size.label]]
            figures["ingest_cpu_us_per_event"] = statistics.median(
                r["ingest_cpu_us_per_event"] or 0.0 for r in runs)
            server = [r["server_cpu_us_per_event"] for r in runs
                      if r["server_cpu_us_per_event"] is not None]
            figures["server_cpu_us_per_event"] = statistics.median(server) if server else None
            figures["setup_s"] = setup_s[size.label]
            if scrape:
                figures["metrics"] = _scrape_metrics(port)
            out[size.label] = figures
    return out


def _fresh_database(db: str, label: str) -> str:
    """A new empty database for one size: `db`'s file name with `-label` on SQLite, database
    `hookline_scale_<label>` on `db`'s PostgreSQL server."""
    if db.startswith(("postgresql://", "postgres://")):
        return asyncio.run(fresh_postgres_database(db, f"scale_{label}", "hookline_"))
    path = Path(db)
    return str(path.with_name(f"{path.stem}-{label}{path.suffix}"))


def _cpu_ratio(small: dict[str, Any], large: dict[str, Any]) -> float | None:
    """Ingest CPU per accepted event, large / small (medians of the rounds: the steadier
    figure on a shared machine)."""
    a, b = small["ingest_cpu_us_per_event"], large["ingest_cpu_us_per_event"]
    return round(b / a, 3) if a and b else None


def _ingest(opts: ScenarioOptions, db: str, port: int, procs: dict[str, int], label: str, *,
            type_count: int, tenant_count: int) -> dict[str, Any]:
    """wrk for opts.phase_s against the running service on `db`: events/s, the jobs written
    per event accepted, the CPU seconds each process (slot -> pid) used meanwhile and
    ingest's CPU per accepted event (µs)."""
    events_before, jobs_before = count_events_and_jobs(db)
    cpu_before = {slot: proc_cpu_s(pid) for slot, pid in procs.items()}
    threads_before = proc_thread_cpu_s(procs["ingest"])
    server_before = _server_cpu_s(db)
    load = wrk.run_wrk(f"http://127.0.0.1:{port}", max(1, round(opts.phase_s)),
                       opts.concurrency, opts.body_bytes, f"{label}-{os.urandom(4).hex()}",
                       INGEST_TOKEN, type_count=type_count, tenant_count=tenant_count)
    cpu_s = {slot: round(proc_cpu_s(pid) - cpu_before[slot], 2) for slot, pid in procs.items()}
    server_s = sum(now - server_before.get(pid, 0.0) for pid, now in _server_cpu_s(db).items())
    threads_s = thread_split(procs["ingest"], threads_before,
                             proc_thread_cpu_s(procs["ingest"]))
    time.sleep(0.5)  # requests wrk left open at its end still commit
    events, jobs = (now - before for now, before in zip(
        count_events_and_jobs(db), (events_before, jobs_before), strict=True))
    return {"cpu_s": cpu_s, "events_per_s": load["events_per_s"], "accepted": events,
            "ingest_cpu_us_per_event": round(cpu_s["ingest"] / events * 1e6, 1)
            if events else None,
            "ingest_threads_cpu_us_per_event": {
                thread: round(seconds / events * 1e6, 1) for thread, seconds in threads_s.items()}
            if events else None,
            # PostgreSQL: the server's processes serving this database (they share the
            # machine's cores with ingest and wrk)
            "server_cpu_us_per_event": round(server_s / events * 1e6, 1)
            if events and server_before else None,
            "non_2xx": load["non_2xx"], "latency_ms": load["latency_ms"],
            "jobs_per_event": round(jobs / events, 3) if events else None}


def _server_cpu_s(db: str) -> dict[int, float]:
    """{pid: CPU seconds} of the PostgreSQL server processes serving database `db` (each
    one's process title names it: `postgres: USER DATABASE HOST(PORT) STATE`); {} on
    SQLite."""
    if not db.startswith(("postgresql://", "postgres://")):
        return {}
    marker = f" {urllib.parse.urlsplit(db).path.lstrip('/')} ".encode()
    found: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if title.startswith(b"postgres: ") and marker in title:
            found[int(entry.name)] = proc_cpu_s(int(entry.name))
    return found


def thread_split(pid: int, before: dict[int, float], after: dict[int, float]
                 ) -> dict[str, float]:
    """CPU seconds a process's threads used between two proc_thread_cpu_s readings: its
    main thread (ingest's event loop) and all the others (the database thread above all).
    Shows whether a cost lies in the database thread or follows it into the loop."""
    used = {tid: seconds - before.get(tid, 0.0) for tid, seconds in after.items()}
    event_loop = used.pop(pid, 0.0)
    return {"event_loop": event_loop, "other_threads": sum(used.values())}


def count_events_and_jobs(db: str) -> tuple[int, int]:
    """Events and jobs stored, read in one statement (one snapshot)."""
    events, jobs = query(db, "SELECT (SELECT COUNT(*) FROM events), (SELECT COUNT(*) FROM jobs)")[0]
    return int(events), int(jobs)


async def _add_paused(store: Store, name: str, tenant: str) -> None:
    """Destination `name` of `tenant`, subscribed to `{name}.*`, paused."""
    await store.add_destination(name=name, url=UNREACHABLE_URL, secret=generate_secret(),
                                event_types=[f"{name}.*"], max_in_flight=64, tenant=tenant)
    await store.set_paused(name, True, reason="bench: ingest only", tenant=tenant)


async def _add_tenant_destinations(store: Store, tenant: str) -> None:
    for i in range(DESTINATIONS_PER_TENANT):
        await _add_paused(store, f"c{i}", tenant)


async def _add_tenants(store: Store, tenants: int) -> None:
    for t in range(tenants):
        await store.put_tenant(f"t{t}", TenantFields())
        await _add_tenant_destinations(store, f"t{t}")


def _scrape_metrics(port: int) -> dict[str, Any]:
    """One `GET /metrics`: seconds it took and lines it returned."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                     headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310  (127.0.0.1)
        text = answer.read().decode()
    return {"seconds": round(time.monotonic() - started, 3), "lines": text.count("\n")}


async def _time_claims(db: str, tenants: int, config: Config) -> dict[str, Any]:
    """Claim latency (the workers' own arguments; each claim's jobs handed back) with the
    default tenant's 3 destinations live, then with every tenant's live too."""
    store = open_store(db)
    await store.open()
    try:
        figures: dict[str, Any] = {}
        # the default tenant's destinations get work of their own (the tenants' jobs come
        # from the ingest measurement), enough for full claims
        await store.add_events([NewEvent(source="api", source_event_id=f"claim-{i}",
                                         type=f"c{i % DESTINATIONS_PER_TENANT}.invoice.paid",
                                         body=b"{}") for i in range(CLAIM_JOBS)])
        await _set_paused_all(store, DEFAULT_TENANT, paused=False)
        single = figures["single_tenant"] = await _claims(store, config)
        size = max(1, round(single["jobs_per_claim"]))
        # A tenth of the tenants live, then all of them: the claims take the same number of
        # jobs from as many destinations, so the two differ only in the tenants that exist
        # with work (the claim's cost should follow the work it takes, not them).
        tenth = max(1, tenants // 10)
        for t in range(tenants):
            if t == tenth:
                figures["tenth_of_tenants_same_jobs"] = await _claims(store, config, batch=size)
            await _set_paused_all(store, f"t{t}", paused=False)
        figures["tenants"] = await _claims(store, config)
        # One tenant may take only its share of a claim's slots, so the claims above take
        # different numbers of jobs; like for like, claims of the single tenant's size.
        same = figures["tenants_same_jobs"] = await _claims(store, config, batch=size)
        live = single["p50_ms"]
        figures["p50_ratio"] = round(same["p50_ms"] / live, 2) if live else None
        fewer = figures.get("tenth_of_tenants_same_jobs", {}).get("p50_ms")
        figures["p50_ratio_tenfold_tenants"] = round(same["p50_ms"] / fewer, 2) if fewer \
            else None
        return figures
    finally:
        await store.close()


async def _set_paused_all(store: Store, tenant: str, *, paused: bool) -> None:
    for i in range(DESTINATIONS_PER_TENANT):
        await store.set_paused(f"c{i}", paused, tenant=tenant)


async def _claims(store: Store, config: Config, *, batch: int | None = None
                  ) -> dict[str, Any]:
    """CLAIM_SAMPLES timed claims of `batch` jobs (default: the workers' `claim_batch`), each
    handed back untimed."""
    times_ms: list[float] = []
    taken = 0
    for _ in range(CLAIM_SAMPLES):
        started = time.perf_counter()
        claims = await store.claim(
            "bench-claim-probe", batch or config.claim_batch, config.lease_s,
            config.max_attempts,
            late_after=config.late_retry_after_attempts,
            max_late=late_slots(config.worker_concurrency, config.late_retry_share),
            per_destination=destination_slots(config.worker_concurrency,
                                              config.destination_slot_share),
            per_tenant=tenant_slots(config.worker_concurrency, config.tenant_slot_share))
        times_ms.append((time.perf_counter() - started) * 1000)
        taken += len(claims)
        await store.hand_back(claims)
    times_ms.sort()
    return {"p50_ms": round(pick(times_ms, 0.5), 3), "p99_ms": round(pick(times_ms, 0.99), 3),
            "jobs_per_claim": round(taken / len(times_ms), 1)}


def print_scale(result: dict[str, Any]) -> None:
    """The destinations or tenants scenario's lines of the summary."""
    if result["scenario"] == "destinations":
        for n, figures in result["ingest"].items():
            print(f"{n:>6} destinations: ingest {figures['events_per_s']} events/s "
                  f"({figures['jobs_per_event']} jobs/event, {figures['non_2xx']} non-2xx); "
                  f"GET /metrics {figures['metrics']['seconds']} s, "
                  f"{figures['metrics']['lines']} lines; ingest CPU "
                  f"{figures['ingest_cpu_us_per_event']} µs/event{_threads(figures)}")
        print(f"ingest largest / smallest: {result['ingest_ratio_largest_to_smallest']} "
              f"(target >= {INGEST_RATIO_LIMIT}); ingest CPU per event "
              f"x{result['cpu_per_event_ratio']}")
        return
    for label, figures in result["ingest"].items():
        print(f"{label}: ingest {figures['events_per_s']} events/s "
              f"({figures['jobs_per_event']} jobs/event, {figures['non_2xx']} non-2xx; "
              f"ingest CPU {figures['ingest_cpu_us_per_event']} µs/event{_threads(figures)})")
    print(f"ingest tenants / single tenant: {result['ingest_ratio']} "
          f"(target >= {INGEST_RATIO_LIMIT}); ingest CPU per event "
          f"x{result['cpu_per_event_ratio']}")
    claims = result["claim_ms"]
    for label in ("single_tenant", "tenth_of_tenants_same_jobs", "tenants",
                  "tenants_same_jobs"):
        if label in claims:
            print(f"claim {label}: p50 {claims[label]['p50_ms']} ms, p99 "
                  f"{claims[label]['p99_ms']} ms, {claims[label]['jobs_per_claim']} jobs per "
                  "claim")
    print(f"claim p50, every tenant live / the default tenant's alone (same jobs per claim): "
          f"x{claims['p50_ratio']}; every tenant live / a tenth of them (same jobs per claim): "
          f"x{claims.get('p50_ratio_tenfold_tenants')}")


def _threads(figures: dict[str, Any]) -> str:
    """`, of which event loop X / other threads Y` for the median round, when measured, and
    `; PostgreSQL server Z µs/event` (the median of the rounds) on PostgreSQL."""
    split = figures.get("ingest_threads_cpu_us_per_event")
    text = (f", of which event loop {split['event_loop']} / other threads "
            f"{split['other_threads']}") if split else ""
    server = figures.get("server_cpu_us_per_event")
    return text + (f"; PostgreSQL server {server} µs/event" if server is not None else "")

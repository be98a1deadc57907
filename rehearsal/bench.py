"""`hookline bench`: throughput, latency and cost of the real service on this machine.

Starts a fresh database (a SQLite file; or, with `backend="postgres"`, a database on a
throwaway PostgreSQL server started here with its durability defaults, or on the server a
`postgresql://` URL names), the receiver fixture (its own process, 3 endpoints = 3
destinations per event), `hookline serve` with W workers, and drives load from a separate
load-generator process. A flat-out run first measures the ceiling: the same load against a
bare aiohttp server (rehearsal/bench_ceiling.py), and reports ingest's share of it
(`ingest_vs_bare_aiohttp`). Reports ingest events/s, deliveries/s, accept->delivered latency,
CPU seconds per 1,000 deliveries and peak RSS per process (plus the CPU of a throwaway
PostgreSQL server), idle CPU, database and WAL size, and this disk's fsync latency (so
figures can be read on slower disks). Writes bench.json, with a per-second timeline, and
bench.png, its plot (rehearsal/bench_plot.py). All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.rehearsal import bench_plot, pgserver
from hookline.rehearsal.bench_ceiling import (
    CEILING_TARGET,
    ceiling_ratio,
    drive_load,
    load_generator,
    measure_ceiling,
    measure_sender_ceiling,
    sender_ratios,
)
from hookline.rehearsal.bench_latency import percentiles_ms, sent_to_delivered_ms
from hookline.rehearsal.drill import fresh_postgres_database
from hookline.rehearsal.harness import (
    LOCAL_SETTINGS,
    children_of,
    free_port,
    receiver_child,
    service_processes,
    stop_process,
    wait_healthy,
)
from hookline.rehearsal.machine_probe import cold_read_text, machine_figures
from hookline.shared.config import Config
from hookline.shared.db_url import is_postgres_url
from hookline.shared.process.ingest_writer import WRITER_SLOT
from hookline.shared.process.lifecycle import ready_path
from hookline.shared.process.spawn import child_import_env
from hookline.shared.signing import generate_secret
from hookline.shared.store import open_store
from hookline.supervisor.children import worker_slot
from hookline.supervisor.serve import ingest_slot

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """What to run: `events` posted at `rate_per_s` (None = flat out) by `concurrency`
    connections, delivered by `workers` worker processes to 3 destinations.

    `backend` is `sqlite` (a fresh file) or `postgres`: a fresh database `hookline_bench` on
    the server `postgres_url` names (dropped and recreated: the user needs CREATEDB), or,
    when that is None, on a throwaway server started for the run (rehearsal/pgserver.py,
    PostgreSQL's durability defaults, data under `out_dir`). `idle_s`: seconds of the idle
    measurement. `use_wrk`: flat-out load from wrk when installed (it runs for a duration,
    about `events` at 15,000/s, at least 3 s); False: the Python generator, exactly `events`.
    """

    events: int = 20_000
    rate_per_s: float | None = None
    workers: int = 2
    concurrency: int = 64
    body_bytes: int = 1500
    synchronous: str = "FULL"
    worker_synchronous: str = "NORMAL"
    """The workers' commits (Config.worker_synchronous); `synchronous` is ingest's."""
    out_dir: Path = Path("results/bench")
    backend: str = "sqlite"
    postgres_url: str | None = None
    idle_s: float = 5.0
    use_wrk: bool = True
    destination_filter: dict[str, Any] | None = None
    """A payload filter every destination gets (what filters cost ingest: docs/benchmarks.md)."""
    ceilings: bool = True
    """Flat out: measure the bare aiohttp server and the bare clients first (the everyday
    scenario, which compares hookline with itself, leaves them out)."""
    ingest_processes: int = 1
    """Ingest processes of the service, sharing its port (the `ingest_processes` setting)."""
    ingest_writer: str = "thread"
    """Where ingest's commits run: `thread` or `process` (the `ingest_writer` setting)."""
    arrivals: str = "even"
    """How a steady rate's events are spaced: `even` or `poisson` (rehearsal/loadgen.py)."""


def proc_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a live process (0.0 once it is gone)."""
    return _stat_cpu_s(f"/proc/{pid}/stat") or 0.0


def _stat_cpu_s(stat_path: str) -> float | None:
    """User+system CPU seconds from a /proc `stat` file (a process's or a thread's); None
    when it is gone."""
    try:
        fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def proc_thread_cpu_s(pid: int) -> dict[int, float]:
    """User+system CPU seconds of each live thread of a live process, by thread id (the
    main thread's id is `pid`); {} once the process is gone. A thread that ended is
    missing, with the CPU it used."""
    found: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        seconds = _stat_cpu_s(f"/proc/{pid}/task/{tid}/stat")
        if seconds is not None:  # else the thread ended meanwhile
            found[int(tid)] = seconds
    return found


def proc_peak_rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of a live process, in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def is_postgres(db: str) -> bool:
    """Whether `db` is a PostgreSQL URL (else a SQLite file path)."""
    return is_postgres_url(db)


def query(db: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of one read-only SQL statement on its own connection: sqlite3 (read-only) on a
    file, asyncpg on a PostgreSQL URL. Never writes, so the measurement changes nothing."""
    if is_postgres(db):
        import asyncpg  # noqa: PLC0415  (PostgreSQL runs only)

        async def fetch() -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(db)
            try:
                return [tuple(r) for r in await conn.fetch(sql)]
            finally:
                await conn.close()

        return list(pgserver.run_coroutine(fetch))
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def db_figures(db: str, delivery_t0: float) -> dict[str, Any]:
    """Deliveries per second since `delivery_t0` (unix s, when destinations were resumed),
    and two latencies from the jobs table (read-only): accept->delivered (`latency_ms`: to
    `finished_at`, when the destination's answer arrived) and accept->recorded
    (`recorded_latency_ms`: to `updated_at`, when the worker's write recorded it).

    Args:
        db: the SQLite file or the PostgreSQL URL.
        delivery_t0: unix seconds; the delivery phase's start.
    """
    rows = query(db, "SELECT j.finished_at - e.received_at, j.updated_at, "
                     "j.updated_at - e.received_at "
                     "FROM jobs j JOIN events e ON e.id = j.event_id WHERE j.status = 'done'")
    by_status = dict(query(db, "SELECT status, COUNT(*) FROM jobs GROUP BY status"))
    span_s = (max(r[1] for r in rows) - delivery_t0) if rows else 0.0
    return {"jobs_by_status": by_status, "delivered": len(rows),
            "deliveries_per_s": round(len(rows) / span_s, 1) if span_s else None,
            "latency_ms": percentiles_ms([r[0] for r in rows]),
            "recorded_latency_ms": percentiles_ms([r[2] for r in rows])}


async def setup_destinations(db: str, receiver_port: int, secrets: list[str],
                             paused: bool, destination_filter: dict[str, Any] | None = None
                             ) -> None:
    """Destinations d1, d2, ... (one per secret, every event type, max_in_flight 64, the
    payload filter `destination_filter`) on the receiver at `receiver_port`; paused ones let
    the ingest phase run alone."""
    store = open_store(db)
    await store.open()
    try:
        for n, secret in enumerate(secrets, 1):
            await store.add_destination(name=f"d{n}", url=f"http://127.0.0.1:{receiver_port}/d{n}",
                                        secret=secret, event_types=["*"], max_in_flight=64,
                                        filter=destination_filter)
            if paused:
                await store.set_paused(f"d{n}", True, reason="bench: ingest phase")
    finally:
        await store.close()


async def _resume_all(db: str) -> None:
    """Resume every destination: the delivery phase starts (workers are woken)."""
    store = open_store(db)
    await store.open()
    try:
        for dest in await store.list_destinations():
            await store.set_paused(dest.name, False)
    finally:
        await store.close()


def read_timeline(db: str, start_s: float) -> list[dict[str, Any]]:
    """The run's per-second timeline (rehearsal/bench_plot.timeline), read-only from `db`
    (SQLite path or PostgreSQL URL); `start_s`: the run's start, unix seconds."""
    return bench_plot.timeline(
        (row[0] for row in query(db, "SELECT received_at FROM events")),
        query(db, "SELECT j.finished_at, e.received_at FROM jobs j "
                  "JOIN events e ON e.id = j.event_id WHERE j.status = 'done'"),
        start_s)


def count_events(db: str) -> int:
    """Events stored in `db` (SQLite path or PostgreSQL URL)."""
    return int(query(db, "SELECT COUNT(*) FROM events")[0][0])


def wait_settled(db: str, expected_jobs: int, timeout_s: float) -> float:
    """Wait until `expected_jobs` jobs are done or dead; returns time.monotonic() then.

    Raises:
        TimeoutError: not so after `timeout_s` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = query(db, "SELECT COUNT(*) FROM jobs WHERE status IN ('done', 'dead')")[0][0]
        if done >= expected_jobs:
            return time.monotonic()
        time.sleep(0.1)
    raise TimeoutError(f"deliveries not finished within {timeout_s} s")


def server_cpu_s(postmaster_pid: int) -> float:
    """User+system CPU seconds of a PostgreSQL server: the postmaster, its reaped children
    (cutime/cstime: backends that already exited) and its live children."""
    try:
        fields = Path(f"/proc/{postmaster_pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    own = sum(int(f) for f in fields[11:15]) / CLOCK_TICKS
    return own + sum(proc_cpu_s(pid) for pid in children_of(postmaster_pid))


@contextlib.contextmanager
def bench_database(opts: BenchOptions, work: Path) -> Iterator[tuple[str, str, int | None]]:
    """Yields (database: SQLite path or PostgreSQL URL, description, postmaster pid or None)
    for one run; a throwaway server is stopped and deleted afterwards."""
    if opts.backend == "sqlite":
        yield str(work / "bench.db"), "SQLite file", None
        return
    if opts.backend != "postgres":
        raise ValueError(f"backend must be sqlite or postgres, not {opts.backend!r}")
    if opts.postgres_url is not None:
        url = asyncio.run(fresh_postgres_database(opts.postgres_url, "bench", "hookline_"))
        yield url, "PostgreSQL server (given URL)", None
        return
    parent: Path | None = work  # beside the SQLite file of a SQLite run: the same disk
    if os.geteuid() == 0:
        # The server runs as `postgres`: it must be able to reach its folder. When a folder
        # above --out is private, the server goes to the temp folder instead.
        work.chmod(0o711)
        if not all(folder.stat().st_mode & stat.S_IXOTH for folder in work.parents):
            parent = None
    with pgserver.throwaway_server(parent, durable=True) as server:
        url = server.create_database("hookline_bench")
        pid = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
        yield url, f"PostgreSQL (throwaway server, fsync on, data in {server.root})", pid


def run_bench(opts: BenchOptions) -> dict[str, Any]:
    """Run one benchmark; returns the figures also written to `out_dir/bench.json`, and
    draws `out_dir/bench.png` when matplotlib is installed (`plot`: its name, else None)."""
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hookline-bench-", dir=opts.out_dir))
    load_before = os.getloadavg()[0]
    with bench_database(opts, work) as (db, description, postmaster):
        result = _run(opts, work, db, postmaster)
    result["backend"] = {"name": opts.backend, "database": description}
    # In words, so a fallback to the Python generator is never mistaken for a wrk figure.
    result["load_generator"] = load_generator(opts)
    result["destination_filter"] = opts.destination_filter
    # Other work on the machine skews every figure: say how busy it was.
    result["machine"]["load_average_1m"] = {"before": round(load_before, 2),
                                            "after": round(os.getloadavg()[0], 2)}
    plotted = bench_plot.write_plot(result, opts.out_dir / "bench.png")
    result["plot"] = "bench.png" if plotted else None
    (opts.out_dir / "bench.json").write_text(json.dumps(result, indent=2))
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class Receiver:
    """The receiver fixture's process: `pid`, `port`, and the `secrets` of d1, d2, d3."""

    pid: int
    port: int
    secrets: tuple[str, ...]


def bench_env(work: Path) -> dict[str, str]:
    """The environment of the bench's children: this checkout importable, LOCAL_SETTINGS, and
    runtime files in `work` (a server database has no folder, so they go there on SQLite too)."""
    return {**os.environ, **child_import_env(),
            **LOCAL_SETTINGS, "HOOKLINE_RUNTIME_DIR": str(work / "run"),
            "HOOKLINE_PID_FILE": str(work / "hookline.pid")}


@contextlib.contextmanager
def receiver_process(env: dict[str, str], behaviours: tuple[str, ...] | None = None
                     ) -> Iterator[Receiver]:
    """A receiver in its own process on a free port, endpoints d1, d2, ... each with a fresh
    secret; stopped (SIGTERM, then SIGKILL after 30 s) on exit.

    Raises:
        ReceiverNotStarted: the receiver exited before announcing its port.

    Args:
        env: the children's environment (bench_env).
        behaviours: None: the lean receiver (rehearsal/fast_receiver.py; its CPU would
            otherwise be taken from the service under test) with 3 endpoints that answer
            2xx. A tuple of behaviour specs (hookline.rehearsal.receiver.parse_behaviour): the
            receiver fixture with one endpoint per spec, whose behaviour `PUT /_behaviour/NAME`
            changes.
    """
    module = ("hookline.rehearsal.fast_receiver" if behaviours is None
              else "hookline.rehearsal.receiver")
    behaviours = behaviours or ("ok", "ok", "ok")
    secrets = tuple(generate_secret() for _ in behaviours)
    specs = [f"d{n}={secret}:{behaviour}"
             for n, (secret, behaviour) in enumerate(zip(secrets, behaviours, strict=True), 1)]
    with receiver_child(module, specs, env) as (pid, port):
        yield Receiver(pid=pid, port=port, secrets=secrets)


@contextlib.contextmanager
def service_process(db: str, work: Path, env: dict[str, str], *, workers: int,
                    synchronous: str, ingest_processes: int = 1,
                    worker_synchronous: str = "NORMAL", ingest_writer: str = "thread"
                    ) -> Iterator[tuple[int, dict[str, int]]]:
    """`hookline serve` on `db` with `workers` workers and `ingest_processes` ingest
    processes, logging (warnings and up) to `work/service.log`, SQLite's commits with
    `synchronous` (the workers' with `worker_synchronous`) and the `ingest_writer` setting
    (`process`: the ingest writer process commits ingest's events); yields (ingest port, slot ->
    pid of the supervisor and its children) once ingest is healthy and every ingest process
    and worker is ready (its readiness marker in the runtime folder `env` names); stopped
    (SIGTERM, then SIGKILL after 30 s) on exit.

    Raises:
        TimeoutError: ingest did not answer /healthz within 15 s, or an ingest process or a
            worker was not ready within 15 s more.
        RuntimeError: the service exited while starting.
    """
    port = free_port()
    with (work / "service.log").open("ab") as log:
        service = subprocess.Popen(
            [sys.executable, "-m", "hookline.supervisor.cli", "--db", db, "--log-level",
             "warning", "serve", "--workers", str(workers), "--ingest-processes",
             str(ingest_processes), "--listen", f"127.0.0.1:{port}"], stdout=log,
            stderr=subprocess.STDOUT, env={**env, "HOOKLINE_SYNCHRONOUS": synchronous,
                                           "HOOKLINE_WORKER_SYNCHRONOUS": worker_synchronous,
                                           "HOOKLINE_INGEST_WRITER": ingest_writer})
    try:
        asyncio.run(wait_healthy(f"http://127.0.0.1:{port}"))
        _wait_children_ready(service, Path(env["HOOKLINE_RUNTIME_DIR"]), ingest_processes,
                             workers, writer=ingest_writer == "process" and not
                             is_postgres_url(db))  # PostgreSQL: no writer process
        yield port, service_processes(service.pid)
    finally:
        stop_process(service)


def _wait_children_ready(service: subprocess.Popen[bytes], runtime: Path,
                         ingest_processes: int, workers: int, timeout_s: float = 15.0, *,
                         writer: bool = False) -> None:
    """Wait until each of `ingest_processes` ingest slots (`ingest`, `ingest-2`, ...) and
    `workers` worker slots (`worker-1`, ...) of the supervisor `service`, and with `writer`
    the ingest writer's slot, is ready: its readiness marker in `runtime` names the pid the
    slot runs now (it listens; it has opened the store), so that no child is still starting
    when the load begins.

    Raises:
        TimeoutError: a slot was not ready within `timeout_s` seconds.
        RuntimeError: the supervisor exited meanwhile.
    """
    config = Config(runtime_dir=str(runtime))
    slots = ([WRITER_SLOT] if writer else []) + (
        [ingest_slot(n) for n in range(1, ingest_processes + 1)]
        + [worker_slot(n) for n in range(1, workers + 1)])
    deadline = time.monotonic() + timeout_s
    while waiting := _not_ready(config, slots, service_processes(service.pid)):
        if service.poll() is not None:
            raise RuntimeError(f"hookline serve exited ({service.returncode}) while starting")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not ready after {timeout_s} s: {', '.join(waiting)}")
        time.sleep(0.05)


def _not_ready(config: Config, slots: list[str], pids: dict[str, int]) -> list[str]:
    """The slots whose readiness marker is missing or names another pid than `pids` gives
    (a marker a killed child left until its respawn)."""
    waiting = []
    for slot in slots:
        try:
            marked = ready_path(config, slot).read_text().strip()
        except OSError:
            marked = ""
        if slot not in pids or marked != str(pids[slot]):
            waiting.append(slot)
    return waiting


def _run(opts: BenchOptions, work: Path, db: str, postmaster: int | None) -> dict[str, Any]:
    """One run against the database `db` (SQLite path or PostgreSQL URL); `postmaster`: the
    pid of a server started for it, whose CPU is then counted too."""
    env = bench_env(work)
    # The ceilings first, on a quiet machine (flat-out runs only: a steady rate has none;
    # the everyday scenario leaves them out).
    measure_ceilings = opts.rate_per_s is None and opts.ceilings
    ceiling = measure_ceiling(opts, env) if measure_ceilings else None
    sender_ceiling = measure_sender_ceiling(opts, env) if measure_ceilings else None
    with receiver_process(env) as receiver:
        # Flat out: ingest alone, then delivery. At a steady --rate: both at once, so the
        # accept-to-delivered latency is the one a user sees.
        asyncio.run(setup_destinations(db, receiver.port, list(receiver.secrets),
                                       paused=opts.rate_per_s is None,
                                       destination_filter=opts.destination_filter))
        with service_process(db, work, env, workers=opts.workers,
                             synchronous=opts.synchronous,
                             worker_synchronous=opts.worker_synchronous,
                             ingest_processes=opts.ingest_processes,
                             ingest_writer=opts.ingest_writer) as (port, procs):
            result = _measure(opts, work, db, postmaster, env, port, receiver.port,
                              {**procs, "receiver": receiver.pid})
    # Each process leaves its write-lock report at exit: read once the service has stopped.
    result["write_lock"] = write_lock_figures(work / "run")
    if ceiling is not None:
        result["ceiling"] = ceiling
        result["ingest_vs_bare_aiohttp"] = {
            "ratio": ceiling_ratio(float(result["ingest"]["events_per_s"]), ceiling),
            "target": CEILING_TARGET}
    if sender_ceiling is not None:
        result["sender_ceiling"] = sender_ceiling
        result.update(sender_ratios(result["delivery"]["deliveries_per_s"],
                                    workers_cpu_per_1000(result), sender_ceiling))
    return result


def workers_cpu_per_1000(result: dict[str, Any]) -> float:
    """All worker processes' CPU seconds per 1,000 deliveries (the sum over `worker-N`)."""
    return round(sum(float(cpu) for slot, cpu in result["cpu_s_per_1000_deliveries"].items()
                     if slot.startswith("worker")), 3)


def _measure(opts: BenchOptions, work: Path, db: str, postmaster: int | None,
             env: dict[str, str], port: int, receiver_port: int,
             procs: dict[str, int]) -> dict[str, Any]:
    """The measurement of :func:`_run` once the receiver (on `receiver_port`) and the service
    (ingest on `port`) run; `procs`: slot -> pid of every process whose CPU and RSS count."""
    if postmaster is not None:
        procs["postgres"] = postmaster

    def cpu_s(slot: str, pid: int) -> float:
        return server_cpu_s(pid) if slot == "postgres" else proc_cpu_s(pid)

    cpu_before = {slot: cpu_s(slot, pid) for slot, pid in procs.items()}
    t0, start_s = time.monotonic(), time.time()
    sends = work / "sends.json" if opts.rate_per_s else None  # as drive_load's --rate
    ingest = drive_load(opts, env, f"http://127.0.0.1:{port}", sends_path=sends)
    ingest["cpu_s"] = {slot: round(cpu_s(slot, pid) - cpu_before[slot], 2)
                       for slot, pid in procs.items()}
    accepted = count_events(db)
    ingest["accepted"] = accepted
    delivery_t0 = time.time()
    if opts.rate_per_s is None:
        asyncio.run(_resume_all(db))
    else:
        delivery_t0 -= float(ingest["elapsed_s"])
    wait_settled(db, accepted * 3, timeout_s=600)
    busy_s = time.monotonic() - t0
    cpu_busy = {slot: cpu_s(slot, pid) - cpu_before[slot] for slot, pid in procs.items()}
    # A server's peak RSS is mostly shared buffers, counted once per backend: left out.
    rss = {slot: round(proc_peak_rss_mb(pid), 1) for slot, pid in procs.items()
           if slot != "postgres"}
    figures = db_figures(db, delivery_t0)
    if sends is not None:  # a steady run: what the sender saw, from its POST
        sent = json.loads(sends.read_text())
        figures["sent_latency_ms"] = sent_to_delivered_ms(
            query(db, "SELECT e.source_event_id, j.finished_at FROM jobs j JOIN events e "
                      "ON e.id = j.event_id WHERE j.status = 'done'"),
            sent["run_id"], sent["sent_at"])
    idle = _idle_cost(procs, db, seconds=opts.idle_s, cpu_s=cpu_s)
    with urllib.request.urlopen(f"http://127.0.0.1:{receiver_port}/_summary",
                                timeout=10) as answer:
        received = json.loads(answer.read())["endpoints"]
    return {
        "machine": machine_figures(work),
        "options": {f: redact(str(getattr(opts, f))) for f in opts.__slots__},
        "ingest": ingest, "delivery": figures, "busy_s": round(busy_s, 2),
        "cpu_s_per_1000_deliveries": {
            slot: round(cpu * 1000 / max(1, figures["delivered"]), 3)
            for slot, cpu in cpu_busy.items()},
        "peak_rss_mb": rss, "idle": idle, **_sizes(db),
        # What the receiver verified: effects (first delivery per webhook-id) and repeats.
        "receiver": received,
        "started_at": round(start_s, 3), "timeline": read_timeline(db, start_s),
    }


def write_lock_figures(run_dir: Path) -> dict[str, Any]:
    """Per process, its waits for SQLite's write lock and its holds of it (milliseconds), from
    the reports each process leaves in `run_dir` at exit (shared/lifecycle.report_write_lock);
    empty on PostgreSQL."""
    figures = {}
    for path in sorted(run_dir.glob("*.write-lock.json")):
        report = json.loads(path.read_text())
        figures[report.pop("slot")] = report
    return figures


def redact(text: str) -> str:
    """`text` with the password of any URL in it replaced by ***."""
    return re.sub(r"(://[^:/@\s]+):[^@\s]*@", r"\1:***@", text)


def _sizes(db: str) -> dict[str, int | None]:
    """`db_bytes` (the file, or the PostgreSQL database) and `wal_bytes` (SQLite's -wal
    file; None on PostgreSQL, whose WAL belongs to the whole server)."""
    if is_postgres(db):
        return {"db_bytes": int(query(db, "SELECT pg_database_size(current_database())")[0][0]),
                "wal_bytes": None}
    wal = Path(f"{db}-wal")
    return {"db_bytes": Path(db).stat().st_size,
            "wal_bytes": wal.stat().st_size if wal.exists() else 0}


_PG_TABLES = ("destinations", "sources", "events", "jobs", "attempts")


def _write_stamp(db: str) -> tuple[Any, ...]:
    """Something that changes whenever hookline writes to the database: the file and -wal
    mtimes on SQLite; on PostgreSQL, per table, the row count (deletes) and the newest row
    version's transaction id (inserts and updates). Not the server's statistics, which a
    backend may report up to 10 s late, nor its WAL, which autovacuum writes too. The rows
    are sorted by table: UNION ALL promises no order (a parallel plan may change it)."""
    if is_postgres(db):
        return tuple(sorted(query(db, " UNION ALL ".join(
            f"SELECT '{t}', count(*), max(xmin::text::bigint) FROM {t}"  # noqa: S608  (table names from the fixed _PG_TABLES)
            for t in _PG_TABLES))))
    wal = Path(f"{db}-wal")
    return Path(db).stat().st_mtime_ns, wal.stat().st_mtime_ns if wal.exists() else 0


def _idle_cost(procs: dict[str, int], db: str, seconds: float,
               cpu_s: Callable[[str, int], float] | None = None) -> dict[str, Any]:
    """CPU share of the whole service (and of a throwaway database server), each process's
    share (`by_process`: the server's apart from hookline's own), and database writes while
    nothing is to be done, over `seconds`.

    Args:
        procs: slot name -> pid; the `receiver` slot is left out.
        db: the SQLite file or the PostgreSQL URL.
        seconds: how long to watch.
        cpu_s: (slot, pid) -> CPU seconds so far (default: the one process's own).
    """
    cpu_s = cpu_s or (lambda slot, pid: proc_cpu_s(pid))
    service = {slot: pid for slot, pid in procs.items() if slot != "receiver"}
    before = {slot: cpu_s(slot, pid) for slot, pid in service.items()}
    stamp = _write_stamp(db)
    time.sleep(seconds)
    used = {slot: cpu_s(slot, pid) - before[slot] for slot, pid in service.items()}
    return {"cpu_percent_of_one_core": round(100 * sum(used.values()) / seconds, 2),
            "by_process": {slot: round(100 * cpu / seconds, 2) for slot, cpu in used.items()},
            "database_written": _write_stamp(db) != stamp}


def _pairs(value: Any) -> str:
    """A figure for the human report: a mapping as `key value, ...` (nested in
    parentheses), None as `-`, anything else as it is."""
    if isinstance(value, dict):
        return ", ".join(f"{k} ({_pairs(v)})" if isinstance(v, dict) else f"{k} {_pairs(v)}"
                         for k, v in value.items()) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "-" if value is None else str(value)


def print_report(result: dict[str, Any]) -> None:
    """A short human summary of `result` (mappings as `key value, ...`, never reprs)."""
    ing, dlv = result["ingest"], result["delivery"]
    mode = "steady rate, delivering" if result["options"]["rate_per_s"] != "None" else \
        "destinations paused"
    print(f"backend: {result['backend']['name']} ({result['backend']['database']})")
    print(f"load generator: {result.get('load_generator', ing.get('tool', 'python'))}")
    print(f"ingest ({mode}, load by {ing.get('tool', 'python')}): "
          f"{ing['events_per_s']} events/s accepted, latency ms "
          f"{_pairs(ing['latency_ms'])}, accepted {ing['accepted']}, cpu s {_pairs(ing['cpu_s'])}"
          + (f", load generator {ing['generator_cpu_s']}" if "generator_cpu_s" in ing else ""))
    if "ceiling" in result:
        versus = result["ingest_vs_bare_aiohttp"]
        print(f"ceiling (bare aiohttp, same load): {result['ceiling']['events_per_s']} "
              f"events/s; ingest_vs_bare_aiohttp {versus['ratio']} (target {versus['target']})")
    print(f"delivery: {dlv['deliveries_per_s']} deliveries/s, {dlv['delivered']} delivered, "
          f"accept->delivered ms {_pairs(dlv['latency_ms'])}"
          + (f"; accept->recorded ms p50 {dlv['recorded_latency_ms']['p50']}, p99 "
             f"{dlv['recorded_latency_ms']['p99']}" if "recorded_latency_ms" in dlv else "")
          + (f"; sent->delivered ms p50 {dlv['sent_latency_ms']['p50']}, p99 "
             f"{dlv['sent_latency_ms']['p99']}" if "sent_latency_ms" in dlv else ""))
    if "sender_ceiling" in result:
        top, rate = result["sender_ceiling"], result["delivery_vs_bare_client"]
        cpu = result["cpu_per_delivery_vs_bare_client"]
        print(f"sender ceiling (bare aiohttp clients, {len(top['clients'])} x "
              f"{top['concurrency']} in flight, signed, lean receiver): "
              f"{top['requests_per_s']} requests/s, cpu s per 1000 "
              f"{top['cpu_s_per_1000_requests']}; delivery_vs_bare_client {rate['ratio']} "
              f"(target {rate['target']}), cpu_per_delivery_vs_bare_client {cpu['ratio']} "
              f"(target at most {cpu['target']})")
    print(f"cpu s per 1000 deliveries: {_pairs(result['cpu_s_per_1000_deliveries'])}")
    print(f"peak rss MiB: {_pairs(result['peak_rss_mb'])}")
    wal = "n/a" if result["wal_bytes"] is None else f"{result['wal_bytes']} B"
    print(f"idle: {_pairs(result['idle'])}; db {result['db_bytes']} B, wal {wal}")
    cold = cold_read_text(result["machine"])
    print(f"machine: fsync ms {_pairs(result['machine']['fsync_ms'])}"
          + (f"; {cold}" if cold else ""))
    print("plot: bench.png beside bench.json" if result.get("plot") else
          f"plot skipped: matplotlib is not installed ({bench_plot.INSTALL_HINT})")
    for slot, lock in result.get("write_lock", {}).items():
        wait, hold = lock["wait"], lock["hold"]
        print(f"write lock {slot}: {wait['count']} transactions, wait ms p99 {wait['p99_ms']} "
              f"max {wait['max_ms']}, hold ms p50 {hold['p50_ms']} p99 {hold['p99_ms']}")

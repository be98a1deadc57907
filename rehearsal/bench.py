"""`hookline bench`: throughput, latency and cost of the real service on this machine.

Starts a fresh SQLite database, the receiver fixture (its own process, 3 endpoints = 3
destinations per event), `hookline serve` with W workers, and drives load from a separate
load-generator process. Reports ingest events/s, deliveries/s, accept->delivered latency,
CPU seconds per 1,000 deliveries and peak RSS per process, idle CPU, database and WAL size,
and this disk's fsync latency (so figures can be read on slower disks). Writes bench.json.
All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rehearsal import wrk
from rehearsal.harness import (
    INGEST_TOKEN,
    LOCAL_SETTINGS,
    free_port,
    service_processes,
    wait_healthy,
)
from shared.signing import generate_secret
from shared.store import open_store

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """What to run: `events` posted at `rate_per_s` (None = flat out) by `concurrency`
    connections, delivered by `workers` worker processes to 3 destinations."""

    events: int = 20_000
    rate_per_s: float | None = None
    workers: int = 2
    concurrency: int = 64
    body_bytes: int = 1500
    synchronous: str = "FULL"
    out_dir: Path = Path("results/bench")


def fsync_latency_ms(folder: Path, samples: int = 200) -> dict[str, float]:
    """p50/p99 of write(4 KiB)+fsync on a file in `folder`, in milliseconds."""
    path = folder / "fsync.probe"
    times = []
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        for _ in range(samples):
            os.write(fd, b"x" * 4096)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    times.sort()
    return {"p50": round(times[len(times) // 2], 3), "p99": round(times[int(len(times) * .99)], 3)}


def proc_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a live process (0.0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def proc_peak_rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of a live process, in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def db_figures(db: Path, delivery_t0: float) -> dict[str, Any]:
    """Deliveries per second since `delivery_t0` (unix s, when destinations were resumed),
    and accept->delivered latency, from the jobs table (read-only)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT j.finished_at - e.received_at, j.finished_at, e.received_at FROM jobs j "
            "JOIN events e ON e.id = j.event_id WHERE j.status = 'done'").fetchall()
        by_status = dict(conn.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status"))
    finally:
        conn.close()
    latencies = sorted(r[0] * 1000 for r in rows)
    span_s = (max(r[1] for r in rows) - delivery_t0) if rows else 0.0
    pick = (lambda f: round(latencies[min(len(latencies) - 1, int(f * len(latencies)))], 2)
            if latencies else None)
    return {"jobs_by_status": by_status, "delivered": len(rows),
            "deliveries_per_s": round(len(rows) / span_s, 1) if span_s else None,
            "latency_ms": {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99),
                           "max": round(latencies[-1], 2) if latencies else None}}


async def _setup(db: Path, receiver_port: int, secrets: list[str], paused: bool) -> None:
    """Three destinations on the receiver; paused ones let the ingest phase run alone."""
    store = open_store(str(db))
    await store.open()
    try:
        for n, secret in enumerate(secrets, 1):
            await store.add_destination(name=f"d{n}", url=f"http://127.0.0.1:{receiver_port}/d{n}",
                                        secret=secret, event_types=["*"], max_in_flight=64)
            if paused:
                await store.set_paused(f"d{n}", True, reason="bench: ingest phase")
    finally:
        await store.close()


async def _resume_all(db: Path) -> None:
    """Resume every destination: the delivery phase starts (workers are woken)."""
    store = open_store(str(db))
    await store.open()
    try:
        for dest in await store.list_destinations():
            await store.set_paused(dest.name, False)
    finally:
        await store.close()


def _count_events(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    finally:
        conn.close()


def _wait_settled(db: Path, expected_jobs: int, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        while time.monotonic() < deadline:
            done = conn.execute("SELECT COUNT(*) FROM jobs WHERE status IN ('done', 'dead')"
                                ).fetchone()[0]
            if done >= expected_jobs:
                return time.monotonic()
            time.sleep(0.1)
    finally:
        conn.close()
    raise TimeoutError(f"deliveries not finished within {timeout_s} s")


def run_bench(opts: BenchOptions) -> dict[str, Any]:
    """Run one benchmark; returns the figures also written to `out_dir/bench.json`."""
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hookline-bench-", dir=opts.out_dir))
    db = work / "bench.db"
    secrets = [generate_secret() for _ in range(3)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           **LOCAL_SETTINGS}
    receiver = subprocess.Popen(
        [sys.executable, "-m", "rehearsal.receiver", "--listen", "127.0.0.1:0",
         *[arg for n, s in enumerate(secrets, 1) for arg in ("--endpoint", f"d{n}={s}:ok")]],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    service: subprocess.Popen[bytes] | None = None
    try:
        assert receiver.stdout is not None
        receiver_port = json.loads(receiver.stdout.readline())["port"]
        # Flat out: ingest alone, then delivery. At a steady --rate: both at once, so the
        # accept-to-delivered latency is the one a user sees.
        asyncio.run(_setup(db, receiver_port, secrets, paused=opts.rate_per_s is None))
        port = free_port()
        log_path = work / "service.log"
        with log_path.open("wb") as log:
            service = subprocess.Popen(
                [sys.executable, "-m", "supervisor.cli", "--db", str(db), "--log-level",
                 "warning", "serve", "--workers", str(opts.workers), "--listen",
                 f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT,
                env={**env, "HOOKLINE_SYNCHRONOUS": opts.synchronous})
        asyncio.run(wait_healthy(f"http://127.0.0.1:{port}"))
        time.sleep(0.5)
        procs = service_processes(service.pid)
        procs["receiver"] = receiver.pid
        cpu_before = {slot: proc_cpu_s(pid) for slot, pid in procs.items()}
        t0 = time.monotonic()
        if opts.rate_per_s is None and wrk.available():
            # wrk runs for a duration; size it to offer about `events` at ~15,000/s.
            ingest = wrk.run_wrk(f"http://127.0.0.1:{port}", max(3, opts.events // 15_000),
                                 opts.concurrency, opts.body_bytes, os.urandom(4).hex(),
                                 INGEST_TOKEN)
        else:
            load = subprocess.run(
                [sys.executable, "-m", "rehearsal.loadgen", "--url",
                 f"http://127.0.0.1:{port}/v1/events", "--events", str(opts.events),
                 "--concurrency", str(opts.concurrency), "--body-bytes", str(opts.body_bytes),
                 *(["--rate", str(opts.rate_per_s)] if opts.rate_per_s else [])],
                capture_output=True, text=True, env=env, check=True)
            ingest = json.loads(load.stdout)
        ingest["cpu_s"] = {slot: round(proc_cpu_s(pid) - cpu_before[slot], 2)
                           for slot, pid in procs.items()}
        accepted = _count_events(db)
        ingest["accepted"] = accepted
        delivery_t0 = time.time()
        if opts.rate_per_s is None:
            asyncio.run(_resume_all(db))
        else:
            delivery_t0 -= float(ingest["elapsed_s"])
        _wait_settled(db, accepted * 3, timeout_s=600)
        busy_s = time.monotonic() - t0
        cpu_busy = {slot: proc_cpu_s(pid) - cpu_before[slot] for slot, pid in procs.items()}
        rss = {slot: round(proc_peak_rss_mb(pid), 1) for slot, pid in procs.items()}
        figures = db_figures(db, delivery_t0)
        idle = _idle_cost(procs, db, seconds=5.0)
        result = {
            "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0],
                        "fsync_ms": fsync_latency_ms(work)},
            "options": {f: str(getattr(opts, f)) for f in opts.__slots__},
            "ingest": ingest, "delivery": figures, "busy_s": round(busy_s, 2),
            "cpu_s_per_1000_deliveries": {
                slot: round(cpu * 1000 / max(1, figures["delivered"]), 3)
                for slot, cpu in cpu_busy.items()},
            "peak_rss_mb": rss, "idle": idle,
            "db_bytes": db.stat().st_size,
            "wal_bytes": Path(f"{db}-wal").stat().st_size if Path(f"{db}-wal").exists() else 0,
        }
    finally:
        for proc in (service, receiver):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    (opts.out_dir / "bench.json").write_text(json.dumps(result, indent=2))
    return result


def _idle_cost(procs: dict[str, int], db: Path, seconds: float) -> dict[str, Any]:
    """CPU share of the whole service and database writes while nothing is to be done."""
    service = {slot: pid for slot, pid in procs.items() if slot != "receiver"}
    before = sum(proc_cpu_s(pid) for pid in service.values())
    wal = Path(f"{db}-wal")
    stamps = (db.stat().st_mtime_ns, wal.stat().st_mtime_ns if wal.exists() else 0)
    time.sleep(seconds)
    used = sum(proc_cpu_s(pid) for pid in service.values()) - before
    after = (db.stat().st_mtime_ns, wal.stat().st_mtime_ns if wal.exists() else 0)
    return {"cpu_percent_of_one_core": round(100 * used / seconds, 2),
            "database_written": after != stamps}


def print_report(result: dict[str, Any]) -> None:
    """A short human summary of `result`."""
    ing, dlv = result["ingest"], result["delivery"]
    mode = "steady rate, delivering" if result["options"]["rate_per_s"] != "None" else \
        "destinations paused"
    print(f"ingest ({mode}, load by {ing.get('tool', 'python')}): "
          f"{ing['events_per_s']} events/s accepted, latency ms "
          f"{ing['latency_ms']}, accepted {ing['accepted']}, cpu s {ing['cpu_s']}")
    print(f"delivery: {dlv['deliveries_per_s']} deliveries/s, {dlv['delivered']} delivered, "
          f"accept->delivered ms {dlv['latency_ms']}")
    print(f"cpu s per 1000 deliveries: {result['cpu_s_per_1000_deliveries']}")
    print(f"peak rss MiB: {result['peak_rss_mb']}")
    print(f"idle: {result['idle']}; db {result['db_bytes']} B, wal {result['wal_bytes']} B; "
          f"fsync ms {result['machine']['fsync_ms']}")

"""What this machine is like, for the benchmark's figures: a disk's fsync latency, and what
waking from a short sleep costs a process.

Both go into every bench.json and scenario result (`machine`), and README's table prints
them, since hookline's own figures move with them from one hour to the next: a commit waits
for the fsync, and at everyday rates each of hookline's processes sleeps between events
(docs/benchmarks.md, "What 10 ms asleep costs").
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SLEEP_S = 0.01
"""How long the cold probe sleeps before each read, seconds: about the time between two of
ingest's commits at 200 events/s (its `batch_interval_s`, 10 ms until 2026-12-05, when it
became 15 ms; the probe keeps 10 ms so that every run's figure compares with the others)."""


def machine_figures(folder: Path) -> dict[str, Any]:
    """The `machine` block of a bench result: cores, Python, the fsync latency of the disk
    holding `folder` and what a read costs after a sleep (probes run in `folder`; about 1.5
    s in all)."""
    return {"cores": os.cpu_count(), "python": sys.version.split()[0],
            "fsync_ms": fsync_latency_ms(folder), "cold_read_us": cold_read_us(folder)}


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


def cold_read_us(folder: Path, samples: int = 100) -> dict[str, float | int | None]:
    """The CPU one small SQLite read costs this thread (a one-row table in a file in
    `folder`), in microseconds, median of `samples`: back to back (`hot_us`) and each after
    SLEEP_S asleep (`after_sleep_us`, with `sleep_ms` and `samples`), and `ratio`, the second
    over the first (None if the first measured 0). Takes about `samples` x SLEEP_S seconds;
    the file is removed after.

    The work is the same each time; what differs is the caches it finds. On the 2-core
    virtual machine this project is measured on, 10 ms asleep made it 10 to 16 times dearer
    (docs/benchmarks.md, "What 10 ms asleep costs")."""
    path = folder / "cold.probe.db"
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE TABLE IF NOT EXISTS probe (x INTEGER)")
        db.execute("INSERT INTO probe VALUES (1)")
        db.commit()

        def read_us() -> float:
            started = time.thread_time_ns()
            db.execute("SELECT x FROM probe").fetchall()
            return (time.thread_time_ns() - started) / 1000

        for _ in range(20):  # the statement prepared and cached, the pages read once
            read_us()
        hot = statistics.median(read_us() for _ in range(samples))
        asleep = []
        for _ in range(samples):
            time.sleep(SLEEP_S)
            asleep.append(read_us())
        cold = statistics.median(asleep)
    finally:
        db.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return {"hot_us": round(hot, 1), "after_sleep_us": round(cold, 1),
            "ratio": round(cold / hot, 1) if hot > 0 else None,
            "sleep_ms": round(SLEEP_S * 1000, 3), "samples": samples}


def cold_read_text(machine: dict[str, Any]) -> str | None:
    """A result's `machine.cold_read_us` in words (None in a result from before it was
    measured): `a small SQLite read costs 8.1 µs of CPU back to back, 92.2 µs after 10 ms
    asleep (11.4x)`."""
    probe = machine.get("cold_read_us")
    if not isinstance(probe, dict):
        return None
    ratio = "" if probe.get("ratio") is None else f" ({probe['ratio']}x)"
    return (f"a small SQLite read costs {probe['hot_us']} µs of CPU back to back, "
            f"{probe['after_sleep_us']} µs after {probe['sleep_ms']:g} ms asleep{ratio}")

"""What hookline's store costs at an everyday rate against the least store a durable webhook
service needs, cycle for cycle (docs/benchmarks.md, "What 10 ms asleep costs").

Both run the same cycle in two processes, as ingest and a worker do: every `interval_s` the
ingest side commits `events` events of 1.5 KB, each with a job per destination, and wakes the
worker side, which records the previous cycle's jobs as delivered and leases the new ones in
one transaction. Nothing is sent: this is the storage alone, each process asleep between
cycles as at a steady rate.

* hookline: its own store (shared/store), ingest's on its database thread with
  `synchronous=FULL`, the worker's inline with NORMAL, as the service runs them.
* least: plain `sqlite3` recording only what a durable service must: each event
  (deduplicated by its id) and its jobs, committed FULL before an answer could go out; each
  job's lease (a token and a deadline, through a partial index of pending jobs, the bodies
  read) and its done mark, fenced by the token, NORMAL. No attempt history, counters,
  fan-out lookup, fairness or takeovers.

`python -m hookline.rehearsal.store_floor [--rate 200] [--seconds 4] [--rounds 2]` alternates
the two and prints each one's CPU per cycle and per event, and their ratio, as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from hookline.shared.logs import configure_logging

DESTINATIONS = 3
BODY = b'{"id": "x", "type": "bench.event", "data": {"pad": "' + b"x" * 1420 + b'"}}'
LEAST_SCHEMA = """
CREATE TABLE events (id INTEGER PRIMARY KEY, source_id TEXT UNIQUE, body BLOB, received_at REAL);
CREATE TABLE jobs (id INTEGER PRIMARY KEY, event_id INTEGER, destination INTEGER,
    status TEXT, lease_token TEXT, lease_until REAL, attempts INTEGER DEFAULT 0,
    finished_at REAL);
CREATE INDEX jobs_due ON jobs (id) WHERE status = 'pending';
"""


def cycle_cpu_us(store: str, folder: Path, *, cycles: int, interval_s: float,
                 events: int) -> dict[str, Any]:
    """Run `cycles` cycles of `store` (`hookline` or `least`) in a fresh database in
    `folder`; returns the CPU per cycle of the ingest side, of the worker side and of both,
    in microseconds, and the `database` file (left in `folder`).

    Raises:
        ValueError: an unknown `store`.
        RuntimeError: a side failed (its exit code).
    """
    if store not in ("hookline", "least"):
        raise ValueError(f"store must be hookline or least, not {store!r}")
    path = str(Path(tempfile.mkdtemp(dir=folder)) / "store.db")
    if store == "least":
        db = _least_connection(path, "FULL")
        db.executescript(LEAST_SCHEMA)
        db.close()
    else:
        asyncio.run(_hookline_setup(path))
    context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
    go_in, go_out = context.Pipe(duplex=False)
    done_in, done_out = context.Pipe(duplex=False)
    results = context.Queue()
    sides = [context.Process(target=_side, args=(side, store, path, cycles, interval_s,
                                                 events, pipes, results))
             for side, pipes in (("worker", (go_in, done_out)), ("ingest", (done_in, go_out)))]
    for process in sides:
        process.start()
    found = dict(results.get(timeout=60 + cycles * interval_s * 4) for _ in sides)
    for process in sides:
        process.join(timeout=30)
        if process.exitcode != 0:
            raise RuntimeError(f"the {store} store's side exited {process.exitcode}")
    per_cycle = {side: round(cpu_s / cycles * 1e6, 1) for side, cpu_s in found.items()}
    return {"ingest_us": per_cycle["ingest"], "worker_us": per_cycle["worker"],
            "both_us": round(per_cycle["ingest"] + per_cycle["worker"], 1), "database": path}


def _side(side: str, store: str, path: str, cycles: int, interval_s: float, events: int,
          pipes: tuple[Connection, Connection], results: Any) -> None:
    """One process: the ingest or the worker side of `store` (see the module doc); puts
    (side, its CPU seconds over the cycles) on `results`."""
    receive, send = pipes
    configure_logging(f"store-floor-{side}", "warning", stream=sys.stderr)  # stdout: figures
    if store == "least":
        cpu_s = (_least_ingest if side == "ingest" else _least_worker)(
            path, cycles, interval_s, events, receive, send)
    else:
        run = _hookline_ingest if side == "ingest" else _hookline_worker
        cpu_s = asyncio.run(run(path, cycles, interval_s, events, receive, send))
    results.put((side, cpu_s))


def _sleep_until(due: float) -> None:
    time.sleep(max(0.0, due - time.monotonic()))


def _least_connection(path: str, synchronous: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    return db


def _least_ingest(path: str, cycles: int, interval_s: float, events: int,
                  done: Connection, go: Connection) -> float:
    db = _least_connection(path, "FULL")
    started, cpu_started, count = time.monotonic(), time.process_time(), 0
    for cycle in range(cycles):
        _sleep_until(started + cycle * interval_s)
        db.execute("BEGIN IMMEDIATE")
        ids = []
        for _ in range(events):
            count += 1
            ids.append(db.execute(
                "INSERT INTO events (source_id, body, received_at) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING RETURNING id", (f"e{count}", BODY, time.time())
            ).fetchone()[0])
        db.executemany("INSERT INTO jobs (event_id, destination, status) VALUES (?, ?, 'pending')",
                       [(e, d) for e in ids for d in range(1, DESTINATIONS + 1)])
        db.execute("COMMIT")
        go.send_bytes(b"1")
        done.recv_bytes()
    return time.process_time() - cpu_started


def _least_worker(path: str, cycles: int, interval_s: float, events: int,
                  go: Connection, done: Connection) -> float:
    db = _least_connection(path, "NORMAL")
    held: list[tuple[int, str]] = []
    cpu_started = 0.0
    for cycle in range(cycles):
        go.recv_bytes()
        if cycle == 0:
            cpu_started = time.process_time()
        db.execute("BEGIN IMMEDIATE")
        db.executemany("UPDATE jobs SET status = 'done', finished_at = ? "
                       "WHERE id = ? AND lease_token = ?",
                       [(time.time(), job, token) for job, token in held])
        token = os.urandom(8).hex()
        claimed = db.execute(
            "UPDATE jobs SET status = 'leased', lease_token = ?, lease_until = ?, "
            "attempts = attempts + 1 WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' "
            "ORDER BY id LIMIT 64) RETURNING id, event_id", (token, time.time() + 30)).fetchall()
        event_ids = sorted({event for _, event in claimed})
        if event_ids:  # what sending needs: one statement for the batch
            db.execute("SELECT e.id, e.body FROM events e JOIN json_each(?) k ON e.id = k.value",
                       (json.dumps(event_ids),)).fetchall()
        db.execute("COMMIT")
        held = [(job, token) for job, _ in claimed]
        done.send_bytes(b"1")
    return time.process_time() - cpu_started


async def _hookline_setup(path: str) -> None:
    from hookline.shared.signing import generate_secret  # noqa: PLC0415  (hookline's side only)
    from hookline.shared.store.sqlite import SqliteStore  # noqa: PLC0415

    async with SqliteStore(path) as store:
        for n in range(1, DESTINATIONS + 1):
            await store.add_destination(name=f"d{n}", url="http://127.0.0.1:9/h",
                                        secret=generate_secret(), event_types=["bench.*"],
                                        max_in_flight=64)


async def _hookline_ingest(path: str, cycles: int, interval_s: float, events: int,
                           done: Connection, go: Connection) -> float:
    from hookline.shared.models import NewEvent  # noqa: PLC0415  (hookline's side only)
    from hookline.shared.store.sqlite import SqliteStore  # noqa: PLC0415

    loop = asyncio.get_running_loop()
    async with SqliteStore(path) as store:  # its database thread, FULL: ingest's
        started, cpu_started, count = time.monotonic(), time.process_time(), 0
        for cycle in range(cycles):
            await asyncio.sleep(max(0.0, started + cycle * interval_s - time.monotonic()))
            batch = []
            for _ in range(events):
                count += 1
                batch.append(NewEvent(source="api", source_event_id=f"e{count}",
                                      type="bench.event", body=BODY))
            await store.add_events(batch)
            go.send_bytes(b"1")
            await loop.run_in_executor(None, done.recv_bytes)
        return time.process_time() - cpu_started


async def _hookline_worker(path: str, cycles: int, interval_s: float, events: int,
                           go: Connection, done: Connection) -> float:
    from hookline.shared.models import AttemptResult, Claim, ClaimRequest, Done  # noqa: PLC0415
    from hookline.shared.store.sqlite import SqliteStore  # noqa: PLC0415

    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def on_go() -> None:
        go.recv_bytes()
        woken.set()

    loop.add_reader(go.fileno(), on_go)
    request = ClaimRequest(worker="store-floor", limit=64, lease_s=30.0, max_attempts=18)
    held: list[Claim] = []
    cpu_started = 0.0
    # Inline, NORMAL: the workers' store (workers/main.py).
    async with SqliteStore(path, inline=True, synchronous="NORMAL") as store:
        for cycle in range(cycles):
            await woken.wait()
            woken.clear()
            if cycle == 0:
                cpu_started = time.process_time()
            now = time.time()
            items = [(claim, Done(), AttemptResult(started_at=now, duration_s=0.001,
                                                   status_code=200)) for claim in held]
            _, held, _ = await store.finish_and_claim(items, None, request)
            done.send_bytes(b"1")
        loop.remove_reader(go.fileno())
        return time.process_time() - cpu_started


def compare(folder: Path, *, rate_per_s: float, seconds: float, rounds: int,
            interval_s: float = 0.01) -> dict[str, Any]:
    """Both stores, alternated for `rounds` rounds of `seconds` each at `rate_per_s` events/s
    (a cycle every `interval_s`, or every event when they come further apart): the median
    CPU per cycle and per event of each, and hookline's over the least's (by round)."""
    interval_s = max(interval_s, 1 / rate_per_s)
    events = max(1, round(rate_per_s * interval_s))
    cycles = max(1, round(seconds / interval_s))
    runs: dict[str, list[dict[str, Any]]] = {"least": [], "hookline": []}
    for _ in range(rounds):
        for store in runs:
            runs[store].append(cycle_cpu_us(store, folder, cycles=cycles,
                                            interval_s=interval_s, events=events))
    out: dict[str, Any] = {"rate_per_s": rate_per_s, "cycle_s": interval_s,
                           "events_per_cycle": events, "cycles": cycles, "rounds": runs}
    for store, found in runs.items():
        both = statistics.median(run["both_us"] for run in found)
        out[store] = {"cpu_us_per_cycle": round(both, 1),
                      "cpu_us_per_event": round(both / events, 1),
                      "cores": round(both / 1e6 / interval_s, 3)}
    out["hookline_over_least"] = [round(h["both_us"] / least["both_us"], 2)
                                  for h, least in zip(runs["hookline"], runs["least"],
                                                      strict=True)]
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI: --rate R (events/s, default 200) --seconds S (per run, default 4) --rounds N
    (default 2); prints :func:`compare`'s figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.store_floor")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not (args.rate > 0 and args.seconds > 0 and args.rounds >= 1):
        parser.error("--rate and --seconds must be above 0, --rounds at least 1")
    configure_logging("store-floor", "warning", stream=sys.stderr)  # stdout: the figures
    with tempfile.TemporaryDirectory(prefix="hookline-store-floor-") as folder:
        print(json.dumps(compare(Path(folder), rate_per_s=args.rate, seconds=args.seconds,
                                 rounds=args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

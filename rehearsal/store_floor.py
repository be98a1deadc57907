"""What hookline's store costs at an everyday rate against the least store a durable webhook
service needs, cycle for cycle (docs/benchmarks.md, "What 10 ms asleep costs").

Both run the same cycles in two processes, as ingest and a worker do: every cycle the ingest
side commits the cycle's events of 1.5 KB, each with a job per destination, and wakes the
worker side through a pipe (the harness's, not hookline's wake-up sockets); the worker side
records the previous cycle's jobs as delivered and leases the new ones in one transaction, as
a worker whose results ride with its next claim does (RESULT_LINGER_S). Nothing is sent: this
is the storage alone, each process asleep between cycles as at a steady rate. Cycles are at
least `batch_interval_s` apart, as ingest's commits are (:func:`cycle_plan`).

* hookline: its own stores as the service opens them (`store_for`, the worker's inline with
  `worker_synchronous`), the claim asked as a worker asks it (workers/writer.py).
* least: plain `sqlite3` recording only what a durable service must: each event
  (deduplicated by source and id) and its jobs, committed FULL before an answer could go out,
  as the least durable ingest does (rehearsal/ingest_floor.py: its schema and its commit);
  each job's lease (a token and a deadline, taken in due order through the partial index of
  pending jobs, the bodies read) and its done mark, fenced by the token, NORMAL. No attempt
  history, counters, fan-out lookup, fairness, takeovers, retry scheduling or recovery of an
  expired lease.

`python -m hookline.rehearsal.store_floor [--rate 200] [--seconds 4] [--rounds 2]` alternates
the two and prints each one's CPU per cycle and per event, and their ratio, as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import queue
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from hookline.rehearsal import ingest_floor
from hookline.rehearsal.bench import setup_destinations
from hookline.rehearsal.everyday_floor import ratio
from hookline.shared.config import Config
from hookline.shared.logs import configure_logging
from hookline.shared.signing import generate_secret

DESTINATIONS = 3
BODY = b'{"id": "x", "type": "bench.event", "data": {"pad": "' + b"x" * 1420 + b'"}}'
STORES = ("least", "hookline")
MIN_RATE_PER_S = 20.0
"""Below it cycles are more than RESULT_LINGER_S (50 ms) apart: a worker then writes its
results alone before its next claim, two transactions a cycle, which this does not model."""
MAX_RATE_PER_S = 2_000.0
"""Above it a cycle's jobs pass one claim's `claim_batch` (64): a backlog builds and a cycle
is no longer its events' work."""
START_TIMEOUT_S = 60.0
"""How long a side may take to open its store and say so, seconds."""
LEASE_COLUMNS = """
ALTER TABLE jobs ADD COLUMN lease_token TEXT;
ALTER TABLE jobs ADD COLUMN lease_until REAL;
ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN finished_at REAL;
"""
"""What the least store adds to the least durable ingest's tables (ingest_floor.SCHEMA): a
job's lease, its attempts and when it was done."""


def cycle_plan(rate_per_s: float, spacing_s: float) -> tuple[float, int]:
    """(seconds between cycles, events per cycle) for `rate_per_s` events/s with commits at
    least `spacing_s` apart: the fewest events per cycle that keep cycles that far apart,
    and the interval that makes the rate exact (250 events/s, 10 ms: 3 events every 12 ms).

    Raises:
        ValueError: a rate not above 0.
    """
    if not rate_per_s > 0:
        raise ValueError(f"the rate must be above 0, not {rate_per_s}")
    events = max(1, math.ceil(rate_per_s * spacing_s - 1e-9))
    return events / rate_per_s, events


def cycle_cpu_us(kind: str, folder: Path, *, cycles: int, interval_s: float,
                 events_per_cycle: int) -> dict[str, Any]:
    """Run `cycles` cycles of the `kind` store (`hookline` or `least`) in a fresh database
    in `folder`: the CPU per cycle of the ingest side, of the worker side and of both, in
    microseconds, the cycles the ingest side started late (more than half an interval; the
    next ones are spaced from then), and the `database` file (left in `folder`).

    Raises:
        ValueError: an unknown `kind`.
        RuntimeError: a side failed or did not finish in time (both are stopped).
    """
    if kind not in STORES:
        raise ValueError(f"the store must be one of {', '.join(STORES)}, not {kind!r}")
    path = str(Path(tempfile.mkdtemp(dir=folder)) / "store.db")
    if kind == "least":
        with contextlib.closing(_least_connection(path, "FULL")) as db:
            db.executescript(ingest_floor.SCHEMA + LEASE_COLUMNS)
    else:  # d1, d2, d3 on a port nothing listens to: nothing is sent
        asyncio.run(setup_destinations(path, 9, [generate_secret() for _ in range(DESTINATIONS)],
                                       paused=False))
    context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
    go_reader, go_writer = context.Pipe(duplex=False)
    done_reader, done_writer = context.Pipe(duplex=False)
    results: Any = context.Queue()
    plan = (kind, path, cycles, interval_s, events_per_cycle)
    sides = [context.Process(target=_side, args=("worker", *plan, (go_reader, done_writer),
                                                 results), daemon=True),
             context.Process(target=_side, args=("ingest", *plan, (done_reader, go_writer),
                                                 results), daemon=True)]
    try:
        for process in sides:
            process.start()
        for end in (go_reader, go_writer, done_reader, done_writer):
            end.close()  # a side that dies ends the other's wait (EOF), not a hang
        found = _collect(results, sides, START_TIMEOUT_S + cycles * interval_s * 4)
    finally:
        for process in sides:
            if process.is_alive():
                process.terminate()
            process.join(5)
            if process.is_alive():
                process.kill()
    per_cycle = {side: round(cpu_s / cycles * 1e6, 1) for side, (cpu_s, _) in found.items()}
    return {"ingest_us": per_cycle["ingest"], "worker_us": per_cycle["worker"],
            "both_us": round(per_cycle["ingest"] + per_cycle["worker"], 1),
            "late_cycles": found["ingest"][1], "database": path}


def _collect(results: Any, sides: list[Any], timeout_s: float) -> dict[str, tuple[float, int]]:
    """Each side's (CPU seconds, late cycles) from `results`; RuntimeError as soon as a side
    exits without them, or after `timeout_s`."""
    found: dict[str, tuple[float, int]] = {}
    deadline = time.monotonic() + timeout_s
    while len(found) < len(sides):
        try:
            side, cpu_s, late = results.get(timeout=0.2)
            found[side] = (cpu_s, late)
        except queue.Empty:
            failed = [p.exitcode for p in sides if p.exitcode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                raise RuntimeError(f"a side of the store floor failed (exit codes {failed}) "
                                   f"or did not finish in {timeout_s:.0f} s") from None
    return found


def _side(side: str, kind: str, path: str, cycles: int, interval_s: float,
          events_per_cycle: int, pipes: tuple[Connection, Connection], results: Any) -> None:
    """One process: the ingest or the worker side of the `kind` store (module doc); puts
    (side, its CPU seconds over the cycles, cycles started late) on `results`."""
    receive, send = pipes
    configure_logging(f"store-floor-{side}", "warning", stream=sys.stderr)  # stdout: figures
    if kind == "least" and side == "ingest":
        found = _least_ingest(path, cycles, interval_s, events_per_cycle, receive, send)
    elif kind == "least":
        found = _least_worker(path, cycles, receive, send), 0  # only ingest keeps time
    elif side == "ingest":
        found = asyncio.run(_hookline_ingest(path, cycles, interval_s, events_per_cycle,
                                             receive, send))
    else:
        found = asyncio.run(_hookline_worker(path, cycles, receive, send)), 0
    results.put((side, *found))


class _Schedule:
    """Cycle start times `interval_s` apart from the first; a cycle that starts late (the
    machine stalled) moves the next ones, counted in `late`, rather than running back to
    back to catch up."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.late = 0
        self._due = time.monotonic()

    def wait_s(self) -> float:
        """Seconds to sleep before the next cycle (0 when it is due or late)."""
        now = time.monotonic()
        if now - self._due > self.interval_s / 2:
            self.late += 1
        start = max(self._due, now)
        self._due = start + self.interval_s
        return start - now


def _least_connection(path: str, synchronous: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    return db


def _least_ingest(path: str, cycles: int, interval_s: float, events_per_cycle: int,
                  done: Connection, go: Connection) -> tuple[float, int]:
    store = ingest_floor.FloorStore(path, DESTINATIONS, "FULL")
    done.recv_bytes()  # the worker side is ready
    schedule, count = _Schedule(interval_s), 0
    cpu_started = time.process_time()
    for _ in range(cycles):
        time.sleep(schedule.wait_s())
        events = []
        for _ in range(events_per_cycle):
            count += 1
            events.append(ingest_floor.Event(f"e{count}", "bench.event", BODY))
        store.write(events)
        go.send_bytes(b"1")
        done.recv_bytes()
    return time.process_time() - cpu_started, schedule.late


def _least_worker(path: str, cycles: int, go: Connection, done: Connection) -> float:
    config = Config()
    db = _least_connection(path, "NORMAL")
    done.send_bytes(b"ready")
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
        now = time.time()
        claimed = db.execute(
            "UPDATE jobs SET status = 'leased', lease_token = ?, lease_until = ?, "
            "attempts = attempts + 1 WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' "
            "AND due_at <= ? ORDER BY due_at LIMIT ?) RETURNING id, event_id",
            (token, now + config.lease_s, now, config.claim_batch)).fetchall()
        event_ids = sorted({event for _, event in claimed})
        if event_ids:  # what sending needs: one statement for the batch
            db.execute("SELECT e.id, e.body FROM events e JOIN json_each(?) k ON e.id = k.value",
                       (json.dumps(event_ids),)).fetchall()
        db.execute("COMMIT")
        held = [(job, token) for job, _ in claimed]
        done.send_bytes(b"1")
    return time.process_time() - cpu_started


async def _readable(connection: Connection) -> bytes:
    """The next message on `connection`, awaited on the event loop (no thread).

    Raises:
        EOFError: the other side is gone."""
    loop = asyncio.get_running_loop()
    arrived: asyncio.Future[bytes] = loop.create_future()

    def on_readable() -> None:
        loop.remove_reader(connection.fileno())
        try:
            arrived.set_result(connection.recv_bytes())
        except EOFError as exc:
            arrived.set_exception(exc)

    loop.add_reader(connection.fileno(), on_readable)
    return await arrived


async def _hookline_ingest(path: str, cycles: int, interval_s: float, events_per_cycle: int,
                           done: Connection, go: Connection) -> tuple[float, int]:
    from hookline.shared.models import NewEvent  # noqa: PLC0415  (hookline's side only)
    from hookline.shared.store import store_for  # noqa: PLC0415

    store = store_for(Config(db=path))  # ingest's: its database thread, `synchronous`
    await store.open()
    try:
        await _readable(done)  # the worker side is ready
        schedule, count = _Schedule(interval_s), 0
        cpu_started = time.process_time()
        for _ in range(cycles):
            await asyncio.sleep(schedule.wait_s())
            batch = []
            for _ in range(events_per_cycle):
                count += 1
                batch.append(NewEvent(source="api", source_event_id=f"e{count}",
                                      type="bench.event", body=BODY))
            await store.add_events(batch)
            go.send_bytes(b"1")
            await _readable(done)
        return time.process_time() - cpu_started, schedule.late
    finally:
        await store.close()


async def _hookline_worker(path: str, cycles: int, go: Connection, done: Connection) -> float:
    from hookline.shared.models import AttemptResult, Claim, ClaimRequest, Done  # noqa: PLC0415
    from hookline.shared.policy.delivery import (  # noqa: PLC0415
        destination_slots,
        late_slots,
        tenant_slots,
    )
    from hookline.shared.store import store_for  # noqa: PLC0415

    config = Config(db=path)
    store = store_for(config, worker=True)  # inline, `worker_synchronous`: a worker's
    await store.open()
    try:
        done.send_bytes(b"ready")
        held: list[Claim] = []
        cpu_started = 0.0
        for cycle in range(cycles):
            await _readable(go)
            if cycle == 0:
                cpu_started = time.process_time()
            now = time.time()
            # As a 2xx from the rehearsal receivers reads (workers/sender.py keeps both).
            items = [(claim, Done(), AttemptResult(
                started_at=now, duration_s=0.001, status_code=200, response_excerpt="ok",
                response_headers="Content-Type: text/plain; charset=utf-8\nContent-Length: 2"))
                for claim in held]
            request = ClaimRequest(  # as workers/writer.py asks, its slots all free
                worker="store-floor", limit=config.claim_batch, lease_s=config.lease_s,
                max_attempts=config.max_attempts, late_after=config.late_retry_after_attempts,
                max_late=late_slots(config.worker_concurrency, config.late_retry_share),
                per_destination=destination_slots(config.worker_concurrency,
                                                  config.destination_slot_share),
                held=Counter(), may_take_over=True,
                per_tenant=tenant_slots(config.worker_concurrency, config.tenant_slot_share),
                held_tenants=Counter())
            _, held, _ = await store.finish_and_claim(items, None, request)
            done.send_bytes(b"1")
        return time.process_time() - cpu_started
    finally:
        await store.close()


def compare(folder: Path, *, rate_per_s: float, seconds: float, rounds: int) -> dict[str, Any]:
    """Both stores, alternated for `rounds` rounds of `seconds` each at `rate_per_s` events/s
    (:func:`cycle_plan` with the default `batch_interval_s`; the order swapped each round):
    each run's figures, each store's median CPU per cycle and per event (µs) and in cores,
    and hookline's over the least's, round by round."""
    interval_s, events = cycle_plan(rate_per_s, Config().batch_interval_s)
    cycles = max(1, round(seconds / interval_s))
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in STORES}
    for round_ in range(rounds):
        for kind in STORES if round_ % 2 == 0 else reversed(STORES):
            runs[kind].append(cycle_cpu_us(kind, folder, cycles=cycles, interval_s=interval_s,
                                           events_per_cycle=events))
    out: dict[str, Any] = {"rate_per_s": rate_per_s, "cycle_s": round(interval_s, 6),
                           "events_per_cycle": events, "cycles": cycles, "rounds": runs}
    for kind, found in runs.items():
        both = statistics.median(run["both_us"] for run in found)
        out[kind] = {"cpu_us_per_cycle": round(both, 1),
                     "cpu_us_per_event": round(both / events, 1),
                     "cores": round(both / 1e6 / interval_s, 3)}
    out["hookline_over_least"] = [ratio(ours["both_us"], least["both_us"])
                                  for ours, least in zip(runs["hookline"], runs["least"],
                                                         strict=True)]
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI (see the module doc); prints :func:`compare`'s figures as one JSON line, without
    the runs' database files (removed with their temporary folder)."""
    parser = argparse.ArgumentParser(
        prog="python -m hookline.rehearsal.store_floor",
        description="hookline's store against the least store a durable webhook service "
                    "needs, cycle for cycle at a steady rate (CPU per cycle and per event)")
    parser.add_argument("--rate", type=float, default=200.0,
                        help=f"events/s, {MIN_RATE_PER_S:g} to {MAX_RATE_PER_S:g} "
                             "(default 200)")
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="seconds of each store's run (default 4)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each store, alternated (default 2)")
    args = parser.parse_args(argv)
    if not MIN_RATE_PER_S <= args.rate <= MAX_RATE_PER_S:
        parser.error(f"--rate must be from {MIN_RATE_PER_S:g} to {MAX_RATE_PER_S:g} events/s "
                     "(module doc: what this does not model outside it)")
    if not (math.isfinite(args.seconds) and args.seconds > 0 and args.rounds >= 1):
        parser.error("--seconds must be above 0 and --rounds at least 1")
    configure_logging("store-floor", "warning", stream=sys.stderr)  # stdout: the figures
    with tempfile.TemporaryDirectory(prefix="hookline-store-floor-") as folder:
        figures = compare(Path(folder), rate_per_s=args.rate, seconds=args.seconds,
                          rounds=args.rounds)
    for runs in figures["rounds"].values():
        for run in runs:
            del run["database"]
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

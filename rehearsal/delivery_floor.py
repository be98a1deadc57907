"""A lean durable delivery: the delivery side of the least durable service the everyday
scenario measures beside the least durable ingest (rehearsal/ingest_floor.py).

`hookline bench --scenario everyday` bounds target 1 of issue #33 from below with the bare
HTTP (rehearsal/everyday_floor.py), then adds hookline's own bookkeeping at its flat-out
cost per item (rehearsal/everyday_reach.py). This process, run beside ingest_floor's `whole`
role on one SQLite file, measures that bookkeeping done leanly instead: the two together
are a whole webhook service that delivers every stored event at least once, and does
nothing else.

What a delivery must record is that it is done. With one delivery process the claim needs
no write: the process keeps a cursor (the last job id it read) and reads the jobs after it,
with their events' bodies, in id order (ingest commits them in that order); a restart would
start again after the last job marked delivered, so a job sent but not yet marked is sent
again (at least once; receivers dedupe by `webhook-id`). Several delivery processes would
need leases to share the jobs; hookline's workers take them, the floor does not.

Writes follow hookline's worker (workers/writer.py), so that the floor pays as many write
transactions as hookline does, no fewer and no more: each result waits up to
RESULT_LINGER_S (none without spacing) to share the write of the next claim (woken by a
datagram on its Unix socket from ingest_floor's `--wake`, one per commit that stored an
event), a claim that finds results waiting waits out the spacing to write them with it,
FILLED_ENOUGH of them are written at once, and writes start at least `--spacing-ms` apart
under a trickle (hookline's `batch_interval_s`). A claim with no result to write is a read
and waits for nothing. Each claimed job
is posted to `URL/dN` (its destination's number N, from 1), signed and with the headers a
worker sends, `--concurrency` at once.

No lease, no attempt rows, no retries, no metrics, no logs: the first delivery that fails
(not a 2xx, or no answer within a worker's `attempt_timeout_s`) stops the process with exit
status 1, its error on stderr, so a rehearsal stops at a failure rather than hide it.

CLI: `python -m hookline.rehearsal.delivery_floor --db PATH --wake PATH --url
http://127.0.0.1:PORT --secret WHSEC ... [--concurrency C] [--spacing-ms MS]` (one
`--secret` per destination, in order: d1, d2, ...). It prints `{"ready": true}` once it
listens, and on SIGTERM or SIGINT (or its first failure) `{"delivered", "failed", "writes",
"reads", "error"}` before it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import sys
from dataclasses import dataclass, field

import aiohttp

from hookline.shared.config import Config
from hookline.shared.process.child import event_loop_runner
from hookline.shared.spacing import FILLED_ENOUGH, wait_out_spacing
from hookline.workers.sender import plain_outgoing_headers, sign_request
from hookline.workers.writer import RESULT_LINGER_S


@dataclass(frozen=True, slots=True)
class FloorJob:
    """One claimed job: its row id, destination number (from 0) and event."""

    job_id: int
    destination: int
    event_type: str
    body: bytes


@dataclass(slots=True)
class Counts:
    """What the deliverer did, for its last line."""

    delivered: int = 0
    failed: int = 0
    writes: int = 0
    reads: int = 0
    error: str | None = None


class DeliveryFailed(Exception):
    """A delivery got no 2xx: the floor stops (module docstring)."""


@dataclass(slots=True)
class FloorDeliverer:
    """Claims, sends and marks jobs of one SQLite file (module docstring).

    Args:
        conn: the file's connection, WAL (ingest_floor made the tables).
        url: the receiver's base URL; destination N is posted to `url/d{N + 1}`.
        secrets: each destination's `whsec_` secret, destination 0 first.
        concurrency: most requests in flight.
        spacing_s: least seconds between two writes' starts under a trickle.
    """

    conn: sqlite3.Connection
    url: str
    secrets: list[str]
    concurrency: int = 64
    spacing_s: float = 0.0
    counts: Counts = field(default_factory=Counts)
    _cursor: int = field(default=0, init=False)
    _jobs_may_be_due: bool = field(default=True, init=False)
    _ended: list[int] = field(default_factory=list, init=False)
    _oldest_ended_at: float = field(default=0.0, init=False)
    _in_flight: int = field(default=0, init=False)
    _last_write_at: float = field(default=float("-inf"), init=False)
    _failure: BaseException | None = field(default=None, init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def __post_init__(self) -> None:
        # After the last job marked delivered: what a restart would send again.
        self._cursor = int(self.conn.execute(
            "SELECT coalesce((SELECT min(id) FROM jobs WHERE status = 'pending') - 1, "
            "(SELECT max(id) FROM jobs), 0)").fetchone()[0])

    def jobs_committed(self) -> None:
        """New jobs may be due: claim at the next turn."""
        self._jobs_may_be_due = True
        self._wake.set()

    async def run(self, session: aiohttp.ClientSession) -> None:
        """Claim, send and mark, forever; each claimed job is sent on a task of its own.

        Raises:
            DeliveryFailed: a delivery got no 2xx.
            sqlite3.Error: a transaction failed (rolled back).
        """
        loop = asyncio.get_running_loop()
        sends: set[asyncio.Task[None]] = set()
        while True:
            await self._next_turn(loop)
            if self._ended:
                # As a worker's writer: results and a claim share one write, once the
                # spacing since the last write has passed (or FILLED_ENOUGH results wait).
                await wait_out_spacing(
                    self._wake, lambda: self._last_write_at + self.spacing_s - loop.time(),
                    lambda: len(self._ended) >= FILLED_ENOUGH or self._failure is not None)
            free = self.concurrency - self._in_flight
            claim = self._jobs_may_be_due and free > 0
            if claim:
                self._jobs_may_be_due = False  # a datagram from now on sets it again
            marks, self._ended = self._ended, []
            if marks:
                self._last_write_at = loop.time()
            jobs = self.mark_and_claim(marks, free if claim else 0)
            if claim and len(jobs) == free:
                self._jobs_may_be_due = True  # a full claim: more may be waiting
            for job in jobs:
                self._in_flight += 1
                task = asyncio.create_task(self._send(session, job))
                sends.add(task)
                task.add_done_callback(sends.discard)

    async def _next_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """Return when jobs may be due and a slot is free, or when results must be written:
        FILLED_ENOUGH of them, or the oldest has waited RESULT_LINGER_S (and the spacing
        since the last write has passed). Raises the first failed delivery."""
        while True:
            self._wake.clear()
            if self._failure is not None:
                raise self._failure
            if self._jobs_may_be_due and self._in_flight < self.concurrency:
                return
            timeout_s = None
            if self._ended:
                linger_s = RESULT_LINGER_S if self.spacing_s else 0.0  # as writer.py's
                due_at = max(self._oldest_ended_at + linger_s,
                             self._last_write_at + self.spacing_s)
                if len(self._ended) >= FILLED_ENOUGH or loop.time() >= due_at:
                    return
                timeout_s = due_at - loop.time()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout_s)

    def mark_and_claim(self, delivered: list[int], limit: int) -> list[FloorJob]:
        """Mark `delivered` job ids delivered (one write transaction, when there are any),
        then read up to `limit` jobs after the cursor with their events. Raises
        sqlite3.Error (a write rolled back)."""
        conn = self.conn
        if delivered:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("UPDATE jobs SET status = 'delivered' WHERE id IN "
                             "(SELECT value FROM json_each(?))", (json.dumps(delivered),))
                jobs = self._read(limit)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a failed COMMIT may have ended it already
                    conn.execute("ROLLBACK")
                raise
            self.counts.writes += 1
            return jobs
        return self._read(limit)

    def _read(self, limit: int) -> list[FloorJob]:
        if limit <= 0:
            return []
        rows = self.conn.execute(
            "SELECT jobs.id, jobs.destination, events.type, events.body FROM jobs "
            "JOIN events ON events.id = jobs.event_id WHERE jobs.id > ? "
            "ORDER BY jobs.id LIMIT ?", (self._cursor, limit)).fetchall()
        self.counts.reads += 1
        if rows:
            self._cursor = rows[-1][0]
        return [FloorJob(*row) for row in rows]

    async def _send(self, session: aiohttp.ClientSession, job: FloorJob) -> None:
        try:
            # The headers a worker sends (workers/sender.py), signed as it signs.
            headers = sign_request(plain_outgoing_headers(job.event_type),
                                   f"msg_floor_{job.job_id}", job.body,
                                   (self.secrets[job.destination],))
            async with session.post(f"{self.url}/d{job.destination + 1}", data=job.body,
                                    headers=headers) as answer:
                await answer.read()
                if answer.status >= 300:
                    raise DeliveryFailed(f"job {job.job_id}: HTTP {answer.status}")
        except Exception as exc:  # noqa: BLE001  (any failure stops the floor: run raises it)
            self.counts.failed += 1
            self._failure = self._failure or exc
        else:
            self.counts.delivered += 1
            if not self._ended:
                self._oldest_ended_at = asyncio.get_running_loop().time()
            self._ended.append(job.job_id)
        finally:
            self._in_flight -= 1
            self._wake.set()


async def serve(db: str, wake_path: str, url: str, secrets: list[str], concurrency: int,
                spacing_s: float, stop: asyncio.Event | None = None) -> Counts:
    """Listen on `wake_path` and deliver until `stop` is set (None: until SIGTERM or SIGINT),
    or until the first failed delivery or write (its repr in the counts' `error`); returns
    what was done."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    waker = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
    counts = Counts()
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # as hookline's workers commit
        deliverer = FloorDeliverer(conn, url, secrets, concurrency, spacing_s, counts)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(wake_path)
        waker.bind(wake_path)
        waker.setblocking(False)

        def drain_wake_ups() -> None:
            with contextlib.suppress(BlockingIOError):
                while waker.recv(64):
                    pass
            deliverer.jobs_committed()

        loop.add_reader(waker.fileno(), drain_wake_ups)
        connector = aiohttp.TCPConnector(limit=concurrency)
        timeout = aiohttp.ClientTimeout(total=Config().attempt_timeout_s)  # a worker's
        async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                         auto_decompress=False) as session:
            running = asyncio.create_task(deliverer.run(session))
            stopping = asyncio.create_task(stop.wait())
            print(json.dumps({"ready": True}), flush=True)
            await asyncio.wait((running, stopping), return_when=asyncio.FIRST_COMPLETED)
            for task in (running, stopping):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
    except Exception as exc:  # noqa: BLE001  (a failed delivery or write: reported, exit 1)
        counts.error = repr(exc)
    finally:
        loop.remove_reader(waker.fileno())
        waker.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(wake_path)
        conn.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    """CLI entry; see the module docstring. Exit status 1 after a failure."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.delivery_floor")
    parser.add_argument("--db", required=True)
    parser.add_argument("--wake", required=True, metavar="PATH")
    parser.add_argument("--url", required=True)
    parser.add_argument("--secret", action="append", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--spacing-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    counts: list[Counts] = []

    async def run() -> None:
        counts.append(await serve(args.db, args.wake, args.url, args.secret,
                                  args.concurrency, args.spacing_ms / 1000))

    event_loop_runner()(run())
    done = counts[0]
    if done.error:
        print(f"delivery_floor: stopped: {done.error}", file=sys.stderr, flush=True)
    print(json.dumps({"delivered": done.delivered, "failed": done.failed, "writes": done.writes,
                      "reads": done.reads, "error": done.error}), flush=True)
    return 1 if done.error or done.failed else 0


if __name__ == "__main__":
    sys.exit(main())

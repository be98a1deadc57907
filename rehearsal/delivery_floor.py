"""The least durable delivery: what any design that sends with aiohttp and keeps its jobs in
SQLite pays per delivery, beside the least durable ingest (rehearsal/ingest_floor.py).

`hookline bench --scenario everyday` bounds target 1 of issue #33 from below with the bare
HTTP (rehearsal/everyday_floor.py), then adds hookline's own bookkeeping at its flat-out
cost per item (rehearsal/everyday_reach.py). This process, run beside ingest_floor's `whole`
role on one SQLite file, measures the bookkeeping's least cost instead: the two together are
a whole durable webhook service, at least once, with nothing else.

Woken by a datagram on its Unix socket (ingest_floor's `--wake`, one per commit that stored
an event) or by a delivery that ended, it runs one transaction on its event loop (as a
hookline worker's SQLite store does): mark the deliveries that ended with a 2xx
`delivered`, then claim up to its free slots of `pending` jobs, each destination in turn
(the floor's one index: by destination and due time), and read their events' bodies. Then
it posts each claimed job to `URL/dN` (the destination's number N; as
rehearsal/bare_client.py and a worker sign and send), `--concurrency` at once. With
`--spacing-ms`, transactions start at least that far apart under a trickle, as a hookline
worker's (`batch_interval_s`; shared/spacing.py).

No lease, no attempt rows, no retries, no metrics, no logs: a delivery that fails is
counted and its job left `sending`, so a rehearsal stops at a failure rather than hide it.
A crash leaves the jobs it claimed `sending`: finding those again is a lease's work, which
the floor leaves out.

CLI: `python -m hookline.rehearsal.delivery_floor --db PATH --wake PATH --url
http://127.0.0.1:PORT --secret WHSEC ... [--concurrency C] [--spacing-ms MS]` (one
`--secret` per destination, in order: d1, d2, ...). It prints `{"ready": true}` once its
socket is bound, and on SIGTERM or SIGINT `{"delivered", "failed", "transactions"}` before
it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sqlite3
import sys
from dataclasses import dataclass, field

import aiohttp

from hookline.rehearsal.bare_server import stop_signal
from hookline.shared.models import Claim
from hookline.shared.process.child import event_loop_runner
from hookline.shared.signing import signed_headers
from hookline.shared.spacing import FILLED_ENOUGH, wait_out_spacing
from hookline.workers.sender import FIXED_HEADERS, outgoing_headers


@dataclass(frozen=True, slots=True)
class FloorJob:
    """One claimed job: its row id, destination number and event."""

    job_id: int
    destination: int
    event_type: str
    body: bytes


@dataclass(slots=True)
class Counts:
    """What the deliverer did, for its last line."""

    delivered: int = 0
    failed: int = 0
    transactions: int = 0


@dataclass(slots=True)
class FloorDeliverer:
    """Claims, sends and finishes jobs of one SQLite file (module docstring).

    Args:
        conn: the file's connection, WAL (ingest_floor made the tables).
        url: the receiver's base URL; destination N is posted to `url/dN`.
        secrets: each destination's `whsec_` secret, destination 0 first.
        concurrency: most requests in flight.
        spacing_s: least seconds between two transactions' starts under a trickle.
    """

    conn: sqlite3.Connection
    url: str
    secrets: list[str]
    concurrency: int = 64
    spacing_s: float = 0.0
    counts: Counts = field(default_factory=Counts)
    _ended: list[int] = field(default_factory=list)
    _in_flight: int = 0
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _filled: asyncio.Event = field(default_factory=asyncio.Event)
    _last_start: float = 0.0

    def wake(self) -> None:
        """Ask for a transaction (new jobs may be due)."""
        self._wake.set()

    async def run(self, session: aiohttp.ClientSession) -> None:
        """Run transactions as woken, forever; each claimed job is sent on a task of its own.

        Raises:
            sqlite3.Error: a transaction failed (rolled back; the rehearsal stops).
        """
        loop = asyncio.get_running_loop()
        sends: set[asyncio.Task[None]] = set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.spacing_s:
                await wait_out_spacing(
                    self._filled, lambda: self._last_start + self.spacing_s - loop.time(),
                    lambda: len(self._ended) >= FILLED_ENOUGH)
                self._last_start = loop.time()
            ended, self._ended = self._ended, []
            self._filled.clear()
            free = self.concurrency - self._in_flight
            jobs = self.finish_and_claim(ended, free)
            for job in jobs:
                self._in_flight += 1
                task = asyncio.create_task(self._send(session, job))
                sends.add(task)
                task.add_done_callback(sends.discard)
            if free and len(jobs) == free:
                self._wake.set()  # there may be more due

    def finish_and_claim(self, delivered: list[int], limit: int) -> list[FloorJob]:
        """One transaction: `delivered` job ids marked delivered, then up to `limit` pending
        jobs claimed (`sending`), each destination in turn. Raises sqlite3.Error (rolled
        back)."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if delivered:
                conn.execute("UPDATE jobs SET status = 'delivered' WHERE id IN "
                             "(SELECT value FROM json_each(?))", (json.dumps(delivered),))
            claimed: list[tuple[int, int, int]] = []
            per_destination = max(1, limit // len(self.secrets)) if limit else 0
            for destination in range(len(self.secrets)):
                take = min(per_destination, limit - len(claimed))
                if take <= 0:
                    break
                claimed += conn.execute(
                    "UPDATE jobs SET status = 'sending' WHERE id IN (SELECT id FROM jobs "
                    "WHERE status = 'pending' AND destination = ? ORDER BY due_at LIMIT ?) "
                    "RETURNING id, destination, event_id", (destination, take)).fetchall()
            events = {}
            if claimed:
                ids = json.dumps(sorted({event_id for _, _, event_id in claimed}))
                events = {row[0]: (row[1], row[2]) for row in conn.execute(
                    "SELECT id, type, body FROM events WHERE id IN "
                    "(SELECT value FROM json_each(?))", (ids,))}
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.counts.transactions += 1
        return [FloorJob(job_id, destination, *events[event_id])
                for job_id, destination, event_id in claimed]

    async def _send(self, session: aiohttp.ClientSession, job: FloorJob) -> None:
        # The headers a worker sends (workers/sender.py), then its signature.
        headers = outgoing_headers(Claim(
            job_id=job.job_id, event_id=0, message_id="", event_type=job.event_type,
            destination_id=job.destination, destination_name="", url=self.url, secret="",
            body=job.body, attempt=1, lease_token="", lease_owner="", lease_until=0.0))
        headers.update(signed_headers(f"msg_floor_{job.job_id}", job.body,
                                      (self.secrets[job.destination],)))
        headers.update(FIXED_HEADERS)
        try:
            async with session.post(f"{self.url}/d{job.destination + 1}", data=job.body,
                                    headers=headers) as answer:
                await answer.read()
                ok = answer.status < 300
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        self._in_flight -= 1
        if ok:
            self.counts.delivered += 1
            self._ended.append(job.job_id)
            if len(self._ended) >= FILLED_ENOUGH:
                self._filled.set()
        else:
            self.counts.failed += 1
        self._wake.set()


async def serve(db: str, wake_path: str, url: str, secrets: list[str], concurrency: int,
                spacing_s: float) -> Counts:
    """Bind `wake_path`, deliver until SIGTERM or SIGINT; returns what was done.

    Raises:
        sqlite3.Error: a transaction failed.
    """
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # as hookline's workers commit
    deliverer = FloorDeliverer(conn, url, secrets, concurrency, spacing_s)
    waker = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(wake_path)
    waker.bind(wake_path)
    waker.setblocking(False)
    loop = asyncio.get_running_loop()

    def drain_wake_ups() -> None:
        with contextlib.suppress(BlockingIOError):
            while waker.recv(64):
                pass
        deliverer.wake()

    loop.add_reader(waker.fileno(), drain_wake_ups)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        running = asyncio.create_task(deliverer.run(session))
        print(json.dumps({"ready": True}), flush=True)
        stop = asyncio.create_task(stop_signal())
        await asyncio.wait((running, stop), return_when=asyncio.FIRST_COMPLETED)
        if running.done():
            running.result()  # its sqlite3.Error
        running.cancel()
    loop.remove_reader(waker.fileno())
    waker.close()
    conn.close()
    return deliverer.counts


def main(argv: list[str] | None = None) -> int:
    """CLI entry; see the module docstring."""
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
    print(json.dumps({"delivered": counts[0].delivered, "failed": counts[0].failed,
                      "transactions": counts[0].transactions}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

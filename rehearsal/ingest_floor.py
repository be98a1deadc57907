"""The least durable ingest: what any design that serves with aiohttp and commits to SQLite
pays per event, in one process or as HTTP processes feeding one writer process.

`hookline bench --scenario ingest` (rehearsal/scenario_ingest.py) measures hookline's ingest
against the bare aiohttp server (issue #33, target 3: at least 0.6 of it). This module is
the third figure beside those two: a server that does the least work per event a durable
ingest must do, on the same parts (aiohttp, SQLite). It is not the best possible pipeline
(its HTTP processes wait for the writer's commits, and the machine was not kept busy: see
docs/benchmarks.md, "Target 3 against the least durable ingest").

Per event it reads the body, parses the JSON, refuses one without a string `id` and `type`
(400), and commits the event (its body, deduplicated by (source, id)) with `--jobs` job rows
in one SQLite transaction (WAL, `synchronous=FULL` unless told otherwise) before it answers
202; requests that arrive while a commit runs go into the next one (a group commit). No
authentication, validation against a schema, fan-out, metrics or logging: hookline does all
of those.

`python -m hookline.rehearsal.ingest_floor ROLE ...`, each role printing one JSON line,
`{"ready": true}`, once it serves, and stopping on SIGTERM or SIGINT:

* `whole --db PATH --jobs N --listen HOST:PORT [--synchronous FULL|NORMAL] [--wake PATH]
  [--spacing-ms MS]`: one process; the commits run on a thread of their own (as ingest's
  do), so SQLite's C code can use another core. With `--wake`, each commit that stored an
  event sends a datagram to that Unix socket (the delivery floor's,
  rehearsal/delivery_floor.py); with `--spacing-ms`, commits start at least that far apart
  under a trickle, as hookline's do (`batch_interval_s`).
* `writer --db PATH --jobs N --socket PATH [--synchronous FULL|NORMAL]`: the one writer; it
  commits the batches HTTP processes send over the Unix socket, on its event loop (it does
  nothing else), every batch that arrived during a commit in the next one.
* `http --socket PATH --listen HOST:PORT`: serves as `whole` does, but sends each batch to
  the writer and answers once the writer answers. Several share one port (SO_REUSEPORT).

The socket carries, per batch, `!I` (events) then per event `!HHI` (the lengths of id, type
and body) and the three; the answer is `!I` (events) then one byte per event (1: stored,
0: a duplicate). A commit that fails closes the HTTP process's connection, and that process
answers 500 from then on: a rehearsal stops at a failure rather than hide it. The socket
lives in a private folder the scenario makes (a Unix socket's path has at most 107 bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sqlite3
import struct
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from aiohttp import web

from hookline.rehearsal.bare_server import stop_signal
from hookline.shared.process.child import event_loop_runner
from hookline.shared.spacing import FILLED_ENOUGH, wait_out_spacing

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, source TEXT NOT NULL, event_id TEXT NOT NULL,
    type TEXT NOT NULL, body BLOB NOT NULL, received_at REAL NOT NULL,
    UNIQUE (source, event_id));
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY, event_id INTEGER NOT NULL, destination INTEGER NOT NULL,
    status TEXT NOT NULL, due_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (destination, due_at) WHERE status = 'pending';
"""
"""The least a queue needs: events deduplicated by (source, id), and each pending job
findable by its destination in due order."""

_ACCEPTED = b'{"accepted":true}'
_BATCH = struct.Struct("!I")
_EVENT = struct.Struct("!HHI")


@dataclass(frozen=True, slots=True)
class Event:
    """One parsed event: its id and type (the sender's) and its raw body."""

    event_id: str
    event_type: str
    body: bytes


class FloorStore:
    """The SQLite file: one connection, used by one thread at a time."""

    def __init__(self, path: str, jobs_per_event: int, synchronous: str = "FULL") -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        self.jobs_per_event = jobs_per_event
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                     timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._conn.executescript(SCHEMA)

    def write(self, events: list[Event]) -> bytes:
        """Commit `events` and their jobs in one transaction; one byte per event: 1 stored,
        0 a duplicate of a stored one. Raises sqlite3.Error (the transaction rolled back)."""
        now = time.time()
        stored = bytearray()
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for event in events:
                row = conn.execute(
                    "INSERT INTO events (source, event_id, type, body, received_at) "
                    "VALUES ('api', ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
                    (event.event_id, event.event_type, event.body, now)).fetchone()
                if row is not None:
                    conn.executemany(
                        "INSERT INTO jobs (event_id, destination, status, due_at) "
                        "VALUES (?, ?, 'pending', ?)",
                        [(row[0], destination, now)
                         for destination in range(self.jobs_per_event)])
                stored.append(row is not None)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return bytes(stored)


class GroupCommit:
    """Queue events; one task writes everything queued by the time the last write ended.

    Not ingest/batcher.py's Batcher: its per-request deadline and failure bookkeeping are
    hookline's own work, which the floor leaves out.

    Args:
        write: commits a batch and returns one byte per event (awaitable).
        spacing_s: under a trickle, the least time between the starts of two writes,
            seconds, as hookline's `batch_interval_s` (shared/spacing.py: FILLED_ENOUGH
            events queued write at once); 0, the default, writes as soon as the last
            write ended.
    """

    def __init__(self, write: Callable[[list[Event]], asyncio.Future[bytes]],
                 spacing_s: float = 0.0) -> None:
        self._write = write
        self._spacing_s = spacing_s
        self._queue: list[tuple[list[Event], asyncio.Future[bytes]]] = []
        self._wakeup = asyncio.Event()
        self._filled = asyncio.Event()
        self._last_start = 0.0
        self._task = asyncio.create_task(self._run())

    async def submit(self, events: list[Event]) -> bytes:
        """Wait until `events` are committed; one byte each: 1 stored, 0 a duplicate.

        Raises:
            Exception: whatever the write raised for the batch (sqlite3.Error in a process
                that commits itself; asyncio.IncompleteReadError in an HTTP process whose
                writer closed the socket, which it does when a commit fails).
        """
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._queue.append((events, future))
        self._wakeup.set()
        if len(self._queue) >= FILLED_ENOUGH:
            self._filled.set()
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:  # as ingest/batcher.py: only a waiting batch waits out spacing
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            if self._spacing_s:
                await wait_out_spacing(
                    self._filled, lambda: self._last_start + self._spacing_s - loop.time(),
                    lambda: len(self._queue) >= FILLED_ENOUGH)
                self._last_start = loop.time()
            batch, self._queue = self._queue, []
            self._filled.clear()
            try:
                stored = await self._write([event for events, _ in batch for event in events])
            except Exception as exc:  # noqa: BLE001  (every waiter learns of any failure)
                for _, future in batch:
                    if not future.done():  # done: its request went away (cancelled)
                        future.set_exception(exc)
                continue
            start = 0
            for events, future in batch:
                if not future.done():
                    future.set_result(stored[start:start + len(events)])
                start += len(events)


def parse_event(body: bytes) -> Event | None:
    """The event of a request body, or None when it is no JSON object with a string `id`
    and `type`."""
    try:
        fields = json.loads(body)
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    event_id, event_type = fields.get("id"), fields.get("type")
    if not isinstance(event_id, str) or not isinstance(event_type, str):
        return None
    return Event(event_id, event_type, body)


def encode_batch(events: list[Event]) -> bytes:
    """A batch as the writer's socket carries it (module docstring)."""
    parts = [_BATCH.pack(len(events))]
    for event in events:
        event_id, event_type = event.event_id.encode(), event.event_type.encode()
        parts += [_EVENT.pack(len(event_id), len(event_type), len(event.body)), event_id,
                  event_type, event.body]
    return b"".join(parts)


async def read_batch(reader: asyncio.StreamReader) -> list[Event]:
    """One batch from the socket. Raises asyncio.IncompleteReadError at its end."""
    (count,) = _BATCH.unpack(await reader.readexactly(_BATCH.size))
    events = []
    for _ in range(count):
        id_len, type_len, body_len = _EVENT.unpack(await reader.readexactly(_EVENT.size))
        data = await reader.readexactly(id_len + type_len + body_len)
        events.append(Event(data[:id_len].decode(), data[id_len:id_len + type_len].decode(),
                            data[id_len + type_len:]))
    return events


def _app(commits: GroupCommit) -> web.Application:
    async def accept(request: web.Request) -> web.Response:
        event = parse_event(await request.read())
        if event is None:
            return web.json_response({"error": "a JSON object with a string id and type"},
                                     status=400)
        await commits.submit([event])
        return web.Response(body=_ACCEPTED, status=202, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/events", accept)
    return app


async def _serve_until_stopped(app: web.Application | None, listen: str | None,
                               server: asyncio.AbstractServer | None = None) -> None:
    runner = None
    if app is not None and listen is not None:
        host, _, port = listen.rpartition(":")
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, int(port), reuse_port=True).start()
    print(json.dumps({"ready": True}), flush=True)
    try:
        await stop_signal()
    finally:
        if runner is not None:
            await runner.cleanup()
        if server is not None:
            server.close()


async def serve_whole(db: str, jobs: int, listen: str, synchronous: str = "FULL", *,
                      wake: str | None = None, spacing_s: float = 0.0) -> None:
    """The `whole` role (module docstring)."""
    store = FloorStore(db, jobs, synchronous)
    thread = ThreadPoolExecutor(1, thread_name_prefix="floor-db")
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        write = store.write if wake is None else waking(store.write, sender, wake)
        commits = GroupCommit(lambda events: loop.run_in_executor(thread, write, events),
                              spacing_s)
        await _serve_until_stopped(_app(commits), listen)


def waking(write: Callable[[list[Event]], bytes], sock: socket.socket, wake_path: str
           ) -> Callable[[list[Event]], bytes]:
    """`write`, then one datagram from `sock` (a non-blocking Unix datagram socket) to
    `wake_path` when the commit stored an event: the delivery floor's wake-up
    (rehearsal/delivery_floor.py), as hookline's ingest wakes a worker per commit. A
    deliverer not listening (yet, or any more) is no error."""

    def write_and_wake(events: list[Event]) -> bytes:
        stored = write(events)
        if any(stored):
            with contextlib.suppress(OSError):  # full, refused or absent: it is awake
                sock.sendto(b"w", wake_path)
        return stored

    return write_and_wake


async def serve_writer(db: str, jobs: int, socket_path: str, synchronous: str = "FULL"
                       ) -> None:
    """The `writer` role (module docstring)."""
    store = FloorStore(db, jobs, synchronous)
    loop = asyncio.get_running_loop()

    def write_inline(events: list[Event]) -> asyncio.Future[bytes]:
        done: asyncio.Future[bytes] = loop.create_future()
        try:
            done.set_result(store.write(events))
        except sqlite3.Error as exc:
            done.set_exception(exc)
        return done

    commits = GroupCommit(write_inline)

    async def one_http_process(reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                events = await read_batch(reader)
                stored = await commits.submit(events)
                writer.write(_BATCH.pack(len(stored)) + stored)
        except asyncio.IncompleteReadError:
            pass  # the HTTP process went away
        except sqlite3.Error as exc:  # the HTTP process learns it by the closed socket
            print(f"ingest_floor writer: commit failed: {exc!r}", file=sys.stderr, flush=True)
        finally:
            writer.close()

    server = await asyncio.start_unix_server(one_http_process, socket_path)
    await _serve_until_stopped(None, None, server)


async def serve_http(socket_path: str, listen: str) -> None:
    """The `http` role (module docstring)."""
    reader, writer = await asyncio.open_unix_connection(socket_path)

    async def send(events: list[Event]) -> bytes:
        writer.write(encode_batch(events))
        (count,) = _BATCH.unpack(await reader.readexactly(_BATCH.size))
        return await reader.readexactly(count)

    commits = GroupCommit(lambda events: asyncio.ensure_future(send(events)))
    await _serve_until_stopped(_app(commits), listen)


def main(argv: list[str] | None = None) -> int:
    """CLI entry; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.ingest_floor")
    parser.add_argument("role", choices=["whole", "writer", "http"])
    parser.add_argument("--db")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--listen", metavar="HOST:PORT")
    parser.add_argument("--socket")
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    parser.add_argument("--wake", metavar="PATH",
                        help="whole: a datagram to this Unix socket after each commit")
    parser.add_argument("--spacing-ms", type=float, default=0.0,
                        help="whole: least ms between two commits' starts under a trickle")
    args = parser.parse_args(argv)
    needs = {"whole": ("db", "listen"), "writer": ("db", "socket"),
             "http": ("socket", "listen")}[args.role]
    missing = [f"--{name}" for name in needs if getattr(args, name) is None]
    if missing:
        parser.error(f"{args.role} needs {' and '.join(missing)}")
    run = event_loop_runner()
    if args.role == "whole":
        run(serve_whole(args.db, args.jobs, args.listen, args.synchronous, wake=args.wake,
                        spacing_s=args.spacing_ms / 1000))
    elif args.role == "writer":
        run(serve_writer(args.db, args.jobs, args.socket, args.synchronous))
    else:
        run(serve_http(args.socket, args.listen))
    return 0


if __name__ == "__main__":
    sys.exit(main())

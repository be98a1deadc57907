"""The link between an ingest process and the ingest writer process (`ingest_writer =
process`, SQLite only): how a batch and its answer are framed, and the HTTP side's end of
it (where the writer listens: hookline.shared.process.ingest_writer).

Each ingest process's group committer (ingest/group_commit.py) sends its batch of events
over a Unix stream socket in the runtime folder and waits for the writer's answer: one
result per event, after the COMMIT that holds them (ingest/writer_process.py), so a 2xx
still means durable. One batch is in flight per connection at a time.

A frame is a 4-byte big-endian length and a pickle of plain tuples (:func:`events_to_wire`,
:func:`results_to_wire`: pickling the dataclasses themselves cost about 2 µs more per event
on each side, as each object's fields are looked up again). Pickle is safe here only
because both ends check that the peer runs under this process's own user id (SO_PEERCRED):
the socket (mode 0600, in the runtime folder or a private folder:
hookline.shared.process.ingest_writer) carries nothing a stranger could send, and a socket
of another user is refused before a byte of it is read. An empty batch is a readiness
probe, answered between commits once the writer's own store has taken a write.

A batch whose connection breaks before its answer has an unknown outcome (the writer may
have committed it): :class:`WriterAway` is a StoreUnavailable, so ingest answers 503 with
Retry-After and the sender's retry with the same id is deduplicated.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hookline.shared.errors import StoreError, StoreUnavailable
from hookline.shared.models import Accepted, Duplicate, NewEvent, StoreResult, TenantRefused

_FRAME = struct.Struct("!I")
_MAX_FRAME_BYTES = 1 << 30
"""Largest frame, bytes: 512 events (the group committer's most) of bodies under 2 MiB fit."""


WireEvent = tuple[str, str, str, bytes, tuple[tuple[str, str], ...], str, str | None,
                  str | None]
"""A NewEvent on the wire: (source, source_event_id, type, body, forwarded_headers, tenant,
trace_context, schema_problem)."""


def events_to_wire(events: Sequence[NewEvent]) -> list[WireEvent]:
    """`events` as tuples for a frame (the module docstring says why)."""
    return [(e.source, e.source_event_id, e.type, e.body, e.forwarded_headers, e.tenant,
             e.trace_context, e.schema_problem) for e in events]


def events_from_wire(rows: object) -> list[NewEvent]:
    """The events of a frame's `rows`.

    Raises:
        ValueError: `rows` is no list of such 8-tuples (each field of its type).
    """
    if not isinstance(rows, list):
        raise ValueError(f"events as {type(rows).__name__}, not a list")
    events = []
    for row in rows:
        if not (type(row) is tuple and len(row) == 8):
            raise ValueError(f"an event as {type(row).__name__}, not an 8-tuple")
        source, event_id, event_type, body, headers, tenant, trace, problem = row
        if not (type(source) is str and type(event_id) is str and type(event_type) is str
                and type(body) is bytes and type(headers) is tuple and type(tenant) is str
                and (trace is None or type(trace) is str)
                and (problem is None or type(problem) is str)):
            raise ValueError("an event whose fields are not of their types")
        events.append(NewEvent(source=source, source_event_id=event_id, type=event_type,
                               body=body, forwarded_headers=headers, tenant=tenant,
                               trace_context=trace, schema_problem=problem))
    return events


def results_to_wire(results: Sequence[StoreResult]) -> list[tuple[Any, ...]]:
    """`results` as tagged tuples for a frame: ("a", event id, message id, job ids),
    ("d", event id, message id) or ("r", tenant, reason)."""
    wire: list[tuple[Any, ...]] = []
    for result in results:
        if isinstance(result, Accepted):
            wire.append(("a", result.event_id, result.message_id, result.job_ids))
        elif isinstance(result, Duplicate):
            wire.append(("d", result.event_id, result.message_id))
        else:
            wire.append(("r", result.tenant, result.reason))
    return wire


def results_from_wire(rows: object) -> list[StoreResult]:
    """The results of a frame's `rows` (:func:`results_to_wire`).

    Raises:
        ValueError: `rows` is no list of such tuples (each field of its type).
    """
    if not isinstance(rows, list):
        raise ValueError(f"results as {type(rows).__name__}, not a list")
    results: list[StoreResult] = []
    for row in rows:
        if type(row) is not tuple or not row:
            raise ValueError(f"a result as {type(row).__name__}, not a tagged tuple")
        if (row[0] == "a" and len(row) == 4 and type(row[1]) is int and type(row[2]) is str
                and type(row[3]) is tuple):
            results.append(Accepted(event_id=row[1], message_id=row[2], job_ids=row[3]))
        elif row[0] == "d" and len(row) == 3 and type(row[1]) is int and type(row[2]) is str:
            results.append(Duplicate(event_id=row[1], message_id=row[2]))
        elif (row[0] == "r" and len(row) == 3 and type(row[1]) is str
              and row[2] in ("tenant_not_found", "tenant_disabled")):
            results.append(TenantRefused(tenant=row[1], reason=row[2]))
        else:
            raise ValueError(f"a result that is no tagged tuple of its types ({row[0]!r})")
    return results


class WriterAway(StoreUnavailable):
    """The writer process could not be reached, or its connection broke before it answered
    (the batch's outcome is unknown: it may have been committed)."""


class PeerRefused(OSError):
    """The other end of the writer's socket runs under another user id."""


def check_peer(sock: socket.socket | None) -> None:
    """Refuse a connected Unix socket whose peer is not this process's user.

    Raises:
        PeerRefused: another user id (or no socket to ask).
    """
    if sock is None:
        raise PeerRefused("no socket to check")
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        raise PeerRefused(f"the writer socket's peer runs as uid {uid}, not {os.getuid()}")


def encode(message: Any) -> bytes:
    """One frame: the length, then the pickle of `message`.

    Raises:
        StoreError: the pickle is larger than a frame may be (a batch of very large bodies:
            permanent for that batch).
    """
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(body) > _MAX_FRAME_BYTES:
        raise StoreError(f"a batch of {len(body)} bytes is larger than the ingest writer "
                         f"takes ({_MAX_FRAME_BYTES}); lower max_body_bytes")
    return _FRAME.pack(len(body)) + body


async def read_message(reader: asyncio.StreamReader) -> Any:
    """The next frame's message.

    Raises:
        asyncio.IncompleteReadError: the connection ended (at a frame's start: cleanly).
        ValueError: a length past any frame's, or a body that is no pickle.
    """
    (size,) = _FRAME.unpack(await reader.readexactly(_FRAME.size))
    if size > _MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {size} bytes")
    body = await reader.readexactly(size)
    try:
        return pickle.loads(body)
    except Exception as exc:  # a garbled pickle raises nearly anything (OverflowError, ...)
        raise ValueError(f"a frame that is no pickle ({type(exc).__name__})") from exc


class WriterLink:
    """An ingest process's connection to the writer process: :meth:`add_events` as the
    store's, answered by the writer. Connects on first use and again after a failure (or
    once the writer has closed it: a respawned writer). Not for concurrent calls: the group
    committer makes one at a time.

    Args:
        locate: where the writer listens now, or None while it has said nowhere
            (:func:`hookline.shared.process.ingest_writer.published_socket`).
    """

    def __init__(self, locate: Callable[[], Path | None]) -> None:
        self._locate = locate
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def add_events(self, events: Sequence[NewEvent], *,
                         create_tenants: bool = False) -> list[StoreResult]:
        """Commit `events` in the writer process; their results, in order, once committed.

        Raises:
            WriterAway: the writer is not listening or the connection broke (outcome
                unknown); StoreError: a batch too large for a frame; and whatever the
                writer's `add_events` raised (StoreBusy, StoreError, ...).
        """
        frame = encode((create_tenants, events_to_wire(events)))
        outcome, value = await self._exchange(frame)
        if outcome == "raised":
            raise value if isinstance(value, BaseException) else StoreError(str(value))
        try:
            return results_from_wire(value)
        except ValueError as exc:
            await self.close()
            raise WriterAway(f"the ingest writer answered no results: {exc}") from exc

    async def probe(self) -> None:
        """Check that the writer answers (readiness: ingest/health.py): an empty batch on a
        connection of its own (a batch may be in flight on this link's), which the writer's
        event loop answers between commits. Bound it with a timeout: a stopped writer
        accepts the connection (the kernel does) and never answers.

        Raises:
            WriterAway: it does not listen, its socket belongs to another user, or the
                connection broke; StoreUnavailable: its own store does not take writes.
        """
        once = WriterLink(self._locate)
        try:
            outcome, value = await once._exchange(encode((False, [])))
        finally:
            await once.close()
        if outcome == "raised":
            raise value if isinstance(value, StoreError) else StoreError(str(value))

    async def _exchange(self, frame: bytes) -> tuple[str, Any]:
        """Send one frame and read its answer on the (re)opened connection."""
        try:
            reader, writer = await self._connected()
            writer.write(frame)
            await writer.drain()
            answer = await read_message(reader)
        except (OSError, EOFError, ValueError) as exc:
            await self.close()
            raise WriterAway(f"the ingest writer process is away: "
                             f"{str(exc) or type(exc).__name__}") from exc
        except BaseException:
            # Cancelled (ingest's commit timeout, a probe's, or shutdown) mid-exchange: the
            # stream may hold half a frame, so the next batch starts on a new connection.
            await self.close()
            raise
        if not (isinstance(answer, tuple) and len(answer) == 2):
            await self.close()
            raise WriterAway(f"the ingest writer answered {type(answer).__name__}, not a result")
        return answer

    async def _connected(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is not None and (self._streams[0].at_eof()
                                          or self._streams[1].is_closing()):
            await self.close()  # the writer closed it (stopped, or killed): a new one listens
        if self._streams is None:
            path = self._locate()
            if path is None:
                raise FileNotFoundError("the ingest writer has not said where it listens yet")
            reader, writer = await asyncio.open_unix_connection(str(path))
            try:
                check_peer(writer.get_extra_info("socket"))
            except PeerRefused:
                writer.close()
                raise
            self._streams = reader, writer
        return self._streams

    async def close(self) -> None:
        """Close the connection (idempotent); the next call connects again."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()
            try:
                await streams[1].wait_closed()
            except OSError:
                pass  # already broken: nothing left to close cleanly

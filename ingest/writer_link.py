"""The link between an ingest process and the ingest writer process (`ingest_writer =
process`, SQLite only): how a batch and its answer are framed, and the HTTP side's end of
it (where the writer listens: hookline.shared.process.ingest_writer).

Each ingest process's group committer (ingest/group_commit.py) sends its batch of events
over a Unix stream socket in the runtime folder and waits for the writer's answer: one
result per event, after the COMMIT that holds them (ingest/writer_process.py), so a 2xx
still means durable. One batch is in flight per connection at a time.

A frame is a 4-byte big-endian length and a pickle. Pickle is safe here only because both
ends check that the peer runs under this process's own user id (SO_PEERCRED): the socket
carries nothing a stranger could send, and a socket another user put at the path (a
folder in /tmp, say) is refused before a byte of it is read.

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hookline.shared.errors import StoreError, StoreUnavailable
from hookline.shared.models import NewEvent, StoreResult

_FRAME = struct.Struct("!I")
_MAX_FRAME_BYTES = (1 << 32) - 1  # what the 4-byte length can say


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
    """One frame: the length, then the pickle of `message`."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(body)) + body


async def read_message(reader: asyncio.StreamReader) -> Any:
    """The next frame's message.

    Raises:
        asyncio.IncompleteReadError: the connection ended (at a frame's start: cleanly).
        ValueError: a length past any batch's.
    """
    (size,) = _FRAME.unpack(await reader.readexactly(_FRAME.size))
    if size > _MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {size} bytes")
    return pickle.loads(await reader.readexactly(size))


class WriterLink:
    """An ingest process's connection to the writer process: :meth:`add_events` as the
    store's, answered by the writer. Connects on first use and again after a failure. Not
    for concurrent calls: the group committer makes one at a time.

    Args:
        path: the writer's socket
            (:func:`hookline.shared.process.ingest_writer.writer_socket_path`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def add_events(self, events: Sequence[NewEvent], *,
                         create_tenants: bool = False) -> list[StoreResult]:
        """Commit `events` in the writer process; their results, in order, once committed.

        Raises:
            WriterAway: the writer is not listening or the connection broke (outcome
                unknown); and whatever the writer's `add_events` raised (StoreBusy,
                StoreError, ...).
        """
        try:
            reader, writer = await self._connected()
            writer.write(encode((create_tenants, list(events))))
            await writer.drain()
            outcome, value = await read_message(reader)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
            await self.close()
            raise WriterAway(f"the ingest writer process is away ({self.path}): "
                             f"{exc or type(exc).__name__}") from exc
        except BaseException:
            # Cancelled (ingest's commit timeout, or shutdown) mid-exchange: the stream may
            # hold half a frame, so the next batch starts on a new connection.
            await self.close()
            raise
        if outcome == "raised":
            raise value if isinstance(value, BaseException) else StoreError(str(value))
        results: list[StoreResult] = value
        return results

    async def probe(self) -> None:
        """Check that the writer accepts a connection (readiness: ingest/health.py).

        Raises:
            WriterAway: it does not, or its socket belongs to another user.
        """
        try:
            _, writer = await asyncio.open_unix_connection(str(self.path))
        except OSError as exc:
            raise WriterAway(f"the ingest writer process is away ({self.path}): {exc}") from exc
        try:
            check_peer(writer.get_extra_info("socket"))
        except PeerRefused as exc:
            raise WriterAway(str(exc)) from exc
        finally:
            writer.close()

    async def _connected(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is None:
            reader, writer = await asyncio.open_unix_connection(str(self.path))
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

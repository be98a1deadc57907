"""A TCP proxy on 127.0.0.1 that can turn into a blackhole, as a cloud network partition or a
NAT that drops its state does: packets vanish, connections are neither refused nor reset.

`freeze()` stops forwarding on every open connection (both directions; the sockets stay
open, so the kernel still acknowledges what is sent and nobody hears of a failure) and
makes new connections be accepted but never forwarded. `heal()` makes new connections work
again; the frozen ones stay frozen forever, as after a NAT state drop. It runs on its own
thread with its own event loop, so both in-process callers and child processes can use it.

`freeze_mid_transaction(marker)` freezes at a chosen instant instead: once a PostgreSQL
client on any connection has run a statement containing `marker` inside a transaction and
the server has answered it, before that answer is passed on. The server's session is then
idle in transaction, holding the locks that statement took, and its client never hears back:
a host cut off mid-claim. `freeze_at_commit(marker)` waits for that transaction's COMMIT
instead and swallows the server's answer to it: the commit has landed, and its client never
hears so. The proxy reads just enough of PostgreSQL's wire protocol (v3) for that: the
client's Parse, Bind and Query messages and the server's ReadyForQuery.

Used by the `partition` rehearsal scenario and the partition tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Coroutine, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_STARTUP_V3 = 196608  # protocol 3.0: the StartupMessage; typed messages follow it
_ENCRYPTION_REQUESTS = (80877103, 80877104)  # SSLRequest, GSSENCRequest: a 1-byte answer


class _PgWatch:
    """Follows one PostgreSQL connection's messages in both directions: which statement the
    client ran last, and whether the server has answered it inside a transaction.

    Each direction's bytes are fed in the order they pass (the client's before they reach the
    server, so an encryption request is known before its answer arrives).
    """

    def __init__(self) -> None:
        self._client = bytearray()
        self._server = bytearray()
        self._client_typed = False  # the startup phase's messages carry no type byte
        self._answers_expected = 0  # one-byte answers to encryption requests
        self._encrypted = False  # TLS or GSS: nothing readable any more
        self._prepared: dict[bytes, bytes] = {}  # statement name -> its SQL text
        self._running = b""  # the SQL text of the statement last sent for execution
        self._marked = False  # the open transaction ran a statement containing the marker

    def from_client(self, data: bytes) -> None:
        """Note what the client sends (before it is forwarded)."""
        if self._encrypted:
            return
        self._client += data
        while True:
            if not self._client_typed:
                if len(self._client) < 8:
                    return
                length, code = struct.unpack("!ii", self._client[:8])
                if len(self._client) < length:
                    return
                del self._client[:length]
                if code in _ENCRYPTION_REQUESTS:
                    self._answers_expected += 1
                elif code == _STARTUP_V3:
                    self._client_typed = True
                continue
            message = _take_typed(self._client)
            if message is None:
                return
            kind, payload = message
            if kind == ord("P"):  # Parse: statement name, SQL text, ...
                name, _, rest = payload.partition(b"\0")
                self._prepared[name] = rest.partition(b"\0")[0]
            elif kind == ord("B"):  # Bind: portal name, statement name, ...
                self._running = self._prepared.get(payload.split(b"\0", 2)[1], b"")
            elif kind == ord("Q"):  # a simple query
                self._running = payload

    def from_server(self, data: bytes, marker: bytes | None, at_commit: bool = False) -> bool:
        """Note what the server sends.

        Args:
            data: the next bytes from the server.
            marker: bytes of SQL text to look for (None: nothing).
            at_commit: look for the answer to the COMMIT of a transaction that ran the
                marked statement instead.

        Returns:
            True when `data` holds the server's answer, inside a transaction, to a statement
            whose SQL text contains `marker` (with `at_commit`: the answer to that
            transaction's COMMIT).
        """
        if self._encrypted:
            return False
        self._server += data
        while self._answers_expected and self._server:
            self._answers_expected -= 1
            answer = self._server[0]
            del self._server[:1]
            if answer in (ord("S"), ord("G")):
                self._encrypted = True
                return False
        hit = False
        while (message := _take_typed(self._server)) is not None:
            kind, payload = message
            if kind == ord("Z"):  # ReadyForQuery: I idle, T in a transaction, E failed one
                marked = (marker is not None and marker in self._running
                          and payload[:1] == b"T")
                if at_commit:
                    hit = hit or (self._marked and payload[:1] == b"I"
                                  and self._running.upper().startswith(b"COMMIT"))
                    self._marked = (self._marked or marked) and payload[:1] == b"T"
                else:
                    hit = hit or marked
                self._running = b""
        return hit


def _take_typed(buffer: bytearray) -> tuple[int, bytes] | None:
    """The next complete typed message (type byte, payload) cut from `buffer`, or None."""
    if len(buffer) < 5:
        return None
    kind, length = buffer[0], struct.unpack("!i", buffer[1:5])[0]
    if len(buffer) < 1 + length:
        return None
    payload = bytes(buffer[5:1 + length])
    del buffer[:1 + length]
    return kind, payload


class BlackholeProxy:
    """Forwards 127.0.0.1:`port` to `target_host`:`target_port` until frozen (module
    docstring). Use as a context manager, or call :meth:`start` and :meth:`stop`.

    Args:
        target_host: the server's host.
        target_port: the server's TCP port.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._blackhole = False
        self._marker: bytes | None = None
        self._at_commit = False
        self._frozen = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="blackhole-proxy")
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._held: list[asyncio.StreamWriter] = []  # every socket, kept open to the end

    @classmethod
    @contextlib.contextmanager
    def for_url(cls, url: str) -> Iterator[tuple[BlackholeProxy, str]]:
        """A started proxy to a `postgresql://` URL's server, and the URL through it.

        Args:
            url: a `postgresql://` URL (its host and port are the proxy's target).

        Returns:
            A context manager yielding the proxy and the URL with the proxy's address; the
            proxy is stopped when the block ends.
        """
        parts = urlsplit(url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 5432)
        proxy.start()
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{proxy.port}" if userinfo else f"127.0.0.1:{proxy.port}"
        try:
            yield proxy, urlunsplit(parts._replace(netloc=netloc))
        finally:
            proxy.stop()

    @property
    def frozen(self) -> bool:
        """Whether the proxy is a blackhole now."""
        return self._frozen.is_set()

    def start(self) -> int:
        """Listen on a free port and start forwarding.

        Returns:
            The port the proxy listens on (127.0.0.1).
        """
        self._thread.start()
        self._call(self._listen())
        return self.port

    def freeze(self) -> None:
        """Stop forwarding on every open connection; accept new ones without forwarding."""
        self._call(self._freeze())

    def freeze_mid_transaction(self, marker: bytes) -> None:
        """Freeze (as :meth:`freeze`) once a client has run a statement containing `marker`
        in a transaction and the server has answered it; that answer is never passed on.

        :meth:`wait_frozen` says when it happened.

        Args:
            marker: bytes of the statement's SQL text, e.g. b"FOR NO KEY UPDATE".
        """
        self._at_commit = False
        self._marker = marker

    def freeze_at_commit(self, marker: bytes) -> None:
        """Freeze (as :meth:`freeze`) once the server has answered the COMMIT of a
        transaction that ran a statement containing `marker`; that answer is never passed
        on, so the commit lands and its client never hears of it.

        Args:
            marker: bytes of one of the transaction's statements' SQL text.
        """
        self._at_commit = True
        self._marker = marker

    def wait_frozen(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` seconds for the proxy to freeze.

        Returns:
            True once frozen, False when the time ran out.
        """
        return self._frozen.wait(timeout_s)

    def heal(self) -> None:
        """Forward new connections again (the frozen ones stay frozen)."""
        self._marker = None
        self._at_commit = False
        self._blackhole = False
        self._frozen.clear()

    def stop(self) -> None:
        """Close every socket and end the thread."""
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, client_reader: asyncio.StreamReader,
                      client_writer: asyncio.StreamWriter) -> None:
        self._held.append(client_writer)
        if self._blackhole:
            return  # accepted, never forwarded, never closed
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.close()
            return
        self._held.append(server_writer)
        # Every connection is followed from its first byte (the framing needs it), so a
        # marker set later still finds statements prepared before.
        watch = _PgWatch()
        for src, dst, to_server in ((client_reader, server_writer, True),
                                    (server_reader, client_writer, False)):
            task = asyncio.create_task(self._pump(src, dst, watch, to_server))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    watch: _PgWatch, to_server: bool) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                if to_server:
                    watch.from_client(data)
                elif watch.from_server(data, self._marker, self._at_commit):
                    self._freeze_now()
                    return  # this answer is never passed on; the sockets stay open
                dst.write(data)
                await dst.drain()
        # One side closed while forwarding: pass the close on (a frozen pump never gets here).
        with contextlib.suppress(OSError):
            dst.close()

    def _freeze_now(self) -> None:
        self._blackhole = True
        self._frozen.set()
        current = asyncio.current_task()
        for task in list(self._pumps):
            if task is not current:
                task.cancel()  # nothing read or written again on these sockets; they stay open

    async def _freeze(self) -> None:
        self._freeze_now()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pumps):
            task.cancel()
        for writer in self._held:
            writer.transport.abort()

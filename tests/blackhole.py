"""A TCP proxy on 127.0.0.1 that can turn into a blackhole, as a cloud network partition or a
NAT that drops its state does: packets vanish, connections are neither refused nor reset.

`freeze()` stops forwarding on every open connection (both directions; the sockets stay
open, so the kernel still acknowledges what is sent and nobody hears of a failure) and
makes new connections be accepted but never forwarded. `heal()` makes new connections work
again; the frozen ones stay frozen forever, as after a NAT state drop. It runs on its own
thread with its own event loop, so both in-process tests and child processes can use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit


class BlackholeProxy:
    """Forwards 127.0.0.1:`port` to `target_host`:`target_port` until frozen (module
    docstring). Use as a context manager, or call :meth:`start` and :meth:`stop`."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._blackhole = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="blackhole-proxy")
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._held: list[asyncio.StreamWriter] = []  # every socket, kept open to the end

    @classmethod
    @contextlib.contextmanager
    def for_url(cls, url: str) -> Iterator[tuple[BlackholeProxy, str]]:
        """A started proxy to a `postgresql://` URL's server, and the URL through it."""
        parts = urlsplit(url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 5432)
        proxy.start()
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{proxy.port}" if userinfo else f"127.0.0.1:{proxy.port}"
        try:
            yield proxy, urlunsplit(parts._replace(netloc=netloc))
        finally:
            proxy.stop()

    def start(self) -> int:
        """Listen on a free port (returned) and start forwarding."""
        self._thread.start()
        self._call(self._listen())
        return self.port

    def freeze(self) -> None:
        """Stop forwarding on every open connection; accept new ones without forwarding."""
        self._call(self._freeze())

    def heal(self) -> None:
        """Forward new connections again (the frozen ones stay frozen)."""
        self._blackhole = False

    def stop(self) -> None:
        """Close every socket and end the thread."""
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)  # type: ignore[arg-type]

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
        for src, dst in ((client_reader, server_writer), (server_reader, client_writer)):
            task = asyncio.create_task(self._pump(src, dst))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        # One side closed while forwarding: pass the close on (a frozen pump never gets here).
        with contextlib.suppress(OSError):
            dst.close()

    async def _freeze(self) -> None:
        self._blackhole = True
        for task in list(self._pumps):
            task.cancel()  # nothing read or written again on these sockets; they stay open

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pumps):
            task.cancel()
        for writer in self._held:
            writer.transport.abort()

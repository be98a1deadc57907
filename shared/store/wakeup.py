"""Local wake-ups: ingest nudges idle workers the moment it commits new jobs.

Each waiting process binds a Unix datagram socket in a shared directory; a notifier sends one
byte to every socket there. Datagrams are fire-and-forget: a full or vanished socket is
skipped, and waiters still poll at `poll_interval_s`, so a lost wake-up only delays work.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import tempfile
import time
from pathlib import Path

_MAX_UNIX_PATH = 100  # sun_path holds 108 bytes on Linux; keep a margin
_LISTING_TTL_S = 1.0


def wake_dir_for(db_path: str) -> Path:
    """The wake-up directory for a database file: beside it, or in the temp dir if too long."""
    beside = Path(os.path.abspath(db_path) + ".wake")
    if len(str(beside)) + 24 < _MAX_UNIX_PATH:
        return beside
    digest = hashlib.sha256(os.path.abspath(db_path).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"hookline-wake-{digest}"


class WakeListener:
    """A bound datagram socket that a notifier can poke. Use one per waiting process."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(mode=0o700, exist_ok=True)
        self.path = directory / f"{os.getpid()}-{os.urandom(3).hex()}.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._sock.bind(str(self.path))
        self._event = asyncio.Event()
        asyncio.get_running_loop().add_reader(self._sock.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._sock.recv(64):
                pass
        self._event.set()

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` seconds for a wake-up; True when one arrived."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            return False
        finally:
            self._event.clear()
        return True

    def close(self) -> None:
        """Stop listening and remove the socket file."""
        with contextlib.suppress(RuntimeError):  # the loop may already be closed
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class WakeNotifier:
    """Sends a wake-up byte to every listener in a directory (non-blocking, never raises)."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._targets: list[str] = []
        self._listed_at = -_LISTING_TTL_S
        self._dir_mtime_ns = -1
        self._turn = 0  # who is poked first: each notify starts one listener further on

    def notify(self) -> None:
        """Poke every listener, starting with the next one each time (the first poked tends
        to claim first: no worker process is favoured); stale sockets (their process is
        gone) are removed."""
        now = time.monotonic()
        try:  # a new listener changes the directory's mtime: list again at once
            mtime_ns = self._dir.stat().st_mtime_ns
        except OSError:
            mtime_ns = -1
        if now - self._listed_at >= _LISTING_TTL_S or mtime_ns != self._dir_mtime_ns:
            self._listed_at = now
            self._dir_mtime_ns = mtime_ns
            try:
                self._targets = [str(p) for p in self._dir.glob("*.sock")]
            except OSError:
                self._targets = []
        targets = self._targets
        if targets:
            start = self._turn % len(targets)
            self._turn += 1
            targets = targets[start:] + targets[:start]
        for target in targets:
            try:
                self._sock.sendto(b"!", target)
            except BlockingIOError:
                pass  # its buffer is full: a wake-up is already pending there
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(target)
                self._listed_at = -_LISTING_TTL_S
            except OSError:
                self._listed_at = -_LISTING_TTL_S

    def close(self) -> None:
        """Release the sending socket."""
        self._sock.close()

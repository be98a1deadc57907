"""Local wake-ups: ingest nudges a worker the moment it commits new jobs.

Each waiting process binds a Unix datagram socket in a shared directory. A commit pokes ONE
of them: the first in name order that takes the datagram. One worker so claims a commit's
jobs in one transaction and, at everyday rates, records their results in the transaction of
its next claim; poking every worker made each of them take the write lock per commit, for a
share of the same few jobs (docs/benchmarks.md, "one wake-up per commit").

A worker that cannot take the work at once (its slots half full or more, stopping, draining
for a takeover) passes the wake-up on to the next socket in name order
(:meth:`WakeNotifier.pass_on`). The datagram's one byte counts the passes left, so a wake-up
visits each other worker at most once and two busy workers never bounce it between them.
A socket that is gone or whose queue is full (its process hung) is skipped for the next.

Datagrams are fire-and-forget: waiters still poll at `poll_interval_s`, so a lost wake-up
only delays work. PostgreSQL needs none of this: every LISTENing worker hears each NOTIFY.
"""

from __future__ import annotations

import asyncio
import bisect
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
        self.path = directory / f"{os.getpid()}-{os.urandom(3).hex()}.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
            self._sock.bind(str(self.path))
        except FileNotFoundError:  # the last listener out removed it meanwhile: make it again
            directory.mkdir(mode=0o700, exist_ok=True)
            self._sock.bind(str(self.path))
        self._event = asyncio.Event()
        # How many other listeners the wake-ups received may still visit (the datagrams'
        # bytes, see WakeNotifier.pass_on): since the last wait returned, and as of then.
        self._arrived_passes = 0
        self._woken_passes = 0
        asyncio.get_running_loop().add_reader(self._sock.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while data := self._sock.recv(64):
                self._arrived_passes = max(self._arrived_passes, *data)
        self._event.set()

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` seconds for a wake-up; True when one arrived."""
        self._woken_passes = 0
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            return False
        finally:
            self._event.clear()
        self._woken_passes, self._arrived_passes = self._arrived_passes, 0
        return True

    def take_passes(self) -> int:
        """The passes left of the wake-up the last :meth:`wait` returned (0 after the first
        call, and when it timed out)."""
        passes, self._woken_passes = self._woken_passes, 0
        return passes

    def close(self, *, remove_empty_directory: bool = False) -> None:
        """Stop listening and remove the socket file; with `remove_empty_directory`, the
        directory too when no other listener is left in it (the wake-up directory of a
        database, :func:`wake_dir_for`, so none is left behind in the temp dir)."""
        with contextlib.suppress(RuntimeError):  # the loop may already be closed
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if remove_empty_directory:
            with contextlib.suppress(OSError):  # not empty: another process still listens
                self.path.parent.rmdir()


class WakeNotifier:
    """Pokes one listener in a directory (non-blocking, never raises); see the module doc."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._targets: list[str] = []
        self._listed_at = -_LISTING_TTL_S
        self._dir_mtime_ns = -1

    def notify(self) -> None:
        """Poke the first listener, in name order, that takes the wake-up; it may pass the
        wake-up on to each of the others once."""
        targets = self._listing()
        self._poke(targets, len(targets) - 1)

    def pass_on(self, own_path: str, passes_left: int) -> None:
        """Hand a wake-up that `own_path`'s listener cannot take on to the next listener
        after it in name order (wrapping around), with one pass fewer; nothing when
        `passes_left` is 0."""
        if passes_left <= 0:
            return
        targets = [t for t in self._listing() if t != own_path]
        after = bisect.bisect_right(targets, own_path)
        self._poke(targets[after:] + targets[:after], passes_left - 1)

    def _listing(self) -> list[str]:
        """The listeners' socket paths, sorted; listed again at most every _LISTING_TTL_S
        unless the directory changed (a new listener changes its mtime)."""
        now = time.monotonic()
        try:
            mtime_ns = self._dir.stat().st_mtime_ns
        except OSError:
            mtime_ns = -1
        if now - self._listed_at >= _LISTING_TTL_S or mtime_ns != self._dir_mtime_ns:
            self._listed_at = now
            self._dir_mtime_ns = mtime_ns
            try:
                self._targets = sorted(str(p) for p in self._dir.glob("*.sock"))
            except OSError:
                self._targets = []
        return self._targets

    def _poke(self, targets: list[str], passes: int) -> None:
        """Send the wake-up to the first of `targets` that takes it, each one further on
        with one pass fewer; stale sockets (their process is gone) are removed."""
        for target in targets:
            try:
                self._sock.sendto(bytes([max(0, min(255, passes))]), target)
                return
            except BlockingIOError:
                pass  # its queue is full: that process is not reading (hung or stopped)
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(target)
                self._listed_at = -_LISTING_TTL_S
            except OSError:
                self._listed_at = -_LISTING_TTL_S
            passes -= 1

    def close(self) -> None:
        """Release the sending socket."""
        self._sock.close()

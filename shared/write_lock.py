"""A cross-process write lock for the SQLite store, taken before BEGIN IMMEDIATE.

SQLite's own busy handler sleeps 1, 2, 5, 10 ... up to 100 ms between tries, so a process
that keeps committing (a worker finishing attempts) can starve another one (ingest) for
hundreds of milliseconds: the busy handler is not fair across processes. Every hookline
connection first takes this `flock` on a file beside the database, retrying every fraction of
a millisecond, so waiters notice a release at once and the holder never stays ahead by
sleeping luck. Writers that do not use it (the sqlite3 shell, a backup) are still covered by
SQLite's busy_timeout.
"""

from __future__ import annotations

import fcntl
import os
import time

from shared.errors import StoreBusy

_FIRST_WAIT_S = 0.0001
_LONGEST_WAIT_S = 0.002


class WriteLock:
    """An exclusive advisory lock on `path`, held only around one write transaction.

    Args:
        path: the lock file (created 0600 when missing).
        timeout_s: how long `acquire` waits before raising StoreBusy, in seconds.
    """

    def __init__(self, path: str, timeout_s: float) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        self.waited_s_max = 0.0

    def acquire(self) -> None:
        """Take the lock, polling with short sleeps. Raises StoreBusy after `timeout_s`."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        started = time.monotonic()
        wait_s = _FIRST_WAIT_S
        while True:
            time.sleep(wait_s)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited > self.timeout_s:
                    raise StoreBusy(f"write lock {self.path} busy for {waited:.1f} s") from None
                wait_s = min(_LONGEST_WAIT_S, wait_s * 2)
                continue
            self.waited_s_max = max(self.waited_s_max, time.monotonic() - started)
            return

    def release(self) -> None:
        """Release the lock (no-op when not held)."""
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the lock file."""
        os.close(self._fd)

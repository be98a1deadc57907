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

import asyncio
import bisect
import fcntl
import math
import os
import time
from collections.abc import Iterator

from hookline.shared.errors import StoreBusy
from hookline.shared.logs import get_logger

_FIRST_WAIT_S = 0.0001
_LONGEST_WAIT_S = 0.002
LONG_HOLD_S = 0.5
"""A write transaction holding the lock this long (seconds) stalls every other writer, ingest's
accepts among them: it is logged (`write_lock_held_long`)."""
LONG_HOLD_LOG_EVERY_S = 10.0
"""At most one `write_lock_held_long` line per lock this often (seconds); the next one counts
the long holds left out meanwhile."""
# Histogram bucket upper bounds, seconds: 10 us to about 20 s, each 25% above the last, so a
# percentile read from it overstates by at most a quarter.
_BOUNDS_S = tuple(1e-5 * 1.25 ** n for n in range(66))


class DurationHistogram:
    """Counts of durations (seconds) in fixed geometric buckets, plus their count, sum and max.

    Cheap enough to record every write transaction of a busy process, bounded in memory.
    """

    def __init__(self) -> None:
        self.counts = [0] * (len(_BOUNDS_S) + 1)
        self.count = 0
        self.total_s = 0.0
        self.max_s = 0.0

    def record(self, duration_s: float) -> None:
        """Add one duration, in seconds."""
        self.counts[bisect.bisect_left(_BOUNDS_S, duration_s)] += 1
        self.count += 1
        self.total_s += duration_s
        self.max_s = max(self.max_s, duration_s)

    def cumulative(self, every: int = 4) -> tuple[list[float], list[int], int, float]:
        """Prometheus-style buckets: every `every`-th bucket bound (seconds), the durations at
        or below each (exact: the bounds are this histogram's own), the count and the sum.
        Safe to call from another thread (a racing record may be missing from the sum)."""
        counts = list(self.counts)  # one atomic copy under the GIL
        bounds = list(_BOUNDS_S[::every])
        cumulative, seen, index = [], 0, 0
        for bound_index in range(0, len(_BOUNDS_S), every):
            while index <= bound_index:
                seen += counts[index]
                index += 1
            cumulative.append(seen)
        return bounds, cumulative, sum(counts), self.total_s

    def percentile_s(self, fraction: float) -> float:
        """The upper bound of the bucket holding the nearest-rank `fraction` (0-1) percentile,
        in seconds, capped at the largest duration seen; 0.0 when nothing was recorded."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(fraction * self.count))
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                bound = _BOUNDS_S[index] if index < len(_BOUNDS_S) else self.max_s
                return min(bound, self.max_s)
        return self.max_s

    def summary_ms(self) -> dict[str, float | int]:
        """{"count", "p50_ms", "p99_ms", "max_ms", "total_ms"} (milliseconds, rounded)."""
        return {"count": self.count,
                "p50_ms": round(self.percentile_s(0.5) * 1000, 3),
                "p99_ms": round(self.percentile_s(0.99) * 1000, 3),
                "max_ms": round(self.max_s * 1000, 3),
                "total_ms": round(self.total_s * 1000, 1)}


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
        self.waits = DurationHistogram()
        self.holds = DurationHistogram()
        self._held_since = 0.0
        self._long_logged_at = -math.inf  # monotonic: the first long hold is logged
        self._long_unlogged = 0

    def stats(self) -> dict[str, dict[str, float | int]]:
        """{"wait": ..., "hold": ...}: how long this process waited for the lock and held it,
        per write transaction (see :meth:`DurationHistogram.summary_ms`)."""
        return {"wait": self.waits.summary_ms(), "hold": self.holds.summary_ms()}

    def acquire(self) -> None:
        """Take the lock, polling with short sleeps. Raises StoreBusy after `timeout_s`."""
        started = time.monotonic()
        for wait_s in self._polls(started):
            time.sleep(wait_s)
        self._taken(started)

    async def acquire_async(self) -> None:
        """Take the lock without blocking the event loop: the same polls as :meth:`acquire`,
        with `asyncio.sleep` between them, so the loop goes on (sends, timers) meanwhile.
        Raises StoreBusy after `timeout_s`. Within one process a held lock must not be
        taken again (flock would grant it to the same open file): the caller runs its whole
        transaction without awaiting in between (SqliteStore's inline transactions)."""
        started = time.monotonic()
        for wait_s in self._polls(started):
            await asyncio.sleep(wait_s)
        self._taken(started)

    def _polls(self, started: float) -> Iterator[float]:
        """Try the lock; while another holds it, yield how long to sleep before the next try
        (doubling to _LONGEST_WAIT_S). Ends once the lock is taken; raises StoreBusy past
        `timeout_s` from `started` (monotonic seconds)."""
        wait_s = _FIRST_WAIT_S
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited > self.timeout_s:
                    raise StoreBusy(f"write lock {self.path} busy for {waited:.1f} s") from None
                yield wait_s
                wait_s = min(_LONGEST_WAIT_S, wait_s * 2)
                continue
            return

    def _taken(self, started: float) -> None:
        self._held_since = time.monotonic()
        self.waits.record(self._held_since - started)

    def release(self, transaction: str = "write") -> None:
        """Release the lock (no-op when not held). A hold of LONG_HOLD_S or more is logged as
        the warning `write_lock_held_long`, naming `transaction` (the store transaction
        that held it), at most once per LONG_HOLD_LOG_EVERY_S."""
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        if self._held_since:
            now = time.monotonic()
            held_s = now - self._held_since
            self.holds.record(held_s)
            self._held_since = 0.0
            if held_s >= LONG_HOLD_S:
                self._report_long_hold(transaction, held_s, now)

    def _report_long_hold(self, transaction: str, held_s: float, now: float) -> None:
        if now - self._long_logged_at < LONG_HOLD_LOG_EVERY_S:
            self._long_unlogged += 1
            return
        get_logger().warning("write_lock_held_long", transaction=transaction,
                             held_ms=round(held_s * 1000, 1), lock=self.path,
                             left_out=self._long_unlogged)
        self._long_logged_at = now
        self._long_unlogged = 0

    def close(self) -> None:
        """Close the lock file."""
        os.close(self._fd)

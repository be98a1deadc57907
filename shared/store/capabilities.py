"""What only some stores offer, asked for with isinstance: SQLite's write-lock and WAL
diagnostics (:class:`SqliteDiagnostics`) and PostgreSQL's count of calls that missed a deadline
(:class:`TimeoutCounting`), and the helpers that read them from any store (None when it has
none). Callers never test for a backend; they ask for a capability.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from hookline.shared.store import Store
    from hookline.shared.store.write_lock import DurationHistogram


@runtime_checkable
class SqliteDiagnostics(Protocol):
    """What only the SQLite store reports (check with isinstance): its single writer is
    shared by every process, and its busy handler is unfair."""

    def write_lock_stats(self) -> dict[str, dict[str, float | int]] | None:
        """How long this process waited for the database's write lock, and held it, per
        write transaction since open: {"wait": {...}, "hold": {...}}, each with `count`,
        `p50_ms`, `p99_ms`, `max_ms`, `total_ms` (milliseconds); None before open."""

    def write_lock_waits(self) -> DurationHistogram | None:
        """The live histogram of this process's waits for the write lock (seconds), for
        /metrics; None before open."""

    def wal_bytes(self) -> int:
        """Size of the database's `-wal` file now, bytes (0 when there is none)."""

    async def maintenance(self) -> dict[str, int]:
        """`PRAGMA wal_checkpoint(TRUNCATE)` on a short-lived connection with a short busy
        timeout, so the `-wal` file shrinks back to zero once no reader holds an old snapshot
        (while one does, the checkpoint copies what it can and reports busy).

        Returns:
            `{"busy": 0|1, "log_frames": n, "checkpointed_frames": n, "wal_bytes": size of
            the -wal file after the checkpoint, bytes}`.
        """


@runtime_checkable
class TimeoutCounting(Protocol):
    """A store that counts its calls that missed a deadline (PostgreSQL; check with
    isinstance)."""

    timeouts: int
    """Store calls of this process that missed a deadline so far."""


def store_timeouts(store: Store) -> int | None:
    """How many of this process's store calls missed a deadline; None when the store does
    not count them (SQLite: its waits are bounded by busy_timeout_s)."""
    return store.timeouts if isinstance(store, TimeoutCounting) else None


def write_lock_waits(store: Store) -> DurationHistogram | None:
    """The store's write-lock wait histogram (:class:`SqliteDiagnostics`), None when it has
    none (PostgreSQL)."""
    return store.write_lock_waits() if isinstance(store, SqliteDiagnostics) else None


def write_lock_stats(store: Store) -> dict[str, dict[str, float | int]] | None:
    """The store's write-lock figures (:class:`SqliteDiagnostics`), None when it has none."""
    return store.write_lock_stats() if isinstance(store, SqliteDiagnostics) else None

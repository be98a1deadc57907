"""What a store says about itself for `/healthz` and `/metrics` (:meth:`Store.health`).

A backend reports its name and, where it keeps a file of its own that can grow (SQLite's
`-wal`), that file's state and gauges; callers show what they get without knowing which
backend answered. Reading it never touches the database (a stat at most).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Gauge:
    """One gauge a backend exports on `/metrics` (its name is the metric's, unchanged)."""

    name: str
    help: str
    value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreHealth:
    """The store's own health, as of now.

    Attributes:
        backend: the `backend` label of `hookline_build_info` (`sqlite`, `postgresql`).
        wal_bytes: size of the store's write-ahead log file now, bytes; None when the
            backend keeps no such file (PostgreSQL: the server's WAL is not ours).
        wal_check: the `wal` check of `/healthz` (size, limit, and when degraded the
            checkpoint result and the processes holding the files); None without a file.
        degraded: the log is past its limit after a checkpoint (`wal_degraded_bytes`).
        wal_over_limit: the file is past the limit right now (a stat, no checkpoint): the
            maintenance task then runs its next round at once.
        detail: why it is degraded, in a sentence; None when it is not.
        gauges: the backend's own `/metrics` gauges (the WAL size and its limit).
    """

    backend: str
    wal_bytes: int | None = None
    wal_check: dict[str, Any] | None = None
    degraded: bool = False
    wal_over_limit: bool = False
    detail: str | None = None
    gauges: tuple[Gauge, ...] = field(default_factory=tuple)

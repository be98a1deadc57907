"""One failure classification for every hookline process: transient or permanent.

*Transient*: the database is unreachable, restarting, busy or read-only for a while
(:class:`hookline.shared.errors.StoreUnavailable`), or something unexpected broke this process only.
A running process retries with capped backoff; a process that must exit exits with
:data:`hookline.shared.process.lifecycle.TRANSIENT_EXIT` and the supervisor respawns it with
backoff.

*Permanent*: a misconfiguration that no retry can fix (unparsable settings, a schema newer
than the code, a path that cannot be a database, a bad password, a missing database, a port
that cannot be bound). The process exits with
:data:`hookline.shared.process.lifecycle.BOOT_ERROR_EXIT`, the supervisor stops the service, and the
message says what to fix.

:class:`StoreOutage` logs one `store_unavailable` / `store_recovered` pair per outage, however
many calls retry meanwhile; :class:`CappedBackoff` spaces those retries.
"""

from __future__ import annotations

import sqlite3
import time

from hookline.shared.errors import (
    HooklineError,
    StoreBusy,
    StoreClosing,
    StoreError,
    StoreUnavailable,
)
from hookline.shared.logs import get_logger
from hookline.shared.policy.retry import doubling_s

RETRY_FIRST_S = 0.1
"""First wait before retrying a transient store fault, in seconds."""
RETRY_CAP_S = 5.0
"""Longest wait between two retries of a transient store fault, in seconds."""


def is_transient(exc: BaseException) -> bool:
    """True when `exc` may go away by itself (retry, or exit and be respawned); False when it
    is a misconfiguration that stops the service until an operator fixes it.

    Transient: StoreUnavailable (StoreBusy included), StoreClosing (shutting down) and
    anything that is not a HooklineError (an unexpected error of this process: a fresh
    process may not meet it). Permanent:
    ConfigError and every other HooklineError raised at boot (StoreError: schema too new,
    path unusable, database refused us).
    """
    if isinstance(exc, StoreUnavailable | StoreClosing):
        return True
    return not isinstance(exc, HooklineError)  # ConfigError is a HooklineError too


# SQLite result codes (sqlite3.Error.sqlite_errorname, extended codes included) of a database
# that is there but cannot be written for a while: the disk is full, a file or folder was
# made read-only, an I/O error. Retried like an outage; an operator fixes the cause.
_SQLITE_UNAVAILABLE = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR")


def sqlite_fault(exc: sqlite3.Error, what: str) -> StoreError:
    """The hookline error for a SQLite driver error met while doing `what` (e.g. "cannot open
    database x.db"): StoreBusy for a lock held past the busy timeout; StoreUnavailable for a
    full disk, a read-only file or an I/O error; StoreError (permanent) for anything else,
    such as a file that is not a database."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    message = str(exc)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or (
            not name and ("locked" in message or "busy" in message)):
        return StoreBusy(f"{what}: database is locked: {message}")
    if name.startswith(_SQLITE_UNAVAILABLE):
        return StoreUnavailable(f"{what}: {message} ({name})")
    return StoreError(f"{what}: {message}")


class CappedBackoff:
    """Waits that double from `first_s` up to `cap_s`; :meth:`reset` after a success.

    Args:
        first_s: the first wait, seconds.
        cap_s: the longest wait, seconds.
    """

    def __init__(self, first_s: float = RETRY_FIRST_S, cap_s: float = RETRY_CAP_S) -> None:
        self.first_s = first_s
        self.cap_s = cap_s
        self._retries = 0

    def next_delay_s(self) -> float:
        """The wait before the next retry, in seconds (doubles each call, up to cap_s)."""
        self._retries += 1
        return doubling_s(self._retries, self.first_s, self.cap_s)

    def reset(self) -> None:
        """Start again from `first_s` (the store answered)."""
        self._retries = 0


class StoreOutage:
    """Tracks whether this process currently sees the database as away, for logging.

    The first transient fault logs `store_unavailable` (warning, with where it was met and
    the error); later ones log nothing until a store call succeeds again, which logs
    `store_recovered` with the outage's length. Shared by every retrier of a process.
    """

    def __init__(self) -> None:
        self._since: float | None = None  # time.monotonic() of the first fault
        self.outages = 0

    @property
    def ongoing(self) -> bool:
        """True between a transient fault and the next success."""
        return self._since is not None

    def failed(self, exc: BaseException, *, during: str) -> None:
        """Record a transient fault met while doing `during` (e.g. "claim", "finish")."""
        if self._since is None:
            self._since = time.monotonic()
            self.outages += 1
            get_logger().warning("store_unavailable", during=during,
                                 error=f"{type(exc).__name__}: {exc}")

    def succeeded(self) -> None:
        """Record a store call that worked; ends the outage if one was ongoing."""
        if self._since is not None:
            outage_s = time.monotonic() - self._since
            self._since = None
            get_logger().info("store_recovered", outage_s=round(outage_s, 3))

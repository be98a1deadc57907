"""The SQLite store's clock: the host's monotonic clock, anchored once to unix time.

Leases, backoff, rate limits and the circuit breaker compare instants written by one process
with the clock of another. On the wall clock a step (NTP, `date -s`) moves every such
comparison at once: a step forward expires every lease in flight (takeovers, and jobs on
their last attempt marked dead "worker lost" while still being sent); a step back stalls
reclaims and retries by the size of the step.

So the store reads ``anchor_s + time.monotonic()``. CLOCK_MONOTONIC is one clock for every
process on a Linux host and is never stepped, so every process of the service reads the same
time and a wall-clock step while running moves nothing. ``anchor_s`` (unix seconds minus
monotonic seconds) lives in the database's ``store_clock`` row with the host's boot id
(monotonic time restarts at boot). It is taken again from the wall clock:

* when a process opens the database and the boot id differs (the host rebooted, or the file
  was restored on another host), and
* at every ``hookline serve`` start (:func:`reanchor_file`), so a wall-clock correction made
  while the service ran reaches the store's timestamps at the next start.

A re-anchor moves the store's time by the wall-clock steps made since the last anchor. On the
same boot that move is known exactly (monotonic time ran on), so the instants that schedule
something (a pending job's next attempt, a lease, a rate limit's next slot, a rotation's
overlap, the start of a failure run) are shifted by it: each keeps its distance from now, and
a step back while the service was down or running stalls no retry. After a reboot (or on
another host) the move is unknown; if the store's time went back, instants written on the old
time could lie far in the future, so re-anchoring clamps them to what the service can have
produced: a lease to at most ``lease_bound_s`` from now, a pending job's next attempt to at
most ``delay_bound_s`` (the longest backoff or Retry-After), a rate limit's next slot to one
second's burst plus one interval, and the start of a failure run to now. Nothing stalls longer
than those bounds. A re-anchor forward after a reboot only makes scheduled retries due sooner.
Past instants (received, finished) are not shifted: they stay on the old time (see below).

Timestamps shown to operators (received, attempted, finished) then lag a wall-clock step made
while the service runs, by the size of the step, until the next start. Attempt start times
and webhook signature timestamps use the real wall clock.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from hookline.shared.db_url import sqlite_path
from hookline.shared.faults import sqlite_fault
from hookline.shared.logs import get_logger

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
DEFAULT_LEASE_BOUND_S = 30.0
"""Lease clamp used before any `hookline serve` recorded its own (Config.lease_s default)."""
DEFAULT_DELAY_BOUND_S = 8 * 3600.0
"""Delay clamp used before any `hookline serve` recorded its own (Config.retry_cap_s default)."""

_CREATE = """CREATE TABLE IF NOT EXISTS store_clock (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    boot_id        TEXT NOT NULL,
    anchor_s       REAL NOT NULL,  -- unix seconds = anchor_s + CLOCK_MONOTONIC seconds
    lease_bound_s  REAL NOT NULL,  -- the re-anchor clamps of the last `hookline serve`
    delay_bound_s  REAL NOT NULL
)"""
_UPSERT = """INSERT INTO store_clock (id, boot_id, anchor_s, lease_bound_s, delay_bound_s)
VALUES (1, :boot_id, :anchor_s, :lease_bound_s, :delay_bound_s)
ON CONFLICT (id) DO UPDATE SET boot_id = excluded.boot_id, anchor_s = excluded.anchor_s,
    lease_bound_s = excluded.lease_bound_s, delay_bound_s = excluded.delay_bound_s"""
SHIFT_MIN_S = 1.0
"""A smaller move of the store's time at a re-anchor shifts nothing: it is NTP slewing, not a
step, and rewriting every pending job for it would buy less than a second."""
_SHIFTS = (
    # Same boot, the store's time moved by :moved_s: what is scheduled keeps its distance from
    # now. :from_s is the earlier of the old and new "now": anything due on neither clock.
    """UPDATE jobs SET run_at = run_at + :moved_s
       WHERE status = 'pending' AND run_at > :from_s""",
    """UPDATE jobs SET lease_until = lease_until + :moved_s
       WHERE status = 'running' AND lease_until > :from_s""",
    """UPDATE destinations SET next_send_at = next_send_at + :moved_s
       WHERE next_send_at > :from_s""",
    """UPDATE destinations SET previous_secret_until = previous_secret_until + :moved_s
       WHERE previous_secret_until > :from_s""",
    # A failure run keeps its length (the circuit breaker's window).
    """UPDATE destinations SET failing_since = failing_since + :moved_s
       WHERE failing_since IS NOT NULL""",
)
_CLAMPS = (
    # Leases: only a running worker extends them, by lease_s at a time.
    """UPDATE jobs SET lease_until = :now + :lease_bound_s
       WHERE status = 'running' AND lease_until > :now + :lease_bound_s""",
    # Next attempts: a backoff or Retry-After never waits longer than the retry cap.
    """UPDATE jobs SET run_at = :now + :delay_bound_s
       WHERE status = 'pending' AND run_at > :now + :delay_bound_s""",
    # Rate limits (GCRA): a claim is allowed while next_send_at <= now + burst, so it never
    # lies beyond now + burst + one interval = now + max(1 s, one interval).
    """UPDATE destinations SET next_send_at = :now + MAX(1.0, 1.0 / COALESCE(rate_limit_per_s, 1.0))
       WHERE next_send_at > :now + MAX(1.0, 1.0 / COALESCE(rate_limit_per_s, 1.0))""",
    # Circuit breaker: a failure run cannot have begun in the future.
    """UPDATE destinations SET failing_since = :now WHERE failing_since > :now""",
)


@dataclasses.dataclass(frozen=True, slots=True)
class StoreClock:
    """Unix seconds read as `anchor_s + time.monotonic()`: the same in every process of the
    host, and never moved by a wall-clock step. Costs what `time.time()` costs."""

    anchor_s: float

    def __call__(self) -> float:
        """The store's current time, unix seconds."""
        return self.anchor_s + time.monotonic()


@dataclasses.dataclass(frozen=True, slots=True)
class _Anchor:
    boot_id: str
    anchor_s: float
    lease_bound_s: float
    delay_bound_s: float


def boot_id() -> str:
    """This boot's id (Linux), which changes when the host reboots; "" where there is none."""
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def anchor_at_open(db: sqlite3.Connection,
                   write: Callable[[sqlite3.Connection], AbstractContextManager[object]]) -> float:
    """The anchor every process of this boot shares; taken afresh (and clamped) if none is
    stored for this boot. One read when the row is current, which is the usual case.

    Args:
        db: an open connection in autocommit mode.
        write: starts a write transaction on `db` (BEGIN IMMEDIATE ... COMMIT).

    Returns:
        anchor_s, seconds: the store's time is `anchor_s + time.monotonic()`.

    Raises:
        sqlite3.Error: the database cannot be read or written.
    """
    current = boot_id()
    stored = _read(db)
    if stored is not None and stored.boot_id == current:
        return stored.anchor_s
    with write(db):
        stored = _read(db)  # another process of this boot may have anchored meanwhile
        if stored is not None and stored.boot_id == current:
            return stored.anchor_s
        return _reanchor(db, stored, current, reason="boot",
                         lease_bound_s=stored.lease_bound_s if stored else DEFAULT_LEASE_BOUND_S,
                         delay_bound_s=stored.delay_bound_s if stored else DEFAULT_DELAY_BOUND_S)


def reanchor_file(path: str, *, lease_bound_s: float, delay_bound_s: float,
                  busy_timeout_s: float = 5.0) -> float:
    """Re-take the store's anchor from the wall clock (at `hookline serve` start).

    Instants further in the future than the bounds allow are clamped (see the module
    docstring); the bounds are kept for re-anchors after a reboot.

    Args:
        path: the SQLite database file (already created and migrated).
        lease_bound_s: the longest lease the service grants, seconds (Config.lease_s).
        delay_bound_s: the longest wait before a retry, seconds (Config.retry_cap_s).
        busy_timeout_s: how long to wait for the write lock, seconds.

    Returns:
        The new anchor_s, seconds.

    Raises:
        sqlite3.Error: the database cannot be written.
    """
    db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_s)
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            anchor_s = _reanchor(db, _read(db), boot_id(), reason="serve_start",
                                 lease_bound_s=lease_bound_s, delay_bound_s=delay_bound_s)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return anchor_s
    finally:
        db.close()


def _read(db: sqlite3.Connection) -> _Anchor | None:
    try:
        row = db.execute("SELECT boot_id, anchor_s, lease_bound_s, delay_bound_s "
                         "FROM store_clock WHERE id = 1").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return None if row is None else _Anchor(str(row[0]), float(row[1]), float(row[2]),
                                            float(row[3]))


def _reanchor(db: sqlite3.Connection, stored: _Anchor | None, current_boot_id: str, *,
              reason: str, lease_bound_s: float, delay_bound_s: float) -> float:
    """Inside a write transaction: take the anchor from the wall clock, clamp, store it."""
    anchor_s = time.time() - time.monotonic()
    now = anchor_s + time.monotonic()
    db.execute(_CREATE)
    # Same boot: how far the store's time moved (the wall-clock steps since the last anchor).
    moved_s = (anchor_s - stored.anchor_s
               if stored is not None and stored.boot_id == current_boot_id else None)
    shifted = clamped = 0
    if moved_s is not None and abs(moved_s) >= SHIFT_MIN_S:
        shift = {"moved_s": moved_s, "from_s": min(now, now - moved_s)}
        for statement in _SHIFTS:
            shifted += db.execute(statement, shift).rowcount
    if stored is not None:  # a fresh database (or one from before the anchor) has nothing to clamp
        params = {"now": now, "lease_bound_s": lease_bound_s, "delay_bound_s": delay_bound_s}
        for statement in _CLAMPS:
            clamped += db.execute(statement, params).rowcount
    db.execute(_UPSERT, {"boot_id": current_boot_id, "anchor_s": anchor_s,
                         "lease_bound_s": lease_bound_s, "delay_bound_s": delay_bound_s})
    # A new database's first anchor moves nothing: not worth an info line (`hookline init`).
    log = get_logger().info if stored is not None else get_logger().debug
    log("store_clock_anchored", reason=reason, moved_s=moved_s, rows_shifted=shifted,
        rows_clamped=clamped, lease_bound_s=lease_bound_s, delay_bound_s=delay_bound_s)
    return anchor_s


def reanchor_at_serve_start(db_url: str, *, lease_s: float, retry_cap_s: float,
                            busy_timeout_s: float) -> None:
    """`hookline serve`: re-anchor a SQLite store's clock (:func:`reanchor_file`); nothing
    for PostgreSQL, whose leases run on the server's clock.

    Args:
        db_url: the `db` setting (path, `sqlite:///PATH` or `postgresql://…`).
        lease_s: Config.lease_s, the lease clamp, seconds.
        retry_cap_s: Config.retry_cap_s, the clamp of a next attempt, seconds.
        busy_timeout_s: how long to wait for the write lock, seconds.

    Raises:
        StoreError: the database cannot be written.
    """
    path = sqlite_path(db_url)
    if path is None:
        return
    try:
        reanchor_file(path, lease_bound_s=lease_s, delay_bound_s=retry_cap_s,
                      busy_timeout_s=busy_timeout_s)
    except sqlite3.Error as exc:
        raise sqlite_fault(exc, f"cannot anchor the store's clock in {path}") from exc

"""The SQLite store: one database file in WAL mode, shared by every local process.

Each store method runs its whole transaction as ONE call on aiosqlite's database thread
(:meth:`SqliteStore._run`): one thread hop per transaction rather than one per statement,
which is what makes group commit pay off. Write transactions start with BEGIN IMMEDIATE so
a writer waits for the lock (busy_timeout) at the start instead of failing with SQLITE_BUSY
mid-way, and they hold the lock only for their statements, never across network I/O.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from shared.errors import ConfigError, NotFound, StoreBusy, StoreError
from shared.models import (
    Accepted, Attempt, AttemptResult, Claim, Dead, Destination, Done, Duplicate, Job, NewEvent,
    Outcome, Retry, Stats,
)
from shared.queries import load_migrations, load_queries
from shared.signing import new_message_id
from shared.wakeup import WakeListener, WakeNotifier, wake_dir_for
from shared.write_lock import WriteLock

T = TypeVar("T")
Q = load_queries("sqlite")
SCHEMA_VERSION = max(version for version, _ in load_migrations("sqlite"))


class SqliteStore:
    """:class:`shared.store.Store` on a SQLite file (see the module docstring).

    Args:
        path: the database file; created (mode 0600) with its schema when missing.
        synchronous: `FULL` (default: a commit survives power loss) or `NORMAL`.
        busy_timeout_s: how long a statement waits for the write lock before StoreBusy.
        clock: unix-seconds clock; tests may pass a fake one.
    """

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_s: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._conn: aiosqlite.Connection | None = None
        self._notifier: WakeNotifier | None = None
        self._listener: WakeListener | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the file, set pragmas, apply migrations. Raises StoreError if unusable."""
        if not os.path.exists(self.path):
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise StoreError(f"cannot create database {self.path}: {parent} is not a directory")
            # Create the file 0600 before SQLite does: it holds destination secrets.
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        try:
            self._conn = await aiosqlite.connect(self.path, isolation_level=None,
                                                 check_same_thread=False,
                                                 factory=_LockingConnection)
            await self._run(self._setup)
        except sqlite3.DatabaseError as exc:
            await self.close()
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc
        self._notifier = WakeNotifier(wake_dir_for(self.path))

    def _setup(self, db: sqlite3.Connection) -> None:
        assert isinstance(db, _LockingConnection)
        db.write_lock = WriteLock(self.path + "-lock", self._busy_timeout_ms / 1000)
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {self._synchronous}")
        db.execute("PRAGMA foreign_keys = ON")
        self._migrate(db)

    def _migrate(self, db: sqlite3.Connection) -> None:
        with _write(db):
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = row[0] or 0
            if current > SCHEMA_VERSION:
                raise StoreError(f"database schema version {current} is newer than this "
                                 f"hookline ({SCHEMA_VERSION}); upgrade hookline")
            for version, script in load_migrations("sqlite"):
                if version > current:
                    for statement in _split_statements(script):
                        db.execute(statement)
                    db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    async def close(self) -> None:
        """Close the connection and the wake-up sockets (idempotent)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._notifier is not None:
            self._notifier.close()
            self._notifier = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` on the database thread as one call; translate driver errors."""
        if self._conn is None:
            raise StoreError("store is not open")
        conn = self._conn
        try:
            # aiosqlite has no public "run this function on your thread" call; _execute is it.
            return await conn._execute(lambda: fn(conn._conn))  # noqa: SLF001
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreBusy(f"database is locked: {exc}") from exc
            raise

    # -- ingest ----------------------------------------------------------------------------

    async def add_events(self, events: Sequence[NewEvent]) -> list[Accepted | Duplicate]:
        """See :meth:`shared.store.Store.add_events`."""
        now = self.clock()

        def tx(db: sqlite3.Connection) -> list[Accepted | Duplicate]:
            with _write(db):
                destinations = [Destination.from_row(r)
                                for r in db.execute(Q["live_destinations"])]
                return [_add_one(db, event, destinations, now) for event in events]

        results = await self._run(tx)
        if self._notifier is not None and any(isinstance(r, Accepted) and r.job_ids
                                              for r in results):
            self._notifier.notify()
        return results

    async def add_event(self, event: NewEvent) -> Accepted | Duplicate:
        """One event in its own transaction; see :meth:`add_events`."""
        return (await self.add_events([event]))[0]

    # -- workers ---------------------------------------------------------------------------

    async def claim(self, worker: str, limit: int, lease_s: float,
                    max_attempts: int) -> list[Claim]:
        """See :meth:`shared.store.Store.claim`."""
        now = self.clock()

        def tx(db: sqlite3.Connection) -> list[Claim]:
            with _write(db):
                db.execute(Q["kill_lost_at_cap"], {"now": now, "max_attempts": max_attempts})
                candidates: list[tuple[float, int]] = []
                for slot in db.execute(Q["destination_slots"], {"now": now}).fetchall():
                    if slot["free"] > 0:
                        candidates += [(r[1], r[0]) for r in db.execute(
                            Q["due_jobs"], {"destination_id": slot["id"], "now": now,
                                            "limit": min(slot["free"], limit)})]
                candidates.sort()
                claims = []
                for _, job_id in candidates[:limit]:
                    row = db.execute(Q["claim_job"], {"id": job_id, "worker": worker,
                                                      "now": now, "lease_s": lease_s}).fetchone()
                    if row is not None:
                        claims.append(_claim_from(db, row, worker, now))
                return claims

        return await self._run(tx)

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        """See :meth:`shared.store.Store.extend`."""
        if not claims:
            return []
        until = self.clock() + lease_s

        def tx(db: sqlite3.Connection) -> list[Claim]:
            with _write(db):
                return [c for c in claims if db.execute(Q["extend_lease"], {
                    "until": until, "job_id": c.job_id, "lease_token": c.lease_token,
                }).rowcount == 0]

        return await self._run(tx)

    async def finish(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]]) -> list[bool]:
        """See :meth:`shared.store.Store.finish`."""
        now = self.clock()

        def tx(db: sqlite3.Connection) -> list[bool]:
            with _write(db):
                return [_finish_one(db, claim, outcome, result, now)
                        for claim, outcome, result in items]

        return await self._run(tx)

    async def hand_back(self, claims: Sequence[Claim]) -> int:
        """See :meth:`shared.store.Store.hand_back`."""
        now = self.clock()

        def tx(db: sqlite3.Connection) -> int:
            with _write(db):
                count = 0
                for c in claims:
                    params = {"now": now, "job_id": c.job_id, "lease_token": c.lease_token}
                    if db.execute(Q["hand_back"], params).rowcount:
                        db.execute(Q["mark_attempt_handed_back"], params)
                        count += 1
                return count

        handed = await self._run(tx)
        if handed and self._notifier is not None:
            self._notifier.notify()
        return handed

    async def wait_for_jobs(self, timeout_s: float) -> bool:
        """See :meth:`shared.store.Store.wait_for_jobs` (a local datagram wake-up)."""
        if self._listener is None:
            self._listener = WakeListener(wake_dir_for(self.path))
        return await self._listener.wait(timeout_s)

    # -- destinations ----------------------------------------------------------------------

    async def add_destination(self, *, name: str, url: str, secret: str,
                              event_types: Sequence[str], max_in_flight: int) -> Destination:
        """See :meth:`shared.store.Store.add_destination`."""
        params = {"name": name, "url": url, "secret": secret, "max_in_flight": max_in_flight,
                  "event_types": json.dumps(list(event_types)), "now": self.clock()}

        def tx(db: sqlite3.Connection) -> Destination:
            with _write(db):
                try:
                    return Destination.from_row(
                        db.execute(Q["insert_destination"], params).fetchone())
                except sqlite3.IntegrityError as exc:
                    raise ConfigError(f"a destination named {name!r} already exists") from exc

        return await self._run(tx)

    async def list_destinations(self) -> list[Destination]:
        """See :meth:`shared.store.Store.list_destinations`."""
        return await self._run(lambda db: [
            Destination.from_row(r) for r in db.execute(Q["live_destinations"])])

    async def get_destination(self, name: str) -> Destination:
        """See :meth:`shared.store.Store.get_destination`."""
        row = await self._run(lambda db: db.execute(Q["get_destination"], {"name": name})
                              .fetchone())
        if row is None:
            raise NotFound(f"no destination named {name!r}")
        return Destination.from_row(row)

    async def set_paused(self, name: str, paused: bool, reason: str | None = None) -> None:
        """See :meth:`shared.store.Store.set_paused`."""
        def tx(db: sqlite3.Connection) -> int:
            with _write(db):
                return db.execute(Q["set_paused"], {"name": name, "paused": int(paused),
                                                    "reason": reason if paused else None}).rowcount

        if await self._run(tx) == 0:
            raise NotFound(f"no destination named {name!r}")
        if not paused and self._notifier is not None:
            self._notifier.notify()

    # -- views -----------------------------------------------------------------------------

    async def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        """See :meth:`shared.store.Store.list_jobs`."""
        rows = await self._run(lambda db: db.execute(
            Q["list_jobs"], {"status": status, "limit": limit}).fetchall())
        return [Job.from_row(r) for r in rows]

    async def list_attempts(self, job_id: int | None = None, limit: int = 10_000) -> list[Attempt]:
        """See :meth:`shared.store.Store.list_attempts`."""
        rows = await self._run(lambda db: db.execute(
            Q["list_attempts"], {"job_id": job_id, "limit": limit}).fetchall())
        return [Attempt.from_row(r) for r in rows]

    async def stats(self) -> Stats:
        """See :meth:`shared.store.Store.stats`."""
        now = self.clock()

        def read(db: sqlite3.Connection) -> Stats:
            by_status = {s: 0 for s in ("pending", "running", "done", "dead")}
            by_status.update({r["status"]: r["n"] for r in db.execute(Q["jobs_by_status"])})
            oldest = db.execute(Q["oldest_pending"], {"now": now}).fetchone()["oldest"]
            return Stats(
                jobs_by_status=by_status,
                events=db.execute(Q["count_events"]).fetchone()["n"],
                attempts=db.execute(Q["count_attempts"]).fetchone()["n"],
                oldest_pending_age_s=None if oldest is None else now - oldest,
            )

        return await self._run(read)


class _LockingConnection(sqlite3.Connection):
    """A sqlite3 connection carrying the cross-process :class:`WriteLock` of its database."""

    write_lock: WriteLock | None = None

    def close(self) -> None:
        """Close the connection and its lock file."""
        super().close()
        if self.write_lock is not None:
            self.write_lock.close()
            self.write_lock = None


class _write:
    """Context manager: write lock, BEGIN IMMEDIATE ... COMMIT (or ROLLBACK), unlock."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.lock = getattr(db, "write_lock", None)

    def __enter__(self) -> sqlite3.Connection:
        if self.lock is not None:
            self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        return self.db

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            if exc_type is None:
                self.db.execute("COMMIT")
            else:
                self.db.execute("ROLLBACK")
        finally:
            if self.lock is not None:
                self.lock.release()


def _add_one(db: sqlite3.Connection, event: NewEvent, destinations: list[Destination],
             now: float) -> Accepted | Duplicate:
    row = db.execute(Q["insert_event"], {
        "message_id": new_message_id(now), "source": event.source,
        "source_event_id": event.source_event_id, "type": event.type, "body": event.body,
        "now": now}).fetchone()
    if row is None:
        existing = db.execute(Q["find_event"], {
            "source": event.source, "source_event_id": event.source_event_id}).fetchone()
        return Duplicate(event_id=existing["id"], message_id=existing["message_id"])
    event_id = row["id"]
    job_ids = tuple(
        db.execute(Q["insert_job"], {"event_id": event_id, "destination_id": d.id,
                                     "now": now}).fetchone()["id"]
        for d in destinations if d.subscribes_to(event.type))
    return Accepted(event_id=event_id, message_id=row["message_id"], job_ids=job_ids)


def _claim_from(db: sqlite3.Connection, row: sqlite3.Row, worker: str, now: float) -> Claim:
    """Finish one claim inside the claim transaction: attempt row, lost-attempt mark, details."""
    params = {"job_id": row["id"], "attempt": row["attempts"], "worker": worker,
              "lease_token": row["lease_token"], "now": now}
    taken_over = db.execute(Q["mark_attempt_lost"], params).rowcount > 0
    db.execute(Q["insert_attempt"], params)
    details = db.execute(Q["claim_details"], {"event_id": row["event_id"],
                                              "destination_id": row["destination_id"]}).fetchone()
    return Claim(
        job_id=row["id"], event_id=row["event_id"], message_id=details["message_id"],
        event_type=details["type"], destination_id=row["destination_id"],
        destination_name=details["name"], url=details["url"], secret=details["secret"],
        body=bytes(details["body"]), attempt=row["attempts"], lease_token=row["lease_token"],
        lease_owner=worker, lease_until=row["lease_until"], taken_over=taken_over)


def _finish_one(db: sqlite3.Connection, claim: Claim, outcome: Outcome, result: AttemptResult,
                now: float) -> bool:
    fence = {"job_id": claim.job_id, "lease_token": claim.lease_token, "now": now}
    db.execute(Q["record_attempt"], {
        "lease_token": claim.lease_token, "started_at": result.started_at,
        "duration_s": result.duration_s, "status_code": result.status_code,
        "error": result.error, "response_excerpt": result.response_excerpt})
    if isinstance(outcome, Done):
        cursor = db.execute(Q["finish_done"], fence)
    elif isinstance(outcome, Retry):
        cursor = db.execute(Q["finish_retry"], {**fence, "run_at": outcome.run_at,
                                                "error": outcome.error})
    elif isinstance(outcome, Dead):
        cursor = db.execute(Q["finish_dead"], {**fence, "error": outcome.error})
    else:
        raise TypeError(f"unknown outcome {outcome!r}")
    return cursor.rowcount == 1


def _split_statements(script: str) -> list[str]:
    """Split a migration script on `;` at line ends (our migrations hold no triggers)."""
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]



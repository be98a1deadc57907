"""The SQLite store: one database file in WAL mode, shared by every local process.

Each store method runs its whole transaction as ONE call on aiosqlite's database thread
(:meth:`SqliteStore._run`): one thread hop per transaction rather than one per statement,
which is what makes group commit pay off. Write transactions start with BEGIN IMMEDIATE so
a writer waits for the lock (busy_timeout) at the start instead of failing with SQLITE_BUSY
mid-way, and they hold the lock only for their statements, never across network I/O.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from shared.delivery_policy import (
    BreakerPolicy, auto_pause_reason, choose_claims, fair_room, is_failure,
)
from shared.errors import (
    Conflict, ConfigError, NotFound, StoreBusy, StoreError, StoreUnavailable,
)
from shared.faults import sqlite_fault
from shared.models import (
    Accepted, Attempt, AttemptResult, Claim, ClaimRequest, Dead, Destination, DestinationSummary, Done,
    Duplicate, EventBody, Job, JobStory, LatencyHistogram, NewEvent, Outcome, PurgeResult, Retry,
    Source, Stats, ThroughputBucket, fill_buckets, parse_headers,
)
from shared.queries import load_migrations, load_queries
from shared.logs import get_logger
from shared.signing import new_message_id, secret_key
from shared.sources import check_source
from shared.storage_checks import enable_wal, refuse_network_filesystem, sqlite_path
from shared.rules import new_destination, purge_cutoffs
from shared.store import check_throughput_args, validate_destination_changes
from shared.store_clock import StoreClock, anchor_at_open
from shared.wakeup import WakeListener, WakeNotifier, wake_dir_for
from shared.write_lock import WriteLock

T = TypeVar("T")
log = get_logger()
Q = load_queries("sqlite")
WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024
"""journal_size_limit: a -wal file left above this after a checkpoint reset is truncated."""
MAINTENANCE_BUSY_TIMEOUT_MS = 100
"""How long Store.maintenance's checkpoint waits for the lock or for readers, milliseconds."""
SCHEMA_VERSION = max(version for version, _ in load_migrations("sqlite"))


def _refuse_world_writable(directory: Path) -> None:
    """Raise StoreError if `directory` is writable by every user: anyone could then swap the
    database, its -wal file or the write lock under the service."""
    try:
        mode = directory.stat().st_mode
    except OSError:
        return  # a missing folder is reported when the file is created
    if mode & stat.S_IWOTH:
        raise StoreError(f"refusing to use a database in {directory}: the folder is "
                         f"world-writable (chmod o-w {directory}, or pick another folder)")


class SqliteStore:
    """:class:`shared.store.Store` on a SQLite file (see the module docstring).

    Args:
        path: the database file; created (mode 0600) with its schema when missing.
        synchronous: `FULL` (default: a commit survives power loss) or `NORMAL`.
        busy_timeout_s: how long a statement waits for the write lock before StoreBusy.
        clock: unix-seconds clock; tests may pass a fake one. None (production): the
            host's monotonic clock anchored in the database (:mod:`shared.store_clock`), the
            same in every process and never moved by a wall-clock step; it is read through
            `self.clock`, the store's one source of "now".
        allow_network_filesystem: accept a folder on a network or FUSE filesystem (see
            :func:`shared.storage_checks.refuse_network_filesystem`).
    """

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_s: float = 5.0,
                 clock: Callable[[], float] | None = None,
                 allow_network_filesystem: bool = False) -> None:
        self.path = path
        self._allow_network_filesystem = allow_network_filesystem
        self._injected_clock = clock
        # Until open() reads the database's anchor.
        self.clock: Callable[[], float] = clock or time.time
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._conn: aiosqlite.Connection | None = None
        self._notifier: WakeNotifier | None = None
        self._listener: WakeListener | None = None
        self._write_lock: WriteLock | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the file, set pragmas, apply migrations.

        Raises:
            StoreError: the file is unusable. StorageRefused: it cannot keep the delivery
                promise (an in-memory path, a network or FUSE folder without the opt-in, a
                journal mode that stays out of WAL); see :mod:`shared.storage_checks`.
        """
        sqlite_path(self.path)  # SqliteStore built directly, not through open_store
        refuse_network_filesystem(self.path, allowed=self._allow_network_filesystem)
        _refuse_world_writable(Path(self.path).parent)
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
        except sqlite3.Error as exc:
            await self.close()
            raise sqlite_fault(exc, f"cannot open database {self.path}") from exc
        except BaseException:  # a refusal (StorageRefused), busy lock...: no thread left over
            await self.close()
            raise
        self._notifier = WakeNotifier(wake_dir_for(self.path))

    def _setup(self, db: sqlite3.Connection) -> None:
        assert isinstance(db, _LockingConnection)
        db.write_lock = self._write_lock = WriteLock(self.path + "-lock",
                                                     self._busy_timeout_ms / 1000)
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        enable_wal(db, self.path)
        db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
        db.execute(f"PRAGMA synchronous = {self._synchronous}")
        db.execute("PRAGMA foreign_keys = ON")
        self._migrate(db)
        if self._injected_clock is None:
            self.clock = StoreClock(anchor_at_open(db, _write))

    def _migrate(self, db: sqlite3.Connection) -> None:
        with _write(db):
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            applied = {r[0] for r in db.execute("SELECT version FROM schema_version")}
            current = max(applied, default=0)
            if current > SCHEMA_VERSION:
                raise StoreError(f"database schema version {current} is newer than this "
                                 f"hookline ({SCHEMA_VERSION}); upgrade hookline")
            # Apply every missing step, not only those above the highest: a step numbered
            # below an applied one (branches merged late) still runs, in number order.
            for version, script in load_migrations("sqlite"):
                if version not in applied:
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

    def write_lock_stats(self) -> dict[str, dict[str, float | int]] | None:
        """See :meth:`shared.store.Store.write_lock_stats`: this connection's waits for the
        cross-process write lock and how long it held it (shared/write_lock.py)."""
        return None if self._write_lock is None else self._write_lock.stats()

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
            fault = sqlite_fault(exc, self.path)
            if isinstance(fault, StoreUnavailable):  # busy, disk full, read-only: retried
                raise fault from exc
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

    async def add_backlog(self, events: Sequence[NewEvent]) -> int:
        """See :meth:`shared.store.Store.add_backlog`: the events in one executemany, then one
        jobs insert per event type for the whole batch (not one per event). An event skipped
        as known keeps its old message id, so the new ids it was given match no row."""
        now = self.clock()
        rows: list[dict[str, object]] = []
        message_ids: dict[str, list[str]] = {}  # event type -> new message ids
        for e in events:
            message_id = new_message_id(now)
            message_ids.setdefault(e.type, []).append(message_id)
            rows.append({"message_id": message_id, "source": e.source,
                         "source_event_id": e.source_event_id, "type": e.type,
                         "body": e.body, "now": now})

        def tx(db: sqlite3.Connection) -> int:
            with _write(db):
                destinations = [Destination.from_row(r)
                                for r in db.execute(Q["live_destinations"])]
                db.executemany(Q["insert_event"], rows)
                written = 0
                for event_type, ids in message_ids.items():
                    subscribed = [d.id for d in destinations if d.subscribes_to(event_type)]
                    if subscribed:
                        written += db.execute(Q["insert_jobs_of_messages"], {
                            "message_ids": json.dumps(ids),
                            "destination_ids": json.dumps(subscribed), "now": now}).rowcount
                return written

        written = await self._run(tx)
        if self._notifier is not None and written:
            self._notifier.notify()
        return written

    async def add_event(self, event: NewEvent) -> Accepted | Duplicate:
        """One event in its own transaction; see :meth:`add_events`."""
        return (await self.add_events([event]))[0]

    # -- workers ---------------------------------------------------------------------------

    async def claim(self, worker: str, limit: int, lease_s: float,
                    max_attempts: int, *, late_after: int | None = None,
                    max_late: int | None = None, per_destination: int | None = None,
                    held: Mapping[int, int] | None = None) -> list[Claim]:
        """See :meth:`shared.store.Store.claim`."""
        now = self.clock()
        request = ClaimRequest(worker=worker, limit=limit, lease_s=lease_s,
                               max_attempts=max_attempts, late_after=late_after,
                               max_late=max_late, per_destination=per_destination,
                               held=held or {})

        def tx(db: sqlite3.Connection) -> list[Claim]:
            # Most wake-ups under load find the work already taken by the other workers:
            # a read costs no write lock, so only a claim that can take something writes.
            if not db.execute(Q["claim_probe"], {"now": now, "max_attempts": max_attempts}
                              ).fetchone()["claimable"]:
                return []
            with _write(db):
                return _claim_in(db, request, now)

        return await self._run(tx)

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        """See :meth:`shared.store.Store.extend`."""
        if not claims:
            return []
        until = self.clock() + lease_s

        def tx(db: sqlite3.Connection) -> set[str]:
            with _write(db):  # one statement for every lease: the worker's heartbeat
                return {r["lease_token"] for r in db.execute(Q["extend_lease"], {
                    "until": until,
                    "claims": json.dumps([[c.job_id, c.lease_token] for c in claims])})}

        kept = await self._run(tx)
        return [c for c in claims if c.lease_token not in kept]

    async def finish(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                     breaker: BreakerPolicy | None = None) -> list[bool]:
        """See :meth:`shared.store.Store.finish`."""
        now = self.clock()
        paused: list[tuple[str, str, int]] = []  # (destination, reason, failure streak)

        def tx(db: sqlite3.Connection) -> list[bool]:
            paused.clear()
            with _write(db):
                return _finish_all(db, items, now, breaker, paused)

        kept = await self._run(tx)
        _log_auto_paused(paused)
        return kept

    async def finish_and_claim(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                               breaker: BreakerPolicy | None,
                               request: ClaimRequest) -> tuple[list[bool], list[Claim]]:
        """See :meth:`shared.store.Store.finish_and_claim`: one transaction, so one turn of
        the write lock and one commit (fsync) instead of two."""
        now = self.clock()
        paused: list[tuple[str, str, int]] = []

        def tx(db: sqlite3.Connection) -> tuple[list[bool], list[Claim]]:
            paused.clear()
            if not items and not db.execute(Q["claim_probe"], {
                    "now": now, "max_attempts": request.max_attempts}).fetchone()["claimable"]:
                return [], []  # a claim alone, with nothing to take: no write (see claim)
            with _write(db):
                kept = _finish_all(db, items, now, breaker, paused)
                claims = _claim_in(db, request, now) if request.limit > 0 else []
                return kept, claims

        kept, claims = await self._run(tx)
        _log_auto_paused(paused)
        return kept, claims

    async def rotate_secret(self, name: str, new_secret: str, overlap_s: float) -> Destination:
        """See :meth:`shared.store.Store.rotate_secret`."""
        secret_key(new_secret)  # raises ConfigError when malformed
        if not overlap_s >= 0:
            raise ConfigError(f"overlap_s must be zero or more seconds, not {overlap_s!r}")
        until = self.clock() + overlap_s

        def tx(db: sqlite3.Connection) -> sqlite3.Row | None:
            with _write(db):
                current = db.execute(Q["get_destination"], {"name": name}).fetchone()
                if current is None:
                    return None
                if current["secret"] == new_secret:
                    raise ConfigError("the new secret equals the current one")
                return db.execute(Q["rotate_secret"], {"name": name, "secret": new_secret,
                                                       "until": until}).fetchone()

        row = await self._run(tx)
        if row is None:
            raise NotFound(f"no destination named {name!r}")
        log.info("destination_secret_rotated", destination=name, previous_until=until)
        return Destination.from_row(row)

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
        """See :meth:`shared.store.Store.wait_for_jobs` (a local datagram wake-up). The first
        call binds the wake-up socket, then returns True at once if due work is already
        waiting: a commit that happened before the socket existed poked nobody."""
        if self._listener is None:
            self._listener = WakeListener(wake_dir_for(self.path))
            now = self.clock()
            try:
                due = await self._run(lambda db: db.execute(Q["due_work_exists"],
                                                            {"now": now}).fetchone()["due"])
            except StoreBusy:
                due = False  # the poll finds it instead
            if due:
                return True
        return await self._listener.wait(timeout_s)

    # -- destinations ----------------------------------------------------------------------

    async def add_destination(self, *, name: str, url: str, secret: str,
                              event_types: Sequence[str], max_in_flight: int,
                              headers: Mapping[str, str] | None = None) -> Destination:
        """See :meth:`shared.store.Store.add_destination`."""
        new = new_destination(name=name, url=url, secret=secret, event_types=event_types,
                              max_in_flight=max_in_flight, headers=headers)
        params = {"name": name, "url": new.url, "secret": secret,
                  "max_in_flight": new.max_in_flight, "event_types": json.dumps(new.event_types),
                  "now": self.clock(), "headers": json.dumps(new.headers)}

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
            per_destination: dict[str, dict[str, int]] = {}
            for r in db.execute(Q["jobs_by_destination_status"]):
                per_destination.setdefault(r["destination"], {})[r["status"]] = r["n"]
            return Stats(
                jobs_by_status=by_status,
                events=db.execute(Q["count_events"]).fetchone()["n"],
                attempts=db.execute(Q["count_attempts"]).fetchone()["n"],
                oldest_pending_age_s=None if oldest is None else now - oldest,
                jobs_by_destination=per_destination,
                paused_destinations={r["name"]: r["paused_reason"]
                                     for r in db.execute(Q["paused_destinations"])},
                attempts_by_outcome={r["outcome"]: r["n"]
                                     for r in db.execute(Q["attempts_by_outcome"])},
                delivery_latency=_latency(db.execute(Q["delivery_latency"]).fetchone()),
                wal_bytes=_wal_bytes(self.path),
            )

        return await self._run(read)

    async def maintenance(self) -> dict[str, int]:
        """See :meth:`shared.store.Store.maintenance`.

        The checkpoint runs on its own short-lived connection in a worker thread, not on
        the store's thread: a TRUNCATE checkpoint waits (here at most
        MAINTENANCE_BUSY_TIMEOUT_MS) for readers, and must not stall ingest's transactions.
        """
        def checkpoint() -> dict[str, int]:
            try:
                conn = sqlite3.connect(self.path, isolation_level=None,
                                       timeout=MAINTENANCE_BUSY_TIMEOUT_MS / 1000)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open database {self.path}: {exc}") from exc
            try:
                busy, log_frames, done = conn.execute(
                    "PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError as exc:  # locked past the short timeout
                busy, log_frames, done = 1, -1, -1
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise StoreError(f"checkpoint of {self.path} failed: {exc}") from exc
            finally:
                conn.close()
            return {"busy": int(busy), "log_frames": int(log_frames),
                    "checkpointed_frames": int(done), "wal_bytes": _wal_bytes(self.path) or 0}

        return await asyncio.to_thread(checkpoint)

    # -- operator controls -----------------------------------------------------------------

    async def update_destination(self, name: str, **changes: Any) -> Destination:
        """See :meth:`shared.store.Store.update_destination`."""
        values = validate_destination_changes(changes)
        # Column names come only from the validated DESTINATION_UPDATERS keys, never input.
        assignments = ", ".join(f"{column} = :{column}" for column in values)
        sql = (f"UPDATE destinations SET {assignments} "  # noqa: S608
               "WHERE name = :name AND deleted_at IS NULL RETURNING *")
        params = {k: json.dumps(v if isinstance(v, dict) else list(v))
                  if isinstance(v, list | tuple | dict) else v for k, v in values.items()}

        def tx(db: sqlite3.Connection) -> sqlite3.Row | None:
            with _write(db):
                return db.execute(sql, {**params, "name": name}).fetchone()

        row = await self._run(tx)
        if row is None:
            raise NotFound(f"no destination named {name!r}")
        return Destination.from_row(row)

    async def remove_destination(self, name: str) -> int:
        """See :meth:`shared.store.Store.remove_destination`."""
        now = self.clock()

        def tx(db: sqlite3.Connection) -> int | None:
            with _write(db):
                row = db.execute(Q["remove_destination"], {"name": name, "now": now}).fetchone()
                if row is None:
                    return None
                return db.execute(Q["kill_jobs_of_destination"],
                                  {"destination_id": row["id"], "now": now}).rowcount

        ended = await self._run(tx)
        if ended is None:
            raise NotFound(f"no destination named {name!r}")
        return ended

    async def list_dead(self, destination: str | None = None, since_s: float | None = None,
                        limit: int = 100) -> list[Job]:
        """See :meth:`shared.store.Store.list_dead`."""
        rows = await self._run(lambda db: db.execute(Q["list_dead"], {
            "destination": destination, "since": since_s, "limit": limit}).fetchall())
        return [Job.from_row(r) for r in rows]

    async def replay(self, *, job_id: int | None = None, all_dead: bool = False,
                     destination: str | None = None, since_s: float | None = None,
                     dry_run: bool = False) -> int:
        """See :meth:`shared.store.Store.replay`."""
        if (job_id is None) == (not all_dead):
            raise ConfigError("replay needs exactly one of a job id or all_dead")
        now = self.clock()
        params = {"job_id": job_id, "destination": destination, "since": since_s}

        def tx(db: sqlite3.Connection) -> int:
            with _write(db):
                if job_id is not None:
                    _check_replayable(db, job_id)
                ids = [r["id"] for r in db.execute(Q["replay_candidates"], params)]
                if dry_run:
                    return len(ids)
                return sum(db.execute(Q["replay_job"], {"job_id": i, "now": now}).rowcount
                           for i in ids)

        count = await self._run(tx)
        if count and not dry_run and self._notifier is not None:
            self._notifier.notify()
        return count

    async def purge(self, *, bodies_before_s: float, metadata_before_s: float,
                    dedupe_before_s: float) -> PurgeResult:
        """See :meth:`shared.store.Store.purge`."""
        purge_cutoffs(bodies_before_s, metadata_before_s, dedupe_before_s)
        now = self.clock()

        def tx(db: sqlite3.Connection) -> PurgeResult:
            with _write(db):
                bodies = db.execute(Q["purge_bodies"],
                                    {"before": bodies_before_s, "now": now}).rowcount
                meta = {"before": metadata_before_s}
                attempts = db.execute(Q["purge_attempts"], meta).rowcount
                jobs = db.execute(Q["purge_jobs"], meta).rowcount
                events = db.execute(Q["purge_events"], {"before": dedupe_before_s}).rowcount
                return PurgeResult(bodies=bodies, attempts=attempts, jobs=jobs, events=events)

        return await self._run(tx)

    async def check_writable(self) -> None:
        """See :meth:`shared.store.Store.check_writable`."""
        def probe(db: sqlite3.Connection) -> None:
            lock = getattr(db, "write_lock", None)
            if lock is not None:
                lock.acquire()
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
            finally:
                if lock is not None:
                    lock.release()

        try:
            await self._run(probe)
        except sqlite3.Error as exc:
            raise sqlite_fault(exc, f"database {self.path} is not writable") from exc

    async def get_job(self, job_id: int) -> JobStory:
        """See :meth:`shared.store.Store.get_job`."""
        def read(db: sqlite3.Connection) -> tuple[sqlite3.Row | None, list[sqlite3.Row]]:
            row = db.execute(Q["get_job"], {"job_id": job_id}).fetchone()
            attempts = db.execute(Q["list_attempts"], {"job_id": job_id,
                                                       "limit": 10_000}).fetchall()
            return row, attempts

        row, attempts = await self._run(read)
        if row is None:
            raise NotFound(f"no job with id {job_id}")
        return JobStory(
            job=Job.from_row(row), replays=row["replays"], source=row["source"],
            source_event_id=row["source_event_id"], received_at=row["received_at"],
            body_bytes=row["body_bytes"], body_purged_at=row["body_purged_at"],
            attempts=tuple(Attempt.from_row(a) for a in attempts))

    # -- dashboard views -------------------------------------------------------------------

    async def destination_summaries(self, *, latency_window_s: float = 900.0,
                                    latency_scan_limit: int = 20_000
                                    ) -> list[DestinationSummary]:
        """See :meth:`shared.store.Store.destination_summaries`."""
        now = self.clock()

        def read(db: sqlite3.Connection) -> list[DestinationSummary]:
            rows = db.execute(Q["destination_summaries"], {"now": now}).fetchall()
            latency = {r["destination_id"]: r for r in db.execute(Q["destination_latency"], {
                "since": now - latency_window_s, "scan_limit": latency_scan_limit})}
            return [DestinationSummary.from_rows(r, latency.get(r["id"])) for r in rows]

        return await self._run(read)

    async def throughput(self, *, window_s: float, bucket_s: int = 60) -> list[ThroughputBucket]:
        """See :meth:`shared.store.Store.throughput`."""
        check_throughput_args(window_s, bucket_s)
        now = self.clock()
        first = int((now - window_s) // bucket_s)
        params = {"since": float(first * bucket_s), "bucket_s": bucket_s}

        def read(db: sqlite3.Connection) -> list[ThroughputBucket]:
            counts: dict[int, dict[str, int]] = {}
            for r in db.execute(Q["events_per_bucket"], params):
                counts.setdefault(r["bucket"], {})["events"] = r["n"]
            for r in db.execute(Q["finished_per_bucket"], params):
                key = "delivered" if r["status"] == "done" else "dead"
                counts.setdefault(r["bucket"], {})[key] = r["n"]
            return fill_buckets(counts, first=first, last=int(now // bucket_s),
                                bucket_s=bucket_s)

        return await self._run(read)

    async def event_body(self, job_id: int, max_bytes: int) -> EventBody:
        """See :meth:`shared.store.Store.event_body`."""
        row = await self._run(lambda db: db.execute(Q["event_body_of_job"], {
            "job_id": job_id, "max_bytes": max(1, max_bytes)}).fetchone())
        if row is None:
            raise NotFound(f"no job with id {job_id}")
        return EventBody(event_id=row["event_id"], type=row["type"],
                         size_bytes=row["size_bytes"] or 0, head=bytes(row["head"] or b""),
                         body_purged_at=row["body_purged_at"])

    # -- inbound sources -------------------------------------------------------------------

    async def add_source(self, *, name: str, scheme: str, secret: str) -> Source:
        """See :meth:`shared.store.Store.add_source`."""
        check_source(name, scheme, secret)
        params = {"name": name, "scheme": scheme, "secret": secret, "now": self.clock()}

        def tx(db: sqlite3.Connection) -> Source:
            with _write(db):
                try:
                    return Source.from_row(db.execute(Q["insert_source"], params).fetchone())
                except sqlite3.IntegrityError as exc:
                    raise ConfigError(f"a source named {name!r} already exists") from exc

        return await self._run(tx)

    async def get_source(self, name: str) -> Source:
        """See :meth:`shared.store.Store.get_source`."""
        row = await self._run(lambda db: db.execute(Q["get_source"], {"name": name})
                              .fetchone())
        if row is None:
            raise NotFound(f"no source named {name!r}")
        return Source.from_row(row)

    async def list_sources(self) -> list[Source]:
        """See :meth:`shared.store.Store.list_sources`."""
        return await self._run(lambda db: [
            Source.from_row(r) for r in db.execute(Q["live_sources"])])

    async def remove_source(self, name: str) -> None:
        """See :meth:`shared.store.Store.remove_source`."""
        now = self.clock()

        def tx(db: sqlite3.Connection) -> sqlite3.Row | None:
            with _write(db):
                return db.execute(Q["remove_source"], {"name": name, "now": now}).fetchone()

        if await self._run(tx) is None:
            raise NotFound(f"no source named {name!r}")


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
    subscribed = [d.id for d in destinations if d.subscribes_to(event.type)]
    job_ids: tuple[int, ...] = ()
    if subscribed:  # one statement per event, not one per job: this is ingest's hot path
        job_ids = tuple(r[0] for r in db.execute(Q["insert_jobs"], {
            "event_id": event_id, "destination_ids": json.dumps(subscribed), "now": now}))
    return Accepted(event_id=event_id, message_id=row["message_id"], job_ids=job_ids)


def _claim_in(db: sqlite3.Connection, request: ClaimRequest, now: float) -> list[Claim]:
    """The claim itself (see Store.claim), inside the caller's write transaction: choose the
    jobs, then lease them, record their attempts and read what sending needs, each in one
    statement for the whole batch (a claim of 64 jobs is 4 statements, not 256)."""
    killed = [r[0] for r in db.execute(Q["kill_lost_at_cap"], {
        "now": now, "max_attempts": request.max_attempts})]
    if killed:  # their in-flight attempts end with them, in this transaction
        db.execute(Q["close_attempts_lost_at_cap"], {"job_ids": json.dumps(killed), "now": now})
    # (late retry?, due since, job id, destination id): fresh work sorts first.
    candidates: list[tuple[bool, float, int, int]] = []
    rates: dict[int, tuple[float, float]] = {}  # id -> (per second, next_send_at)
    for slot in db.execute(Q["destination_slots"], {"now": now}).fetchall():
        room = fair_room(request, slot["id"])
        if slot["free"] <= 0 or room <= 0:
            continue
        if slot["rate_limit_per_s"] is not None:
            rates[slot["id"]] = (slot["rate_limit_per_s"], slot["next_send_at"])
        for job_id, due_at, attempts in _due_of(db, slot, now, room):
            late = request.late_after is not None and attempts >= request.late_after
            candidates.append((late, due_at, job_id, slot["id"]))
    chosen, next_send = choose_claims(candidates, limit=request.limit,
                                      max_late=request.max_late, rates=rates, now_s=now,
                                      per_destination=request.per_destination,
                                      held=request.held)
    for destination_id, next_send_at in next_send.items():
        db.execute(Q["advance_next_send"], {"destination_id": destination_id,
                                            "next_send_at": next_send_at})
    if not chosen:
        return []
    # The write lock has been held since the candidates were read: every chosen job is
    # still due, so the one UPDATE leases them all.
    rows = {r["id"]: r for r in db.execute(Q["claim_job"], {
        "job_ids": json.dumps(chosen), "worker": request.worker, "now": now,
        "lease_s": request.lease_s})}
    leased = [rows[job_id] for job_id in chosen if job_id in rows]
    # A job whose previous claim's attempt never finished (its worker was lost: an expired
    # lease, or a replay of a job that died so) is taken over, and is sent in quarantine.
    taken_over = {r["job_id"] for r in db.execute(Q["mark_attempt_lost"], {
        "job_ids": json.dumps(chosen), "now": now,
        "lease_tokens": json.dumps([r["lease_token"] for r in leased])})}
    db.execute(Q["insert_attempt"], {
        "claims": json.dumps([[r["id"], r["attempts"], r["lease_token"]] for r in leased]),
        "worker": request.worker, "now": now})
    details = {d["job_id"]: d for d in db.execute(Q["claim_details"], {
        "job_ids": json.dumps([r["id"] for r in leased])})}
    return [_claim_from(r, details[r["id"]], request.worker, r["id"] in taken_over, now)
            for r in leased]


def _finish_all(db: sqlite3.Connection, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                now: float, breaker: BreakerPolicy | None,
                paused: list[tuple[str, str, int]]) -> list[bool]:
    """Every item's fenced finish and failure-run update (see Store.finish), inside the
    caller's write transaction; destinations this pauses are appended to `paused`."""
    if (all(isinstance(outcome, Done) and not is_failure(result)
            for _, outcome, result in items)
            and len({claim.job_id for claim, _, _ in items}) == len(items)):
        return _finish_delivered(db, items, now)
    kept = []
    for claim, outcome, result in items:
        kept.append(_finish_one(db, claim, outcome, result, now))
        pause = _track_failure_run(db, claim, result, now, breaker)
        if pause is not None:
            paused.append(pause)
    return kept


def _finish_delivered(db: sqlite3.Connection,
                      items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                      now: float) -> list[bool]:
    """The common batch, every attempt acknowledged with a 2xx and no job twice: each step
    one statement for the whole batch (attempt rows, done jobs), then one failure-run reset
    per destination. Same effect as finishing them one by one."""
    db.execute(Q["record_attempts"], {"attempts": json.dumps([
        [claim.lease_token, result.started_at, result.duration_s, result.status_code,
         result.error, result.response_excerpt, result.response_headers, result.location]
        for claim, _, result in items])})
    done = {r["id"] for r in db.execute(Q["finish_delivered"], {
        "claims": json.dumps([[claim.job_id, claim.lease_token] for claim, _, _ in items]),
        "now": now})}
    for destination_id in sorted({claim.destination_id for claim, _, _ in items}):
        db.execute(Q["destination_succeeded"], {"destination_id": destination_id})
    return [claim.job_id in done for claim, _, _ in items]


def _log_auto_paused(paused: Sequence[tuple[str, str, int]]) -> None:
    for name, reason, streak in paused:
        log.warning("destination_auto_paused", destination=name, reason=reason,
                    failure_streak=streak)


def _claim_from(row: sqlite3.Row, details: sqlite3.Row, worker: str, taken_over: bool,
                now: float) -> Claim:
    """A Claim from its leased job row and its claim_details row."""
    secrets = (details["secret"],)
    if details["previous_secret"] and (details["previous_secret_until"] or 0) > now:
        secrets += (details["previous_secret"],)
    return Claim(
        job_id=row["id"], event_id=row["event_id"], message_id=details["message_id"],
        event_type=details["type"], destination_id=row["destination_id"],
        destination_name=details["name"], url=details["url"], secret=details["secret"],
        body=bytes(details["body"]), attempt=row["attempts"], lease_token=row["lease_token"],
        lease_owner=worker, lease_until=row["lease_until"], taken_over=taken_over,
        secrets=secrets, timeout_s=details["timeout_s"],
        headers=parse_headers(details["headers"]))


def _due_of(db: sqlite3.Connection, slot: sqlite3.Row, now: float,
            limit: int) -> list[tuple[int, float, int]]:
    """(job id, due since, attempts made) of one destination's claimable jobs.

    An ordered destination offers only its oldest unfinished job, and only when that job is
    due (pending with run_at passed, or running with an expired lease).
    """
    if not slot["ordered"]:
        return [(r["id"], r["run_at"], r["attempts"]) for r in db.execute(
            Q["due_jobs"], {"destination_id": slot["id"], "now": now,
                            "limit": min(slot["free"], limit)})]
    head = db.execute(Q["ordered_head"], {"destination_id": slot["id"]}).fetchone()
    if head is None:
        return []
    if head["status"] == "pending" and head["run_at"] <= now:
        return [(head["id"], head["run_at"], head["attempts"])]
    if head["status"] == "running" and head["lease_until"] <= now:
        return [(head["id"], head["lease_until"], head["attempts"])]
    return []


def _track_failure_run(db: sqlite3.Connection, claim: Claim, result: AttemptResult,
                       now: float, breaker: BreakerPolicy | None) -> tuple[str, str, int] | None:
    """Update the destination's failure run; pause it when the breaker says so.

    Returns (destination name, reason, failure streak) when this call paused it.
    """
    params = {"destination_id": claim.destination_id, "now": now}
    if not is_failure(result):
        db.execute(Q["destination_succeeded"], params)
        return None
    run = db.execute(Q["destination_failed"], params).fetchone()
    if run is None or breaker is None or run["paused"]:
        return None
    reason = auto_pause_reason(result, run["url"], run["failure_streak"], run["failing_since"],
                               now, breaker)
    if reason is None or db.execute(Q["auto_pause"], {**params, "reason": reason}).rowcount == 0:
        return None
    return run["name"], reason, run["failure_streak"]


def _finish_one(db: sqlite3.Connection, claim: Claim, outcome: Outcome, result: AttemptResult,
                now: float) -> bool:
    fence = {"job_id": claim.job_id, "lease_token": claim.lease_token, "now": now}
    db.execute(Q["record_attempt"], {
        "lease_token": claim.lease_token, "started_at": result.started_at,
        "duration_s": result.duration_s, "status_code": result.status_code,
        "error": result.error, "response_excerpt": result.response_excerpt,
        "response_headers": result.response_headers, "location": result.location})
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


def _check_replayable(db: sqlite3.Connection, job_id: int) -> None:
    """Raise NotFound or Conflict when one job cannot be replayed (see Store.replay)."""
    row = db.execute(Q["replay_job_state"], {"job_id": job_id}).fetchone()
    if row is None:
        raise NotFound(f"no job with id {job_id}")
    if row["status"] != "dead":
        raise Conflict(f"job {job_id} is {row['status']}, not dead; only dead jobs are replayed")
    if row["body_purged_at"] is not None:
        raise Conflict(f"job {job_id} cannot be replayed: its event body was purged by "
                       "retention")
    if row["deleted_at"] is not None:
        raise Conflict(f"job {job_id} cannot be replayed: its destination was removed")


_LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400)


def _latency(row: sqlite3.Row) -> LatencyHistogram:
    """The `delivery_latency` row as a histogram (columns le_<bound with _ for .>)."""
    def column(bound: float) -> str:
        return "le_" + (f"{bound:g}").replace(".", "_")

    return LatencyHistogram(
        buckets=tuple((float(b), row[column(b)] or 0) for b in _LATENCY_BUCKETS_S),
        count=row["n"], sum_s=float(row["total"]))


def _wal_bytes(path: str) -> int | None:
    """Size of the database's -wal file in bytes; 0 when it does not exist."""
    try:
        return os.path.getsize(path + "-wal")
    except FileNotFoundError:
        return 0


def _split_statements(script: str) -> list[str]:
    """Split a migration script on `;` at line ends (our migrations hold no triggers)."""
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]



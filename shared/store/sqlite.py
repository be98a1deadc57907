"""The SQLite store: one database file in WAL mode, shared by every local process.

Each store method runs its whole transaction as ONE call on aiosqlite's database thread
(:meth:`SqliteStore._run`): one thread hop per transaction rather than one per statement,
which is what makes group commit pay off. Write transactions start with BEGIN IMMEDIATE so
a writer waits for the lock (busy_timeout) at the start instead of failing with SQLITE_BUSY
mid-way, and they hold the lock only for their statements, never across network I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import aiosqlite

from hookline.shared.db_url import sqlite_path
from hookline.shared.errors import (
    Conflict,
    DatabaseMissing,
    StoreBusy,
    StoreError,
    StoreUnavailable,
)
from hookline.shared.faults import sqlite_fault
from hookline.shared.store.checks import (
    check_database_folder,
    enable_wal,
    refuse_network_filesystem,
)
from hookline.shared.store.clock import StoreClock, anchor_at_open
from hookline.shared.store.health import StoreHealth
from hookline.shared.store.logic import StoreLogic, log_migrated
from hookline.shared.store.ops import (
    AfterCommit,
    BeginWrite,
    Durable,
    Finished,
    Notify,
    Now,
    Query,
    Rows,
    Tx,
    advance,
)
from hookline.shared.store.queries import load_migrations, load_queries
from hookline.shared.store.sqlite_rows import (
    STATEMENT_CACHE_SIZE,
    TableShape,
    insert_rows,
    row_insert,
)
from hookline.shared.store.wakeup import WakeListener, WakeNotifier, wake_dir_for
from hookline.shared.store.wal_health import WalHealth
from hookline.shared.store.write_lock import DurationHistogram, WriteLock

T = TypeVar("T")
Q = load_queries("sqlite")
WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024
"""journal_size_limit: a -wal file left above this after a checkpoint reset is truncated."""
MAINTENANCE_BUSY_TIMEOUT_MS = 100
"""How long Store.maintenance's checkpoint waits for the lock or for readers, milliseconds."""
SCHEMA_VERSION = max(version for version, _ in load_migrations("sqlite"))
WAL_DEGRADED_BYTES = 256 * 1024 * 1024
"""Default of Config.wal_degraded_bytes: past this after a checkpoint, health is degraded."""


class SqliteStore(StoreLogic):
    """:class:`hookline.shared.store.Store` on a SQLite file (see the module docstring); the
    transactions themselves are :class:`hookline.shared.store.logic.StoreLogic`'s.

    Args:
        path: the database file; created (mode 0600) with its schema when missing.
        synchronous: `FULL` (default: a commit survives power loss) or `NORMAL`.
        busy_timeout_s: how long a statement waits for the write lock before StoreBusy.
        clock: unix-seconds clock; tests may pass a fake one. None (production): the
            host's monotonic clock anchored in the database (:mod:`hookline.shared.store.clock`),
            the same in every process and never moved by a wall-clock step; it is read through
            `self.clock`, the store's one source of "now".
        allow_network_filesystem: accept a folder on a network or FUSE filesystem (see
            :func:`hookline.shared.store.checks.refuse_network_filesystem`).
        create: create the file when it is missing (the service, `hookline init`); False
            makes :meth:`open` raise DatabaseMissing instead (every other command).
        wal_degraded_bytes: past this size after a checkpoint the `-wal` file makes
            :meth:`health` degraded (0: never), bytes.
        inline: run each transaction on the calling event loop's thread (the write lock
            awaited without blocking it) instead of on the store's own thread. For a
            process whose loop may pause for a transaction (a worker: its sends are in
            flight meanwhile): no hand-off to the database thread, no GIL handed back and
            forth at every statement, so the write lock is held for less time. A
            transaction's statements, COMMIT and fsync then run on the loop; SQLite's own
            busy handler holds it while ingest's periodic TRUNCATE checkpoint runs (a few
            to a few hundred milliseconds, see :meth:`maintenance`), and up to
            `busy_timeout_s` if a writer outside hookline (the sqlite3 shell) holds the
            database. Not for ingest, whose loop answers HTTP meanwhile.
    """

    SHARED_WRITE_LOCK = True

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_s: float = 5.0,
                 clock: Callable[[], float] | None = None,
                 allow_network_filesystem: bool = False, create: bool = True,
                 wal_degraded_bytes: int = WAL_DEGRADED_BYTES, inline: bool = False) -> None:
        self.path = path
        self._inline = inline
        self._wal = WalHealth(db_path=path, limit_bytes=wal_degraded_bytes)
        self._create = create
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
        self._wal_fd: int | None = None  # the WAL's, once a DURABLE commit synced it

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the file, set pragmas, apply migrations.

        Raises:
            DatabaseMissing: the file does not exist and the store was built with
                `create=False`. StoreError: the file is unusable. StorageRefused: it cannot
                keep the delivery promise (an in-memory path, a folder that does not
                exist, is world-writable or, for a new file, not writable, a network or
                FUSE folder without the opt-in, a journal mode that stays out of WAL); see
                :mod:`hookline.shared.store.checks`.
        """
        sqlite_path(self.path)  # SqliteStore built directly, not through open_store
        refuse_network_filesystem(self.path, allowed=self._allow_network_filesystem)
        exists = os.path.exists(self.path)  # noqa: ASYNC240  (once, at open)
        if not exists and not self._create:
            raise DatabaseMissing(os.path.abspath(self.path))  # noqa: ASYNC240  (once, at open)
        check_database_folder(self.path, writable=not exists)
        if not exists:
            # Create the file 0600 before SQLite does: it holds destination secrets.
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        try:
            self._conn = await aiosqlite.connect(self.path, isolation_level=None,
                                                 check_same_thread=False,
                                                 cached_statements=STATEMENT_CACHE_SIZE,
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
        db.table_shapes = {}  # sqlite_rows.table_shape: read once per table
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        enable_wal(db, self.path)
        db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
        db.execute(f"PRAGMA synchronous = {self._synchronous}")
        # Off while migrating: a step that rebuilds a table (SQLite cannot drop a constraint
        # in place) drops the old one under its children's references; _migrate checks
        # every reference before it commits.
        db.execute("PRAGMA foreign_keys = OFF")
        self._migrate(db)
        db.execute("PRAGMA foreign_keys = ON")
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
            missing = [(version, script) for version, script in load_migrations("sqlite")
                       if version not in applied]
            for version, script in missing:
                for statement in _split_statements(script):
                    db.execute(statement)
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
            broken = db.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise StoreError(f"migration left {len(broken)} broken references (first: "
                                 f"{tuple(broken[0])}); the database is unchanged")
        if missing:
            self.migrated_from = current
            if applied:  # not a new schema
                log_migrated(current, SCHEMA_VERSION, self.path)

    async def close(self) -> None:
        """Close the connection and the wake-up sockets (idempotent)."""
        if self._listener is not None:
            self._listener.close(remove_empty_directory=True)
            self._listener = None
        if self._notifier is not None:
            self._notifier.close()
            self._notifier = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        if self._wal_fd is not None:
            os.close(self._wal_fd)
            self._wal_fd = None

    def write_lock_waits(self) -> DurationHistogram | None:
        """See :meth:`hookline.shared.store.SqliteDiagnostics.write_lock_waits`."""
        return None if self._write_lock is None else self._write_lock.waits

    def write_lock_stats(self) -> dict[str, dict[str, float | int]] | None:
        """See :meth:`hookline.shared.store.SqliteDiagnostics.write_lock_stats`: this connection's
        waits for the cross-process write lock and how long it held it
        (shared/store/write_lock.py)."""
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
        with self._faults():
            # aiosqlite has no public "run this function on your thread" call; _execute is it
            # (tests/unit/test_dependency_contracts.py fails when it changes).
            execute: Callable[[Callable[[], T]], Awaitable[T]] = conn._execute  # noqa: SLF001  (aiosqlite's only run-on-thread call)
            return await execute(lambda: fn(conn._conn))  # noqa: SLF001  (the connection the thread owns)

    def _connection(self) -> sqlite3.Connection:
        """The open sqlite3 connection itself (an inline store uses it from the event loop;
        the database thread then stays idle)."""
        if self._conn is None:
            raise StoreError("store is not open")
        return self._conn._conn  # noqa: SLF001  (the connection aiosqlite's thread owns)

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """Driver errors as the store's faults: busy, disk full, read-only are
        StoreUnavailable (retried); any other error goes on as it is."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            fault = sqlite_fault(exc, self.path)
            if isinstance(fault, StoreUnavailable):
                raise fault from exc
            raise

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive the store transaction `tx` to its end in ONE call on the database thread, or
        (an `inline` store) on the event loop's own thread, its write lock awaited first.

        A write transaction (or a read one from its BEGIN_WRITE on) holds the write lock and
        runs between BEGIN IMMEDIATE and COMMIT; a read runs each statement on its own
        snapshot, taking no lock. `now` is read once, here, for the whole transaction.
        """
        now = self.clock()
        after: list[AfterCommit] = []
        notify = durable = False
        name = getattr(tx, "__name__", "write")  # the generator function's: add_events_tx

        def answer(db: sqlite3.Connection, step: Any) -> Any:
            """Run one step other than BEGIN_WRITE; its answer for the transaction."""
            nonlocal notify, durable
            if isinstance(step, Query):
                return _execute(db, step, now)
            if isinstance(step, Now):
                return now
            if isinstance(step, Notify):
                notify = True
            elif isinstance(step, Durable):
                durable = True
            elif isinstance(step, AfterCommit):  # OrderedMarks, GiveWay: one writer, no wait
                after.append(step)
            return None

        def until_write(db: sqlite3.Connection, step: Any) -> Any:
            """Answer steps until the end, or until a BEGIN_WRITE that needs the lock."""
            while not isinstance(step, Finished):
                if isinstance(step, BeginWrite):
                    if not write:
                        return step
                    step = advance(tx, None)
                else:
                    step = advance(tx, answer(db, step))
            return step

        def drive(db: sqlite3.Connection) -> T:
            nonlocal write
            with contextlib.ExitStack() as writing:  # COMMIT, or ROLLBACK on an error
                step: Any = None if write else until_write(db, advance(tx, None))
                if write or isinstance(step, BeginWrite):
                    write = True
                    writing.enter_context(_write(db, name))
                    step = until_write(db, advance(tx, None) if step is None else step)
            self._wake_workers(notify)
            value: T = step.value
            return value

        async def drive_inline(db: sqlite3.Connection) -> T:
            # No await from the lock's taking to the COMMIT: nothing else of this process
            # can use the connection (or the lock, which flock would grant it again) between.
            nonlocal write
            with contextlib.ExitStack() as writing:
                step: Any = None if write else until_write(db, advance(tx, None))
                if write or isinstance(step, BeginWrite):
                    write = True
                    writing.enter_context(await self._locked_write(db, name))
                    step = until_write(db, advance(tx, None) if step is None else step)
            self._wake_workers(notify)
            value: T = step.value
            return value

        if self._inline:
            with self._faults():
                result = await drive_inline(self._connection())
        else:
            result = await self._run(drive)
        unsynced: StoreError | None = None
        if durable and self._synchronous != "FULL":
            # Outside the write lock; off the event loop (a worker's) for the fsync's wait.
            try:
                await asyncio.to_thread(self._sync_wal)
            except StoreError as exc:
                unsynced = exc  # raised once the committed steps' own ends have run
        for step in after:
            step.fn()
        if unsynced is not None:
            raise unsynced
        return result

    def _sync_wal(self) -> None:
        """Make every commit so far survive a power loss (a commit made with synchronous
        NORMAL is in the WAL file, not yet synced): fdatasync the WAL, as a FULL commit
        does. The WAL is the one beside the database file's real path (SQLite follows a
        symlinked database file); it exists while this connection is open, and its
        descriptor stays open until close, so a write-back error the kernel reports once
        is reported to this sync.

        Raises:
            StoreError: the WAL could not be opened or synced (the disk's error). Permanent:
                after a failed sync the kernel may have dropped the unwritten pages and a
                later sync would report success, so nothing this store commits can be
                trusted to last; a worker stops (and is respawned with backoff). What the
                transaction committed is not acted on: a claim's jobs are not sent, and
                are taken over once their leases expire.
        """
        try:
            if self._wal_fd is None:
                self._wal_fd = os.open(os.path.realpath(self.path) + "-wal", os.O_RDONLY)
            os.fdatasync(self._wal_fd)
        except OSError as exc:
            raise StoreError(f"cannot sync the WAL of {self.path}: {exc} (check the disk: "
                             "its writes may be lost)") from exc

    async def _locked_write(self, db: sqlite3.Connection, name: str) -> _write:
        """The write lock taken without blocking the event loop, and a `_write` context that
        begins the transaction under it (and releases it at COMMIT or ROLLBACK)."""
        if self._write_lock is not None:
            await self._write_lock.acquire_async()
        return _write(db, name, locked=True)

    def _wake_workers(self, notify: bool) -> None:
        """Committed: wake the workers from the transaction's own thread (on the database
        thread, ingest's event loop then makes no system call for it)."""
        notifier = self._notifier  # read once: close() may clear it meanwhile
        if notify and notifier is not None:
            notifier.notify()

    async def health(self) -> StoreHealth:
        """See :meth:`hookline.shared.store.Store.health`: the `-wal` file's size now and its state
        as of the last :meth:`maintenance` round
        (:class:`hookline.shared.store.wal_health.WalHealth`)."""
        return self._wal.health()

    def wal_bytes(self) -> int:
        """See :meth:`hookline.shared.store.SqliteDiagnostics.wal_bytes`."""
        return _wal_bytes(self.path)

    async def wait_for_jobs(self, timeout_s: float) -> bool:
        """See :meth:`hookline.shared.store.Store.wait_for_jobs` (a local datagram wake-up). The
        first call binds the wake-up socket, then returns True at once if due work is already
        waiting: a commit that happened before the socket existed poked nobody."""
        if self._listener is None:
            self._listener = WakeListener(wake_dir_for(self.path))
            try:
                due = await self._due_work_exists()
            except StoreBusy:
                due = False  # the poll finds it instead
            if due:
                return True
        return await self._listener.wait(timeout_s)

    def pass_on_wake_up(self) -> None:
        """See :meth:`hookline.shared.store.Store.pass_on_wake_up`."""
        listener, notifier = self._listener, self._notifier
        if listener is not None and notifier is not None:
            notifier.pass_on(str(listener.path), listener.take_passes())

    async def maintenance(self) -> dict[str, int]:
        """See :meth:`hookline.shared.store.SqliteDiagnostics.maintenance`.

        The checkpoint runs on its own short-lived connection in a worker thread, not on
        the store's thread: a TRUNCATE checkpoint waits (here at most
        MAINTENANCE_BUSY_TIMEOUT_MS) for readers, and must not stall ingest's transactions.
        Its result is judged against `wal_degraded_bytes` in that thread too (a scan of
        /proc when it is past: :meth:`hookline.shared.store.wal_health.WalHealth.assess`).
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
            result = {"busy": int(busy), "log_frames": int(log_frames),
                      "checkpointed_frames": int(done), "wal_bytes": _wal_bytes(self.path)}
            self._wal.assess(result)
            return result

        return await asyncio.to_thread(checkpoint)

    async def check_writable(self) -> None:
        """See :meth:`hookline.shared.store.Store.check_writable`."""
        def probe(db: sqlite3.Connection, locked: bool = False) -> None:
            lock = getattr(db, "write_lock", None)
            if lock is not None and not locked:
                lock.acquire()
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
            finally:
                if lock is not None:
                    lock.release()

        try:
            if self._inline:  # the loop must not block polling for the lock
                db = self._connection()
                if self._write_lock is not None:
                    await self._write_lock.acquire_async()
                probe(db, locked=True)
            else:
                await self._run(probe)
        except sqlite3.Error as exc:
            raise sqlite_fault(exc, f"database {self.path} is not writable") from exc


class _LockingConnection(sqlite3.Connection):
    """A sqlite3 connection carrying the cross-process :class:`WriteLock` of its database."""

    write_lock: WriteLock | None = None
    table_shapes: dict[str, TableShape] | None = None

    def close(self) -> None:
        """Close the connection and its lock file."""
        super().close()
        if self.write_lock is not None:
            self.write_lock.close()
            self.write_lock = None


class _write:
    """Context manager: write lock, BEGIN IMMEDIATE ... COMMIT (or ROLLBACK), unlock.
    `transaction` names it in the log when it held the lock long (WriteLock.release);
    `locked`: the caller took the lock already (it is still released here)."""

    def __init__(self, db: sqlite3.Connection, transaction: str = "write", *,
                 locked: bool = False) -> None:
        self.db = db
        self.lock = getattr(db, "write_lock", None)
        self.transaction = transaction
        self.locked = locked

    def __enter__(self) -> sqlite3.Connection:
        if self.lock is not None and not self.locked:
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
                self.lock.release(self.transaction)


def _execute(db: sqlite3.Connection, op: Query, now: float) -> Any:
    """Run one named query with the transaction's `now`; a batch goes in as JSON text."""
    params: dict[str, Any] = {"now": now}
    if op.per_row:  # in-process, a statement costs no round trip: no arrays, no JSON
        [batch] = [v for v in op.params.values() if isinstance(v, Rows)]
        sql, columns = Q[op.name], batch.columns
        insert = row_insert(sql)
        if insert is not None:  # an insert: the whole batch in a few statements
            return insert_rows(db, insert, columns, batch.rows, params)
        found: list[Any] = []
        for row in batch.rows:
            params.update(zip(columns, row, strict=True))  # every row sets every column
            found += db.execute(sql, params)
        return found
    for name, value in op.params.items():
        if isinstance(value, Rows):
            params[name] = json.dumps([list(row) for row in value.rows])
        elif isinstance(value, list | tuple):
            params[name] = json.dumps(list(value))
        else:
            params[name] = value
    try:
        cursor = db.execute(op.sql or Q[op.name], params)
    except sqlite3.IntegrityError as exc:
        if op.taken is not None and "UNIQUE" in str(exc):
            raise Conflict(op.taken) from exc
        raise
    if op.want == "count":
        return cursor.rowcount
    if op.want == "one":
        return cursor.fetchone()
    return cursor.fetchall()


def _wal_bytes(path: str) -> int:
    """Size of the database's -wal file in bytes; 0 when it does not exist."""
    try:
        return os.path.getsize(path + "-wal")
    except FileNotFoundError:
        return 0


def _split_statements(script: str) -> list[str]:
    """Split a migration script into its statements, each ending with a line whose `;`
    completes it (sqlite3.complete_statement: a trigger's body ends only at its END;);
    whole-line comments dropped."""
    statements: list[str] = []
    pending: list[str] = []
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        pending.append(line)
        text = "\n".join(pending).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            pending = []
    rest = "\n".join(pending).strip()
    return [s for s in [*statements, rest] if s.rstrip(";").strip()]



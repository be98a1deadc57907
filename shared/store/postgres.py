"""The PostgreSQL store: many hookline hosts sharing one server.

Same contract as :class:`hookline.shared.store.sqlite.SqliteStore` (shared/store/__init__.py), with
what a shared server needs:

* **Time is the database's.** Every lease and run_at decision reads `hookline_now()`
  (`now()` in unix seconds, a function from migration 001), never a host clock, so clock skew
  between hosts cannot steal leases; a worker's `Retry` carries a delay, added to it. A
  query's `:now` means `hookline_now(:test_now_s)` (see :func:`_convert`), so a query whose
  text is otherwise the same in both dialects is written once (common.sql).
* **Claims** lock the destinations they serve (row locks, in id order), read the in-flight
  count only once those locks are held (so `max_in_flight` holds across hosts), pick due jobs
  with `FOR UPDATE SKIP LOCKED`, and lease the chosen batch in one `UPDATE` that gives each
  job a fresh token. The locks last the few milliseconds of the claim transaction.
* **Wake-ups** are LISTEN/NOTIFY on channel `hookline_jobs`; `pg_notify` runs inside the
  transaction that creates due work (delivered at commit). Waiters listen on a dedicated
  connection and fall back to polling when it is gone; that connection is pinged every
  few seconds and replaced when it stops answering (a silent network never closes it).
* **Every wait is bounded** (shared/store/pg_limits.py): connect, pool acquire and each whole
  transaction have deadlines; a connection that missed one is terminated, never reused, and
  the pool's other connections are replaced too (they crossed the same network); the server
  ends a session whose client went silent mid-transaction, releasing its locks.

Test-only: `clock` replaces the database's clock by `clock()` in every query, so tests can
move time on both backends. Production code never passes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from functools import cache
from typing import Any, TypeVar

import asyncpg

from hookline.shared.db_url import redact_url
from hookline.shared.errors import (
    ConfigError,
    Conflict,
    HooklineError,
    LockUnavailable,
    StoreBusy,
    StoreError,
    StoreUnavailable,
)
from hookline.shared.logs import get_logger, process_label
from hookline.shared.store.health import StoreHealth
from hookline.shared.store.logic import StoreLogic, log_migrated
from hookline.shared.store.ops import (
    AfterCommit,
    Finished,
    GiveWay,
    Notify,
    Now,
    OrderedMarks,
    Query,
    Rows,
    Tx,
    advance,
)
from hookline.shared.store.pg_limits import CLIENT_CHECK_SETTING, PostgresLimits
from hookline.shared.store.queries import load_migrations, load_queries

T = TypeVar("T")
_NAMEDATALEN = 63  # the longest application_name the server keeps, bytes
# asyncpg's pool logs a warning with a traceback each time it fails to reconnect its idle
# connections (every 1 s doubling to 60 s while the server is away); each hookline process
# already logs one store_unavailable / store_recovered pair per outage (shared/faults.py).
logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)
CHANNEL = "hookline_jobs"
SCHEMA_VERSION = max(version for version, _ in load_migrations("postgres"))
# Any constant: serialises migrations of concurrently starting processes.
_MIGRATION_LOCK = 0x686F6F6B
# Another constant: jobs.ordered's guard (ops.OrderedMarks), shared by writers of jobs and
# taken alone by a change of a destination's `ordered`.
ORDERED_MARKS_LOCK = 0x686F6F6C
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
_NOW = re.compile(r"(?<![:\w]):now\b")
"""The transaction's instant as both dialects spell it; here the database's clock."""
LISTEN_CHECK_INTERVAL_S = 5.0
"""How often the LISTEN connection is pinged (a frozen one would never say it is gone)."""


@cache
def _query(name: str) -> tuple[str, tuple[str, ...]]:
    """The named query with :params turned into $n, and the parameter names in $n order."""
    return _convert(load_queries("postgres")[name])


def _convert(text: str) -> tuple[str, tuple[str, ...]]:
    """SQL with :params turned into $n (`:now` first into `hookline_now(:test_now_s)`), and
    the parameter names in $n order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = "\n".join(line for line in text.splitlines()
                      if not line.lstrip().startswith("--"))
    sql = _PARAM.sub(number, _NOW.sub("hookline_now(:test_now_s)", text))
    return sql, tuple(names)


_RUNNING_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError,
                   asyncpg.InternalClientError)
"""What a statement on an open pool may raise. InternalClientError: a connection the server
dropped mid-operation can leave asyncpg's protocol in a state it then refuses to leave."""
_DRIVER_ERRORS = (*_RUNNING_ERRORS, ValueError, OverflowError)
"""What opening a pool may raise as well (ValueError, OverflowError: a malformed URL)."""

# SQLSTATE classes and codes after which the same request may succeed later (the server
# restarts, fails over, sheds load, or a standby is promoted). Everything about who we are
# or which database we want (28xxx, 3D000, 57P04) is permanent: an operator must fix it.
_TRANSIENT_SQLSTATE_CLASSES = ("08", "53")  # connection exception; insufficient resources
_TRANSIENT_SQLSTATES = frozenset({
    "57P01",  # admin_shutdown (pg_ctl stop -m fast)
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now (starting up, shutting down, in recovery)
    "57P05",  # idle_session_timeout
    "25006",  # read_only_sql_transaction (hot standby, read-only database)
    "40001",  # serialization_failure
})
_BUSY_SQLSTATES = frozenset({
    "40P01",  # deadlock_detected
    "55P03",  # lock_not_available
    "57014",  # query_canceled (statement_timeout, lock_timeout)
})


def _error_text(exc: BaseException) -> str:
    """`TimeoutError: no answer in time` for a timeout (its own text is empty), else the
    exception's class and text, as logs and errors show a driver's fault."""
    return f"{type(exc).__name__}: {str(exc) or 'no answer in time'}"


def driver_fault(exc: BaseException, what: str) -> HooklineError | None:
    """Classify a driver error once for the whole backend (see shared/faults.py).

    Args:
        exc: what asyncpg (or the socket below it) raised.
        what: the start of the message, e.g. "cannot connect to postgresql://host/db".

    Returns:
        StoreBusy for lock waits and deadlocks; StoreUnavailable for a server that is
        unreachable, restarting, overloaded or read-only; ConfigError for a malformed URL;
        StoreError (permanent) for authentication failures and a missing or dropped
        database; None for anything else (e.g. a failed statement: the caller decides).
    """
    sqlstate = getattr(exc, "sqlstate", None) if isinstance(exc, asyncpg.PostgresError) else None
    if sqlstate == "55P03":  # lock_not_available: NOWAIT, or a lock_timeout
        return LockUnavailable(f"database busy: {exc}")
    if sqlstate in _BUSY_SQLSTATES:
        return StoreBusy(f"database busy: {exc}")
    if isinstance(exc, (OSError, TimeoutError)):
        # A timeout's own text is empty; either way, say what to check.
        return StoreUnavailable(f"{what}: {_error_text(exc)} (is the server up, and "
                                "reachable from this host?)")
    if sqlstate is not None and (sqlstate in _TRANSIENT_SQLSTATES
                                 or sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES):
        return StoreUnavailable(f"{what}: {type(exc).__name__}: {exc}")
    if isinstance(exc, (ValueError, OverflowError)):  # ClientConfigurationError is a ValueError
        return ConfigError(f"{what}: the database URL is not valid: {exc}")
    if isinstance(exc, (asyncpg.InterfaceError, asyncpg.InternalClientError)):
        # The connection was closed under us, the pool reset, the protocol confused by it.
        return StoreUnavailable(f"{what}: {type(exc).__name__}: {exc}")
    if sqlstate is not None and (sqlstate[:2] == "28" or sqlstate in ("3D000", "57P04")):
        return StoreError(f"{what}: {exc} (check the user, password and database name in "
                          "the db setting)")
    return None


class PostgresStore(StoreLogic):
    """:class:`hookline.shared.store.Store` on a PostgreSQL server (see the module docstring); the
    transactions themselves are :class:`hookline.shared.store.logic.StoreLogic`'s.

    Args:
        dsn: a `postgresql://` or `postgres://` URL (libpq syntax, as asyncpg reads it).
        pool_size: most connections this process keeps (each transaction holds one).
        connect_timeout_s: how long opening a connection may take, seconds (overrides
            `limits.connect_timeout_s` when given).
        limits: every deadline, server-side limit and keepalive (defaults when None).
        clock: TEST ONLY: a unix-seconds clock that replaces the database's clock.

    Attributes:
        timeouts: store calls of this process that missed a deadline (a silent network or
            a stuck server); exported as `hookline_store_timeouts_total`.
    """

    LOCKS_DESTINATIONS = True
    DUE_TIES_IN_ID_ORDER = False  # jobs_due orders equal run_at by heap position
    FINISH_AND_CLAIM_TOGETHER = False

    def __init__(self, dsn: str, *, pool_size: int = 4, connect_timeout_s: float | None = None,
                 limits: PostgresLimits | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.dsn = dsn
        self._pool_size = pool_size
        limits = limits or PostgresLimits()
        if connect_timeout_s is not None:
            limits = dataclasses.replace(limits, connect_timeout_s=connect_timeout_s)
        self.limits = limits
        self.timeouts = 0
        self.give_way_lock_timeout_s = 0.5
        """How long an operator's change that gives way (ops.GiveWay: removing a destination
        or a tenant's destinations, turning a destination ordered) waits for any lock,
        seconds: below the server's deadlock check (1 s by default), so where its waits meet
        a worker's it is the one given up (StoreBusy), and ingest's writes of jobs, queued
        behind the ordered guard, wait no longer than that for it to be granted."""
        self._refused_settings: set[str] = set()  # late settings this server refused
        self._listen_checked_at = 0.0
        self._clock = clock
        self._pool: asyncpg.Pool | None = None
        self._listen_conn: asyncpg.Connection | None = None
        self._woken = asyncio.Event()
        self._listen_lock = asyncio.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and apply pending migrations. Raises StoreError when the server is
        unreachable, refuses us, or holds a newer schema."""
        try:
            # The first connection is opened here: bounded like any other (init included).
            self._pool = await asyncio.wait_for(asyncpg.create_pool(
                self.dsn, min_size=1, max_size=self._pool_size,
                timeout=self.limits.connect_timeout_s,
                command_timeout=self.limits.command_timeout_s,
                server_settings=self._session_settings(), init=self._init_connection,
                reset=self._reset_connection),
                self.limits.connect_timeout_s + self.limits.acquire_timeout_s)
        except _DRIVER_ERRORS as exc:
            what = f"cannot connect to {redact_url(self.dsn)}"
            raise (driver_fault(exc, what) or StoreError(f"{what}: {exc}")) from exc
        try:
            await self._migrate()
        except _DRIVER_ERRORS as exc:
            await self.close()
            what = f"cannot migrate {redact_url(self.dsn)}"
            raise (driver_fault(exc, what) or StoreError(f"{what}: {exc}")) from exc
        except BaseException:
            await self.close()
            raise

    async def _migrate(self) -> None:
        if self._pool is None:
            raise StoreError("store is not open")
        async with self._pool.acquire(timeout=self.limits.acquire_timeout_s) as conn, \
                conn.transaction():
            # A migration may wait for another process's (the advisory lock) and rewrite big
            # tables: the session's statement and lock timeouts are not for it.
            await conn.execute("SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0")
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
            applied = {r[0] for r in await conn.fetch("SELECT version FROM schema_version")}
            if applied and max(applied) > SCHEMA_VERSION:
                raise StoreError(f"database schema version {max(applied)} is newer than this "
                                 f"hookline ({SCHEMA_VERSION}); upgrade hookline")
            # Every missing step, in order (numbers are shared with the SQLite migrations and
            # may land out of order while both backends are developed).
            missing = [(version, script) for version, script in load_migrations("postgres")
                       if version not in applied]
            for version, script in missing:
                await conn.execute(script)
                await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", version)
        if missing:
            self.migrated_from = max(applied, default=0)
            if applied:  # not a new schema
                log_migrated(max(applied), SCHEMA_VERSION, redact_url(self.dsn))

    async def close(self) -> None:
        """Close the listener connection and the pool (idempotent)."""
        if self._listen_conn is not None:
            conn, self._listen_conn = self._listen_conn, None
            try:
                await conn.close(timeout=2)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                conn.terminate()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), timeout=5)
            except (TimeoutError, OSError, asyncpg.PostgresError):
                pool.terminate()

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing --------------------------------------------------------------------------

    def _test_now(self) -> float | None:
        """The pinned time of a test clock, else None (the database's clock decides)."""
        return None if self._clock is None else self._clock()

    async def _init_connection(self, conn: asyncpg.Connection) -> None:
        """Each new connection: keepalives and TCP_USER_TIMEOUT on our socket, and the
        session settings only newer servers know (shared/store/pg_limits.py)."""
        # asyncpg offers no socket options; its transport is the only way to the socket.
        transport = conn._transport  # noqa: SLF001  (asyncpg offers no socket options)
        if transport is not None:
            self.limits.configure_socket(transport.get_extra_info("socket"))
        for name, value in self._late_settings(conn).items():
            try:
                await conn.execute("SELECT set_config($1, $2, false)", name, value)
            except asyncpg.InvalidParameterValueError:
                if name != CLIENT_CHECK_SETTING:
                    raise
                # A platform where the server cannot tell a closed socket mid-query: do
                # without (a killed worker's locks then last until its statement ends).
                self._refused_settings.add(name)

    async def _reset_connection(self, conn: asyncpg.Connection) -> None:
        """Each connection going back to the pool: asyncpg's own reset query, then the late
        settings again, in the same round trip. Its `RESET ALL` returns a setting made after
        connecting (the server's `tcp_user_timeout`) to the server's default; those of the
        startup packet survive it."""
        await conn.execute(conn.get_reset_query() + "".join(
            f"\nSET {name} = '{value}';"  # our own numbers
            for name, value in self._late_settings(conn).items()))

    def _late_settings(self, conn: asyncpg.Connection) -> dict[str, str]:
        """The late settings (PostgresLimits.late_settings) for `conn`'s server, less those
        it refused."""
        late = self.limits.late_settings(conn.get_server_version().major)
        return {k: v for k, v in late.items() if k not in self._refused_settings}

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[_Tx]:
        """One transaction on a pooled connection, within limits.transaction_timeout_s from
        acquire to commit; driver errors become StoreError types.

        A connection whose state is unknown afterwards (a deadline passed, the caller was
        cancelled, the network failed) is terminated, never returned to the pool for reuse;
        a statement's own error (constraint, lock timeout) is rolled back and the connection
        kept.
        """
        if self._pool is None:
            raise StoreError("store is not open")
        pool = self._pool
        conn: Any = None
        reusable = False
        try:
            async with asyncio.timeout(self.limits.transaction_timeout_s):
                conn = await pool.acquire(timeout=self.limits.acquire_timeout_s)
                tx = conn.transaction()
                await tx.start()
                try:
                    yield _Tx(conn, self._test_now(), self.give_way_lock_timeout_s)
                except (Exception, asyncio.CancelledError) as exc:
                    if isinstance(exc, asyncpg.PostgresError | HooklineError):
                        await tx.rollback()  # the server answered: the connection is sound
                        reusable = True
                    raise
                await tx.commit()
                reusable = True
        except TimeoutError as exc:  # a deadline passed (a silent network, a stuck server)
            await self._timed_out("transaction", exc)
            raise StoreUnavailable(
                "database did not answer in time (pg_acquire_timeout_s "
                f"{self.limits.acquire_timeout_s:g} s, pg_transaction_timeout_s "
                f"{self.limits.transaction_timeout_s:g} s); the connection was closed") from exc
        except _RUNNING_ERRORS as exc:
            fault = driver_fault(exc, "database connection failed")
            if fault is None:
                raise  # a statement's own error (constraint, bug): not ours to classify
            raise fault from exc
        finally:
            if conn is not None:
                # A connection the server dropped (AdminShutdown, a reset) has already been
                # handed back to the pool by asyncpg, and its proxy refuses both calls then.
                with contextlib.suppress(*_RUNNING_ERRORS):
                    if not reusable:
                        conn.terminate()  # released at once below, replaced on a later acquire
                    await pool.release(conn, timeout=self.limits.acquire_timeout_s)

    async def _timed_out(self, what: str, exc: BaseException) -> None:
        """Count and log a missed deadline, and have the pool replace every connection
        (the idle ones crossed the same network and may be frozen too)."""
        self.timeouts += 1
        get_logger().warning("store_timeout", during=what, timeouts=self.timeouts,
                             limit_s=self.limits.transaction_timeout_s,
                             error=_error_text(exc))
        if self._pool is not None:
            await self._pool.expire_connections()

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive the store transaction `tx` on one pooled connection (`write` does not
        matter here: every transaction may write, and row locks are taken per statement)."""
        after: list[AfterCommit] = []
        async with self._tx() as conn:
            step = advance(tx, None)
            while not isinstance(step, Finished):
                answer: Any = None
                if isinstance(step, Query):
                    answer = await conn.run(step)
                elif isinstance(step, Now):
                    answer = await conn.now()
                elif isinstance(step, Notify):
                    await conn.notify()
                elif isinstance(step, OrderedMarks):
                    await conn.guard_marks(exclusive=step.exclusive)
                elif isinstance(step, GiveWay):
                    await conn.give_way()
                elif isinstance(step, AfterCommit):
                    after.append(step)
                # BeginWrite: nothing to do, the transaction is open; Durable: every commit
                # here waits for the server's WAL flush (synchronous_commit)
                step = advance(tx, answer)
        for done in after:
            done.fn()
        return step.value

    async def wait_for_jobs(self, timeout_s: float) -> bool:
        """See :meth:`hookline.shared.store.Store.wait_for_jobs`: LISTEN on a dedicated connection;
        when it cannot be had, this is a plain sleep (polling). Right after the LISTEN
        connection is (re)opened it returns True at once if due work is already waiting:
        a commit that happened before LISTEN took effect notified nobody."""
        if not await self._listening(timeout_s):
            await asyncio.sleep(timeout_s)
            return False
        try:
            await asyncio.wait_for(self._woken.wait(), timeout_s)
        except TimeoutError:
            return False
        self._woken.clear()
        return True

    def pass_on_wake_up(self) -> None:
        """See :meth:`hookline.shared.store.Store.pass_on_wake_up`: nothing to do, every
        LISTENing worker hears each NOTIFY."""

    async def _listening(self, timeout_s: float) -> bool:
        """Make sure the LISTEN connection is up (one per store); False when it cannot be.

        Each time it is up, due work already waiting sets the wake-up (see wait_for_jobs).
        """
        async with self._listen_lock:
            if self._listen_conn is not None and not self._listen_conn.is_closed():
                if await self._listener_answers(self._listen_conn):
                    return True
                self._listen_conn.terminate()
            self._listen_conn = None
            if self._pool is None:
                return False
            try:
                conn = await asyncio.wait_for(asyncpg.connect(
                    self.dsn, timeout=self.limits.connect_timeout_s,
                    command_timeout=self.limits.command_timeout_s,
                    server_settings=self._session_settings()),
                    self.limits.connect_timeout_s)
            except (TimeoutError, OSError, asyncpg.PostgresError):
                return False
            try:
                await asyncio.wait_for(self._init_connection(conn), self.limits.connect_timeout_s)
                await asyncio.wait_for(conn.add_listener(CHANNEL, lambda *_: self._woken.set()),
                                       self.limits.connect_timeout_s)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                conn.terminate()
                return False
            except BaseException:
                conn.terminate()
                raise
            self._listen_conn = conn
        self._listen_checked_at = time.monotonic()
        # Listening from here on; work committed before that sent its NOTIFY to nobody.
        with contextlib.suppress(StoreError):
            if await self._due_work_exists():
                self._woken.set()
        return True

    def _session_settings(self) -> dict[str, str]:
        """The limits' startup settings, and `application_name` naming this process
        (`hookline worker-2 4242`: pg_stat_activity tells hosts' processes apart) unless the
        URL sets one."""
        settings = self.limits.server_settings()
        if "application_name=" not in self.dsn:
            settings["application_name"] = process_label()[:_NAMEDATALEN]
        return settings

    async def _listener_answers(self, conn: asyncpg.Connection) -> bool:
        """Ping the LISTEN connection at most every LISTEN_CHECK_INTERVAL_S; False (logged
        `listen_connection_replaced`) when it did not answer within the connect timeout."""
        if time.monotonic() - self._listen_checked_at < LISTEN_CHECK_INTERVAL_S:
            return True
        try:
            await asyncio.wait_for(conn.fetchval("SELECT 1"), self.limits.connect_timeout_s)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                asyncpg.InternalClientError) as exc:
            self.timeouts += isinstance(exc, TimeoutError)
            get_logger().warning("listen_connection_replaced", error=_error_text(exc))
            return False
        self._listen_checked_at = time.monotonic()
        return True

    async def maintenance(self) -> dict[str, int]:
        """See :meth:`hookline.shared.store.Store.maintenance`: nothing to do (autovacuum's job)."""
        return {}

    async def health(self) -> StoreHealth:
        """See :meth:`hookline.shared.store.Store.health`: no file of its own (the WAL is the
        server's), so nothing but the backend's name."""
        return StoreHealth(backend="postgresql")

    async def check_writable(self) -> None:
        """See :meth:`hookline.shared.store.Store.check_writable`: a transaction with an UPDATE that
        matches no row (refused on a read-only standby or in a read-only database), under
        the same deadlines as every store transaction."""
        try:
            async with self._tx() as tx:  # bounded and cleaned up like every transaction
                await tx.conn.execute("UPDATE schema_version SET version = version WHERE false")
        except StoreError as exc:  # already classified by _tx: keep the kind, say what failed
            raise type(exc)(f"database {redact_url(self.dsn)} is not writable: {exc}") from exc
        except _RUNNING_ERRORS as exc:
            what = f"database {redact_url(self.dsn)} is not writable"
            raise (driver_fault(exc, what) or StoreUnavailable(f"{what}: {exc}")) from exc

class _Tx:
    """One open transaction: runs named queries with `test_now_s` filled in, and reads the
    database's clock once (`now()` is constant within a PostgreSQL transaction)."""

    def __init__(self, conn: asyncpg.Connection, test_now_s: float | None,
                 give_way_lock_timeout_s: float) -> None:
        self.conn = conn
        self._test_now_s = test_now_s
        self._now: float | None = None
        self._guarded = False
        self._give_way_lock_timeout_ms = max(1, round(give_way_lock_timeout_s * 1000))

    async def now(self) -> float:
        """The transaction's instant, unix seconds, from the database (or the test clock)."""
        if self._now is None:
            self._now = float(await self.conn.fetchval("SELECT hookline_now($1)",
                                                       self._test_now_s))
        return self._now

    async def run(self, op: Query) -> Any:
        """Run one store operation's query (see :class:`hookline.shared.store.ops.Query`)."""
        params: dict[str, Any] = {}
        for name, value in op.params.items():
            if isinstance(value, Rows):  # one array per column
                columns = list(zip(*value.rows, strict=True)) or [()] * len(value.columns)
                params.update({c: list(v) for c, v in zip(value.columns, columns, strict=True)})
            else:
                params[name] = value
        if op.sql is not None:
            sql, names = _convert(op.sql)
        else:
            sql, names = _query(op.name)
        values = {"test_now_s": self._test_now_s, **params}
        args = [values[n] for n in names]
        try:
            if op.want == "all":
                return list(await self.conn.fetch(sql, *args))
            if op.want == "one":
                return await self.conn.fetchrow(sql, *args)
            return _changed(await self.conn.execute(sql, *args))
        except asyncpg.UniqueViolationError as exc:
            if op.taken is None:
                raise
            raise Conflict(op.taken) from exc
        except asyncpg.CheckViolationError as exc:
            raise ConfigError(f"invalid value: {exc}") from exc

    async def notify(self) -> None:
        """Wake waiting workers (every host) when this transaction commits."""
        await self.conn.execute("SELECT pg_notify($1, '')", CHANNEL)

    async def give_way(self) -> None:
        """Every lock after this in the transaction waits at most the store's
        `give_way_lock_timeout_s` (see :class:`hookline.shared.store.ops.GiveWay`)."""
        await self.conn.execute(f"SET LOCAL lock_timeout = '{self._give_way_lock_timeout_ms}ms'")

    async def guard_marks(self, *, exclusive: bool) -> None:
        """Take jobs.ordered's guard for the rest of the transaction, once (see
        :class:`hookline.shared.store.ops.OrderedMarks`). The exclusive guard, and every
        lock after it in the transaction, waits at most the store's
        `give_way_lock_timeout_s` (then the driver's error, classified StoreBusy by
        the caller)."""
        if exclusive:
            await self.give_way()
            await self.conn.execute("SELECT pg_advisory_xact_lock($1)", ORDERED_MARKS_LOCK)
        elif not self._guarded:
            await self.conn.execute("SELECT pg_advisory_xact_lock_shared($1)",
                                    ORDERED_MARKS_LOCK)
        self._guarded = True


def _changed(status: str) -> int:
    """Rows a command changed, from its status (`UPDATE 3`)."""
    return int(status.rsplit(" ", 1)[-1]) if status[-1:].isdigit() else 0


"""The PostgreSQL store: many hookline hosts sharing one server.

Same contract as :class:`shared.sqlite_store.SqliteStore` (shared/store.py), with what a
shared server needs:

* **Time is the database's.** Every lease and run_at decision reads `hookline_now()`
  (`now()` in unix seconds, a function from migration 001), never a host clock, so clock skew
  between hosts cannot steal leases. A worker's `Retry(run_at)` is host time: it is turned
  into a delay (`run_at - host now`) and applied to the database's clock.
* **Claims** lock the destinations they serve (row locks, in id order), read the in-flight
  count only once those locks are held (so `max_in_flight` holds across hosts), pick due jobs
  with `FOR UPDATE SKIP LOCKED`, and lease the chosen batch in one `UPDATE` that gives each
  job a fresh token. The locks last the few milliseconds of the claim transaction.
* **Wake-ups** are LISTEN/NOTIFY on channel `hookline_jobs`; `pg_notify` runs inside the
  transaction that creates due work (delivered at commit). Waiters listen on a dedicated
  connection and fall back to polling when it is gone.

Test-only: `clock` replaces the database's clock by `clock()` in every query (and is the
host clock too), so tests can move time on both backends. Production code never passes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import cache
from typing import Any

import asyncpg

from shared.delivery_policy import (
    BreakerPolicy, auto_pause_reason, choose_claims, fair_room, is_failure,
)
from shared.errors import (
    ConfigError, Conflict, HooklineError, NotFound, StoreBusy, StoreError, StoreUnavailable,
)
from shared.logs import get_logger
from shared.models import (
    Accepted, Attempt, AttemptResult, Claim, ClaimRequest, Dead, Destination,
    DestinationSummary, Done, Duplicate, EventBody, Job, JobStory, NewEvent, Outcome,
    PurgeResult, Retry, Source, Stats, ThroughputBucket, fill_buckets, parse_headers,
)
from shared.queries import load_migrations, load_queries
from shared.signing import new_message_id, secret_key
from shared.sources import check_source
from shared.sqlite_store import _latency  # noqa: PLC2701  (one histogram shape for both)
from shared.rules import new_destination, purge_cutoffs
from shared.store import check_throughput_args, validate_destination_changes

log = get_logger()
# asyncpg's pool logs a warning with a traceback each time it fails to reconnect its idle
# connections (every 1 s doubling to 60 s while the server is away); each hookline process
# already logs one store_unavailable / store_recovered pair per outage (shared/faults.py).
logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)
CHANNEL = "hookline_jobs"
SCHEMA_VERSION = max(version for version, _ in load_migrations("postgres"))
# Any constant: serialises migrations of concurrently starting processes.
_MIGRATION_LOCK = 0x686F6F6B
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


@cache
def _query(name: str) -> tuple[str, tuple[str, ...]]:
    """The named query with :params turned into $n, and the parameter names in $n order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = "\n".join(line for line in load_queries("postgres")[name].splitlines()
                     if not line.lstrip().startswith("--"))
    sql = _PARAM.sub(number, text)
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
    if sqlstate in _BUSY_SQLSTATES:
        return StoreBusy(f"database busy: {exc}")
    if isinstance(exc, (OSError, TimeoutError)) or (
            sqlstate is not None and (sqlstate in _TRANSIENT_SQLSTATES
                                      or sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES)):
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


class PostgresStore:
    """:class:`shared.store.Store` on a PostgreSQL server (see the module docstring).

    Args:
        dsn: a `postgresql://` or `postgres://` URL (libpq syntax, as asyncpg reads it).
        pool_size: most connections this process keeps (each transaction holds one).
        connect_timeout_s: how long opening a connection may take, seconds.
        clock: TEST ONLY: a unix-seconds clock that replaces the database's clock.
    """

    def __init__(self, dsn: str, *, pool_size: int = 4, connect_timeout_s: float = 10.0,
                 clock: Callable[[], float] | None = None) -> None:
        self.dsn = dsn
        self._pool_size = pool_size
        self._connect_timeout_s = connect_timeout_s
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
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=1, max_size=self._pool_size,
                timeout=self._connect_timeout_s, command_timeout=60)
        except _DRIVER_ERRORS as exc:
            what = f"cannot connect to {_redact(self.dsn)}"
            raise (driver_fault(exc, what) or StoreError(f"{what}: {exc}")) from exc
        try:
            await self._migrate()
        except _DRIVER_ERRORS as exc:
            await self.close()
            what = f"cannot migrate {_redact(self.dsn)}"
            raise (driver_fault(exc, what) or StoreError(f"{what}: {exc}")) from exc
        except BaseException:
            await self.close()
            raise

    async def _migrate(self) -> None:
        if self._pool is None:
            raise StoreError("store is not open")
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
            applied = {r[0] for r in await conn.fetch("SELECT version FROM schema_version")}
            if applied and max(applied) > SCHEMA_VERSION:
                raise StoreError(f"database schema version {max(applied)} is newer than this "
                                 f"hookline ({SCHEMA_VERSION}); upgrade hookline")
            # Every missing step, in order (numbers are shared with the SQLite migrations and
            # may land out of order while both backends are developed).
            for version, script in load_migrations("postgres"):
                if version not in applied:
                    await conn.execute(script)
                    await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", version)

    def write_lock_stats(self) -> None:
        """See :meth:`shared.store.Store.write_lock_stats`: None (no single write lock)."""
        return None

    async def close(self) -> None:
        """Close the listener connection and the pool (idempotent)."""
        if self._listen_conn is not None:
            conn, self._listen_conn = self._listen_conn, None
            try:
                await conn.close(timeout=2)
            except (OSError, asyncio.TimeoutError, asyncpg.PostgresError,
                    asyncpg.InterfaceError):
                conn.terminate()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), timeout=5)
            except (asyncio.TimeoutError, OSError, asyncpg.PostgresError):
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

    def _host_now(self) -> float:
        return time.time() if self._clock is None else self._clock()

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[_Tx]:
        """One transaction on a pooled connection; driver errors become StoreError types."""
        if self._pool is None:
            raise StoreError("store is not open")
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                yield _Tx(conn, self._test_now())
        except _RUNNING_ERRORS as exc:
            fault = driver_fault(exc, "database connection failed")
            if fault is None:
                raise  # a statement's own error (constraint, bug): not ours to classify
            raise fault from exc

    # -- ingest ----------------------------------------------------------------------------

    async def add_events(self, events: Sequence[NewEvent]) -> list[Accepted | Duplicate]:
        """See :meth:`shared.store.Store.add_events`."""
        async with self._tx() as tx:
            destinations = [Destination.from_row(r)
                            for r in await tx.fetch("live_destinations")]
            now = await tx.now()
            results = await _add_batch(tx, events, destinations, now)
            if any(isinstance(r, Accepted) and r.job_ids for r in results):
                await tx.notify()
        return results

    async def add_backlog(self, events: Sequence[NewEvent]) -> int:
        """See :meth:`shared.store.Store.add_backlog`: the events in one statement, then one
        jobs insert per event type. An event skipped as known keeps its old message id, so
        the new ids it was given match no row."""
        if not events:
            return 0
        async with self._tx() as tx:
            destinations = [Destination.from_row(r)
                            for r in await tx.fetch("live_destinations")]
            now = await tx.now()
            new_message_ids = [new_message_id(now) for _ in events]
            await tx.fetch(  # its returned rows are not needed here
                "insert_event", message_ids=new_message_ids, sources=[e.source for e in events],
                source_event_ids=[e.source_event_id for e in events],
                types=[e.type for e in events], bodies=[e.body for e in events])
            message_ids: dict[str, list[str]] = {}
            for event, message_id in zip(events, new_message_ids, strict=True):
                message_ids.setdefault(event.type, []).append(message_id)
            written = 0
            for event_type, ids in message_ids.items():
                subscribed = [d.id for d in destinations if d.subscribes_to(event_type)]
                if subscribed:
                    written += await tx.execute("insert_jobs_of_messages", message_ids=ids,
                                                destination_ids=subscribed)
            if written:
                await tx.notify()
        return written

    async def add_event(self, event: NewEvent) -> Accepted | Duplicate:
        """One event in its own transaction; see :meth:`add_events`."""
        return (await self.add_events([event]))[0]

    # -- workers ---------------------------------------------------------------------------

    async def claim(self, worker: str, limit: int, lease_s: float,
                    max_attempts: int, *, late_after: int | None = None,
                    max_late: int | None = None, per_destination: int | None = None,
                    held: Mapping[int, int] | None = None) -> list[Claim]:
        """See :meth:`shared.store.Store.claim`.

        Locks the active destinations with due work (row locks, id order), reads their free
        slots after that, picks due jobs with FOR UPDATE SKIP LOCKED, applies the delivery
        policy (late retries last, ordered heads, rate limits) as SQLite does, and leases the
        chosen batch in one UPDATE with fresh tokens.
        """
        if limit <= 0:
            return []
        request = ClaimRequest(worker=worker, limit=limit, lease_s=lease_s,
                               max_attempts=max_attempts, per_destination=per_destination,
                               held=held or {})
        async with self._tx() as tx:
            # A worker woken for work already taken reads, and locks and writes nothing.
            probe = await tx.fetchrow("claim_probe", max_attempts=max_attempts)
            if not probe["claimable"]:
                return []
            now = await tx.now()
            killed = [r["id"] for r in await tx.fetch("kill_lost_at_cap",
                                                       max_attempts=max_attempts)]
            if killed:  # their in-flight attempts end with them, in this transaction
                await tx.execute("close_attempts_lost_at_cap", job_ids=killed)
            slots = await tx.fetch("destination_slots")
            if not slots:
                return []
            free = {r["id"]: r["free"] for r in await tx.fetch(
                "destination_free", destination_ids=[r["id"] for r in slots])}
            candidates: list[tuple[bool, float, int, int]] = []
            rates: dict[int, tuple[float, float]] = {}
            for slot in slots:
                room = fair_room(request, slot["id"])
                if free[slot["id"]] <= 0 or room <= 0:
                    continue
                if slot["rate_limit_per_s"] is not None:
                    rates[slot["id"]] = (slot["rate_limit_per_s"], slot["next_send_at"])
                for job_id, due_at, attempts in await _due_of(
                        tx, slot, min(free[slot["id"]], room), now):
                    late = late_after is not None and attempts >= late_after
                    candidates.append((late, due_at, job_id, slot["id"]))
            chosen, next_send = choose_claims(candidates, limit=limit, max_late=max_late,
                                              rates=rates, now_s=now,
                                              per_destination=per_destination, held=held)
            for destination_id, next_send_at in next_send.items():
                await tx.execute("advance_next_send", destination_id=destination_id,
                                 next_send_at=next_send_at)
            if not chosen:
                return []
            rows = await tx.fetch("claim_job", job_ids=chosen, worker=worker,
                                  lease_s=float(lease_s))
            order = {job_id: i for i, job_id in enumerate(chosen)}
            rows.sort(key=lambda r: order[r["id"]])
            job_ids = [r["id"] for r in rows]
            tokens = [r["lease_token"] for r in rows]
            lost = {r["job_id"] for r in await tx.fetch(
                "mark_attempt_lost", job_ids=job_ids, lease_tokens=tokens)}
            await tx.execute("insert_attempt", job_ids=job_ids, worker=worker,
                             attempts=[r["attempts"] for r in rows], lease_tokens=tokens)
            details = {d["job_id"]: d for d in await tx.fetch("claim_details", job_ids=job_ids)}
        return [_claim(r, details[r["id"]], worker, r["id"] in lost, now) for r in rows]

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        """See :meth:`shared.store.Store.extend`."""
        if not claims:
            return []
        async with self._tx() as tx:
            kept = {r["lease_token"] for r in await tx.fetch(
                "extend_lease", lease_s=float(lease_s), job_ids=[c.job_id for c in claims],
                lease_tokens=[c.lease_token for c in claims])}
        return [c for c in claims if c.lease_token not in kept]

    async def finish(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                     breaker: BreakerPolicy | None = None) -> list[bool]:
        """See :meth:`shared.store.Store.finish`. A Retry's host-clock run_at becomes a delay
        applied to the database's clock."""
        host_now = self._host_now()
        paused: list[tuple[str, str, int]] = []
        async with self._tx() as tx:
            now = await tx.now()
            if _all_delivered(items):
                return await _finish_delivered(tx, items)
            kept = [await _finish_one(tx, claim, outcome, result, host_now)
                    for claim, outcome, result in items]
            # Destination rows last and in id order (as claims lock them): no deadlock
            # between two hosts finishing batches that span the same destinations.
            for claim, _, result in sorted(items, key=lambda item: item[0].destination_id):
                pause = await _track_failure_run(tx, claim, result, now, breaker)
                if pause is not None:
                    paused.append(pause)
        for name, reason, streak in paused:
            log.warning("destination_auto_paused", destination=name, reason=reason,
                        failure_streak=streak)
        return kept

    async def finish_and_claim(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                               breaker: BreakerPolicy | None,
                               request: ClaimRequest) -> tuple[list[bool], list[Claim]]:
        """See :meth:`shared.store.Store.finish_and_claim`: two transactions here."""
        kept = await self.finish(items, breaker) if items else []
        claims = await self.claim(request.worker, request.limit, request.lease_s,
                                  request.max_attempts, late_after=request.late_after,
                                  max_late=request.max_late,
                                  per_destination=request.per_destination,
                                  held=request.held)
        return kept, claims

    async def rotate_secret(self, name: str, new_secret: str, overlap_s: float) -> Destination:
        """See :meth:`shared.store.Store.rotate_secret`."""
        secret_key(new_secret)  # raises ConfigError when malformed
        if not overlap_s >= 0:
            raise ConfigError(f"overlap_s must be zero or more seconds, not {overlap_s!r}")
        async with self._tx() as tx:
            current = await tx.fetchrow("get_destination", name=name)
            if current is None:
                raise NotFound(f"no destination named {name!r}")
            if current["secret"] == new_secret:
                raise ConfigError("the new secret equals the current one")
            row = await tx.fetchrow("rotate_secret", name=name, secret=new_secret,
                                    overlap_s=float(overlap_s))
        log.info("destination_secret_rotated", destination=name,
                 previous_until=row["previous_secret_until"])
        return Destination.from_row(row)

    async def hand_back(self, claims: Sequence[Claim]) -> int:
        """See :meth:`shared.store.Store.hand_back`."""
        if not claims:
            return 0
        async with self._tx() as tx:
            count = 0
            for c in claims:
                if await tx.execute("hand_back", job_id=c.job_id, lease_token=c.lease_token):
                    await tx.execute("mark_attempt_handed_back", lease_token=c.lease_token)
                    count += 1
            if count:
                await tx.notify()
        return count

    async def wait_for_jobs(self, timeout_s: float) -> bool:
        """See :meth:`shared.store.Store.wait_for_jobs`: LISTEN on a dedicated connection;
        when it cannot be had, this is a plain sleep (polling). Right after the LISTEN
        connection is (re)opened it returns True at once if due work is already waiting:
        a commit that happened before LISTEN took effect notified nobody."""
        if not await self._listening(timeout_s):
            await asyncio.sleep(timeout_s)
            return False
        try:
            await asyncio.wait_for(self._woken.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        self._woken.clear()
        return True

    async def _listening(self, timeout_s: float) -> bool:
        """Make sure the LISTEN connection is up (one per store); False when it cannot be.

        Each time it is up, due work already waiting sets the wake-up (see wait_for_jobs).
        """
        async with self._listen_lock:
            if self._listen_conn is not None and not self._listen_conn.is_closed():
                return True
            self._listen_conn = None
            if self._pool is None:
                return False
            try:
                conn = await asyncpg.connect(self.dsn, timeout=max(1.0, min(timeout_s, 5.0)))
            except (OSError, asyncpg.PostgresError, asyncio.TimeoutError):
                return False
            try:
                await conn.add_listener(CHANNEL, lambda *_: self._woken.set())
            except BaseException:
                conn.terminate()
                raise
            self._listen_conn = conn
        # Listening from here on; work committed before that sent its NOTIFY to nobody.
        with contextlib.suppress(StoreError):
            async with self._tx() as tx:
                if (await tx.fetchrow("due_work_exists"))["due"]:
                    self._woken.set()
        return True

    # -- destinations ----------------------------------------------------------------------

    async def add_destination(self, *, name: str, url: str, secret: str,
                              event_types: Sequence[str], max_in_flight: int,
                              headers: Mapping[str, str] | None = None) -> Destination:
        """See :meth:`shared.store.Store.add_destination`."""
        new = new_destination(name=name, url=url, secret=secret, event_types=event_types,
                              max_in_flight=max_in_flight, headers=headers)
        try:
            async with self._tx() as tx:
                row = await tx.fetchrow(
                    "insert_destination", name=name, url=new.url, secret=secret,
                    event_types=json.dumps(new.event_types), max_in_flight=new.max_in_flight,
                    headers=json.dumps(new.headers))
        except asyncpg.UniqueViolationError as exc:
            raise ConfigError(f"a destination named {name!r} already exists") from exc
        except asyncpg.CheckViolationError as exc:
            raise ConfigError(f"invalid destination {name!r}: {exc}") from exc
        return Destination.from_row(row)

    async def list_destinations(self) -> list[Destination]:
        """See :meth:`shared.store.Store.list_destinations`."""
        async with self._tx() as tx:
            return [Destination.from_row(r) for r in await tx.fetch("live_destinations")]

    async def get_destination(self, name: str) -> Destination:
        """See :meth:`shared.store.Store.get_destination`."""
        async with self._tx() as tx:
            row = await tx.fetchrow("get_destination", name=name)
        if row is None:
            raise NotFound(f"no destination named {name!r}")
        return Destination.from_row(row)

    async def set_paused(self, name: str, paused: bool, reason: str | None = None) -> None:
        """See :meth:`shared.store.Store.set_paused` (a resume notifies waiting workers)."""
        async with self._tx() as tx:
            changed = await tx.execute("set_paused", name=name, paused=bool(paused),
                                       reason=reason if paused else None)
            if changed and not paused:
                await tx.notify()
        if changed == 0:
            raise NotFound(f"no destination named {name!r}")

    # -- views -----------------------------------------------------------------------------

    async def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        """See :meth:`shared.store.Store.list_jobs`."""
        async with self._tx() as tx:
            rows = await tx.fetch("list_jobs", status=status, limit=limit)
        return [Job.from_row(r) for r in rows]

    async def list_attempts(self, job_id: int | None = None, limit: int = 10_000) -> list[Attempt]:
        """See :meth:`shared.store.Store.list_attempts`."""
        async with self._tx() as tx:
            rows = await tx.fetch("list_attempts", job_id=job_id, limit=limit)
        return [Attempt.from_row(r) for r in rows]

    async def stats(self) -> Stats:
        """See :meth:`shared.store.Store.stats` (ages by the database's clock)."""
        async with self._tx() as tx:
            now = await tx.now()
            by_status = {s: 0 for s in ("pending", "running", "done", "dead")}
            by_status.update({r["status"]: r["n"] for r in await tx.fetch("jobs_by_status")})
            oldest = (await tx.fetchrow("oldest_pending"))["oldest"]
            per_destination: dict[str, dict[str, int]] = {}
            for r in await tx.fetch("jobs_by_destination_status"):
                per_destination.setdefault(r["destination"], {})[r["status"]] = r["n"]
            return Stats(
                jobs_by_status=by_status,
                events=(await tx.fetchrow("count_events"))["n"],
                attempts=(await tx.fetchrow("count_attempts"))["n"],
                oldest_pending_age_s=None if oldest is None else now - oldest,
                jobs_by_destination=per_destination,
                paused_destinations={r["name"]: r["paused_reason"]
                                     for r in await tx.fetch("paused_destinations")},
                attempts_by_outcome={r["outcome"]: r["n"]
                                     for r in await tx.fetch("attempts_by_outcome")},
                delivery_latency=_latency(await tx.fetchrow("delivery_latency")),
                wal_bytes=None,
            )

    async def maintenance(self) -> dict[str, int]:
        """See :meth:`shared.store.Store.maintenance`: nothing to do (autovacuum's job)."""
        return {}

    # -- operator controls -----------------------------------------------------------------

    async def update_destination(self, name: str, **changes: Any) -> Destination:
        """See :meth:`shared.store.Store.update_destination`."""
        values = validate_destination_changes(changes)
        # Column names come only from the validated DESTINATION_UPDATERS keys, never input.
        columns = list(values)
        assignments = ", ".join(f"{column} = ${i}" for i, column in enumerate(columns, 2))
        sql = (f"UPDATE destinations SET {assignments} "  # noqa: S608
               "WHERE name = $1 AND deleted_at IS NULL RETURNING *")
        args = [json.dumps(v if isinstance(v, dict) else list(v))
                if isinstance(v, list | tuple | dict) else v for v in values.values()]
        async with self._tx() as tx:
            row = await tx.conn.fetchrow(sql, name, *args)
        if row is None:
            raise NotFound(f"no destination named {name!r}")
        return Destination.from_row(row)

    async def remove_destination(self, name: str) -> int:
        """See :meth:`shared.store.Store.remove_destination`."""
        async with self._tx() as tx:
            row = await tx.fetchrow("remove_destination", name=name)
            if row is None:
                raise NotFound(f"no destination named {name!r}")
            return await tx.execute("kill_jobs_of_destination", destination_id=row["id"])

    async def list_dead(self, destination: str | None = None, since_s: float | None = None,
                        limit: int = 100) -> list[Job]:
        """See :meth:`shared.store.Store.list_dead`."""
        async with self._tx() as tx:
            rows = await tx.fetch("list_dead", destination=destination,
                                  since=None if since_s is None else float(since_s), limit=limit)
        return [Job.from_row(r) for r in rows]

    async def replay(self, *, job_id: int | None = None, all_dead: bool = False,
                     destination: str | None = None, since_s: float | None = None,
                     dry_run: bool = False) -> int:
        """See :meth:`shared.store.Store.replay` (notifies waiting workers on commit)."""
        if (job_id is None) == (not all_dead):
            raise ConfigError("replay needs exactly one of a job id or all_dead")
        async with self._tx() as tx:
            if job_id is not None:
                state = await tx.fetchrow("replay_job_state", job_id=job_id)
                _check_replayable(job_id, state)
            ids = [r["id"] for r in await tx.fetch(
                "replay_candidates", job_id=job_id, destination=destination,
                since=None if since_s is None else float(since_s))]
            if dry_run or not ids:
                return len(ids)
            count = await tx.execute("replay_job", job_ids=ids)
            if count:
                await tx.notify()
            return count

    async def purge(self, *, bodies_before_s: float, metadata_before_s: float,
                    dedupe_before_s: float) -> PurgeResult:
        """See :meth:`shared.store.Store.purge`."""
        purge_cutoffs(bodies_before_s, metadata_before_s, dedupe_before_s)
        async with self._tx() as tx:
            bodies = await tx.execute("purge_bodies", before=float(bodies_before_s))
            attempts = await tx.execute("purge_attempts", before=float(metadata_before_s))
            jobs = await tx.execute("purge_jobs", before=float(metadata_before_s))
            events = await tx.execute("purge_events", before=float(dedupe_before_s))
        return PurgeResult(bodies=bodies, attempts=attempts, jobs=jobs, events=events)

    async def check_writable(self) -> None:
        """See :meth:`shared.store.Store.check_writable`: an UPDATE that matches no row
        (refused on a read-only standby or in a read-only database), rolled back."""
        if self._pool is None:
            raise StoreError("store is not open")
        try:
            async with self._pool.acquire() as conn:
                tx = conn.transaction()
                await tx.start()
                try:
                    await conn.execute("UPDATE schema_version SET version = version WHERE false")
                finally:
                    await tx.rollback()
        except _RUNNING_ERRORS as exc:
            what = f"database {_redact(self.dsn)} is not writable"
            raise (driver_fault(exc, what) or StoreUnavailable(f"{what}: {exc}")) from exc

    # -- dashboard views -------------------------------------------------------------------

    async def destination_summaries(self, *, latency_window_s: float = 900.0,
                                    latency_scan_limit: int = 20_000
                                    ) -> list[DestinationSummary]:
        """See :meth:`shared.store.Store.destination_summaries` (the database's clock)."""
        async with self._tx() as tx:
            now = await tx.now()
            rows = await tx.fetch("destination_summaries")
            latency = {r["destination_id"]: r for r in await tx.fetch(
                "destination_latency", since=float(now - latency_window_s),
                scan_limit=int(latency_scan_limit))}
        return [DestinationSummary.from_rows(r, latency.get(r["id"])) for r in rows]

    async def throughput(self, *, window_s: float, bucket_s: int = 60) -> list[ThroughputBucket]:
        """See :meth:`shared.store.Store.throughput` (the database's clock)."""
        check_throughput_args(window_s, bucket_s)
        async with self._tx() as tx:
            now = await tx.now()
            first = int((now - window_s) // bucket_s)
            params = {"since": float(first * bucket_s), "bucket_s": float(bucket_s)}
            counts: dict[int, dict[str, int]] = {}
            for r in await tx.fetch("events_per_bucket", **params):
                counts.setdefault(r["bucket"], {})["events"] = r["n"]
            for r in await tx.fetch("finished_per_bucket", **params):
                key = "delivered" if r["status"] == "done" else "dead"
                counts.setdefault(r["bucket"], {})[key] = r["n"]
        return fill_buckets(counts, first=first, last=int(now // bucket_s), bucket_s=bucket_s)

    async def event_body(self, job_id: int, max_bytes: int) -> EventBody:
        """See :meth:`shared.store.Store.event_body`."""
        async with self._tx() as tx:
            row = await tx.fetchrow("event_body_of_job", job_id=job_id,
                                    max_bytes=max(1, int(max_bytes)))
        if row is None:
            raise NotFound(f"no job with id {job_id}")
        return EventBody(event_id=row["event_id"], type=row["type"],
                         size_bytes=row["size_bytes"] or 0, head=bytes(row["head"] or b""),
                         body_purged_at=row["body_purged_at"])

    # -- inbound sources -------------------------------------------------------------------

    async def add_source(self, *, name: str, scheme: str, secret: str) -> Source:
        """See :meth:`shared.store.Store.add_source`."""
        check_source(name, scheme, secret)
        try:
            async with self._tx() as tx:
                row = await tx.fetchrow("insert_source", name=name, scheme=scheme,
                                        secret=secret)
        except asyncpg.UniqueViolationError as exc:
            raise ConfigError(f"a source named {name!r} already exists") from exc
        return Source.from_row(row)

    async def get_source(self, name: str) -> Source:
        """See :meth:`shared.store.Store.get_source`."""
        async with self._tx() as tx:
            row = await tx.fetchrow("get_source", name=name)
        if row is None:
            raise NotFound(f"no source named {name!r}")
        return Source.from_row(row)

    async def list_sources(self) -> list[Source]:
        """See :meth:`shared.store.Store.list_sources`."""
        async with self._tx() as tx:
            return [Source.from_row(r) for r in await tx.fetch("live_sources")]

    async def remove_source(self, name: str) -> None:
        """See :meth:`shared.store.Store.remove_source`."""
        async with self._tx() as tx:
            row = await tx.fetchrow("remove_source", name=name)
        if row is None:
            raise NotFound(f"no source named {name!r}")

    async def get_job(self, job_id: int) -> JobStory:
        """See :meth:`shared.store.Store.get_job`."""
        async with self._tx() as tx:
            row = await tx.fetchrow("get_job", job_id=job_id)
            attempts = await tx.fetch("list_attempts", job_id=job_id, limit=10_000)
        if row is None:
            raise NotFound(f"no job with id {job_id}")
        return JobStory(
            job=Job.from_row(row), replays=row["replays"], source=row["source"],
            source_event_id=row["source_event_id"], received_at=row["received_at"],
            body_bytes=row["body_bytes"], body_purged_at=row["body_purged_at"],
            attempts=tuple(Attempt.from_row(a) for a in attempts))


class _Tx:
    """One open transaction: runs named queries with `test_now_s` filled in, and reads the
    database's clock once (`now()` is constant within a PostgreSQL transaction)."""

    def __init__(self, conn: asyncpg.Connection, test_now_s: float | None) -> None:
        self.conn = conn
        self._test_now_s = test_now_s
        self._now: float | None = None

    async def now(self) -> float:
        """The transaction's instant, unix seconds, from the database (or the test clock)."""
        if self._now is None:
            self._now = float(await self.conn.fetchval("SELECT hookline_now($1)",
                                                       self._test_now_s))
        return self._now

    def _args(self, query: str, params: dict[str, Any]) -> tuple[str, list[Any]]:
        sql, names = _query(query)
        values = {"test_now_s": self._test_now_s, **params}
        return sql, [values[n] for n in names]

    async def fetch(self, query: str, /, **params: Any) -> list[Any]:
        sql, args = self._args(query, params)
        return list(await self.conn.fetch(sql, *args))

    async def fetchrow(self, query: str, /, **params: Any) -> Any:
        sql, args = self._args(query, params)
        return await self.conn.fetchrow(sql, *args)

    async def execute(self, query: str, /, **params: Any) -> int:
        """Run a write; returns the number of rows it changed."""
        sql, args = self._args(query, params)
        status = await self.conn.execute(sql, *args)
        return int(status.rsplit(" ", 1)[-1]) if status[-1:].isdigit() else 0

    async def notify(self) -> None:
        """Wake waiting workers (every host) when this transaction commits."""
        await self.conn.execute("SELECT pg_notify($1, '')", CHANNEL)


async def _add_batch(tx: _Tx, events: Sequence[NewEvent], destinations: list[Destination],
                     now: float) -> list[Accepted | Duplicate]:
    """Insert a batch of events and their jobs in three statements (not three per event)."""
    if not events:
        return []
    inserted = {(r["source"], r["source_event_id"]): r for r in await tx.fetch(
        "insert_event", message_ids=[new_message_id(now) for _ in events],
        sources=[e.source for e in events], source_event_ids=[e.source_event_id for e in events],
        types=[e.type for e in events], bodies=[e.body for e in events])}
    keys = [(e.source, e.source_event_id) for e in events]
    missing = [k for k in dict.fromkeys(keys) if k not in inserted]
    existing = {(r["source"], r["source_event_id"]): r for r in await tx.fetch(
        "find_event", sources=[k[0] for k in missing],
        source_event_ids=[k[1] for k in missing])} if missing else {}
    pairs: list[tuple[int, int]] = []
    first: set[tuple[str, str]] = set()
    for event, key in zip(events, keys, strict=True):
        if key in inserted and key not in first:
            first.add(key)
            pairs += [(inserted[key]["id"], d.id) for d in destinations
                      if d.subscribes_to(event.type)]
    job_ids: dict[int, list[int]] = {}
    if pairs:
        for r in await tx.fetch("insert_jobs", event_ids=[p[0] for p in pairs],
                                destination_ids=[p[1] for p in pairs]):
            job_ids.setdefault(r["event_id"], []).append(r["id"])
    results: list[Accepted | Duplicate] = []
    seen: set[tuple[str, str]] = set()
    for key in keys:
        if key in inserted and key not in seen:
            row = inserted[key]
            results.append(Accepted(event_id=row["id"], message_id=row["message_id"],
                                    job_ids=tuple(sorted(job_ids.get(row["id"], ())))))
        else:
            row = inserted.get(key) or existing[key]
            results.append(Duplicate(event_id=row["id"], message_id=row["message_id"]))
        seen.add(key)
    return results


async def _due_of(tx: _Tx, slot: Any, limit: int, now: float) -> list[tuple[int, float, int]]:
    """(job id, due since, attempts made) of one locked destination's claimable jobs; an
    ordered destination offers only its oldest unfinished job, when that one is due."""
    if not slot["ordered"]:
        return [(r["id"], r["due_at"], r["attempts"]) for r in await tx.fetch(
            "due_jobs", destination_id=slot["id"], limit=limit)]
    head = await tx.fetchrow("ordered_head", destination_id=slot["id"])
    if head is None:
        return []
    if head["status"] == "pending" and head["run_at"] <= now:
        return [(head["id"], head["run_at"], head["attempts"])]
    if head["status"] == "running" and head["lease_until"] <= now:
        return [(head["id"], head["lease_until"], head["attempts"])]
    return []


def _claim(row: Any, details: Any, worker: str, taken_over: bool, now: float) -> Claim:
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


def _all_delivered(items: Sequence[tuple[Claim, Outcome, AttemptResult]]) -> bool:
    """Every attempt acknowledged with a 2xx (Done), and no job twice: the batch fast path."""
    return (all(isinstance(outcome, Done) and not is_failure(result)
                for _, outcome, result in items)
            and len({claim.job_id for claim, _, _ in items}) == len(items))


async def _finish_delivered(tx: _Tx,
                            items: Sequence[tuple[Claim, Outcome, AttemptResult]]) -> list[bool]:
    """See sqlite_store._finish_delivered: one statement per step for the whole batch, then
    one failure-run reset per destination, in id order (as claims lock destinations)."""
    results = [result for _, _, result in items]
    await tx.execute(
        "record_attempts", lease_tokens=[claim.lease_token for claim, _, _ in items],
        started_ats=[r.started_at for r in results], durations_s=[r.duration_s for r in results],
        status_codes=[r.status_code for r in results], errors=[r.error for r in results],
        response_excerpts=[r.response_excerpt for r in results],
        response_headers=[r.response_headers for r in results],
        locations=[r.location for r in results])
    done = {r["id"] for r in await tx.fetch(
        "finish_delivered", job_ids=[claim.job_id for claim, _, _ in items],
        lease_tokens=[claim.lease_token for claim, _, _ in items])}
    for destination_id in sorted({claim.destination_id for claim, _, _ in items}):
        await tx.execute("destination_succeeded", destination_id=destination_id)
    return [claim.job_id in done for claim, _, _ in items]


async def _finish_one(tx: _Tx, claim: Claim, outcome: Outcome, result: AttemptResult,
                      host_now: float) -> bool:
    fence = {"job_id": claim.job_id, "lease_token": claim.lease_token}
    await tx.execute("record_attempt", lease_token=claim.lease_token,
                     started_at=result.started_at, duration_s=result.duration_s,
                     status_code=result.status_code, error=result.error,
                     response_excerpt=result.response_excerpt,
                     response_headers=result.response_headers, location=result.location)
    if isinstance(outcome, Done):
        changed = await tx.execute("finish_done", **fence)
    elif isinstance(outcome, Retry):
        changed = await tx.execute("finish_retry", **fence, error=outcome.error,
                                   delay_s=max(0.0, outcome.run_at - host_now))
    elif isinstance(outcome, Dead):
        changed = await tx.execute("finish_dead", **fence, error=outcome.error)
    else:
        raise TypeError(f"unknown outcome {outcome!r}")
    return changed == 1


async def _track_failure_run(tx: _Tx, claim: Claim, result: AttemptResult, now: float,
                             breaker: BreakerPolicy | None) -> tuple[str, str, int] | None:
    """Update the destination's failure run; pause it when the breaker says so. Returns
    (destination name, reason, failure streak) when this call paused it."""
    if not is_failure(result):
        await tx.execute("destination_succeeded", destination_id=claim.destination_id)
        return None
    run = await tx.fetchrow("destination_failed", destination_id=claim.destination_id)
    if run is None or breaker is None or run["paused"]:
        return None
    reason = auto_pause_reason(result, run["url"], run["failure_streak"], run["failing_since"],
                               now, breaker)
    if reason is None or not await tx.execute("auto_pause", destination_id=claim.destination_id,
                                              reason=reason):
        return None
    return run["name"], reason, run["failure_streak"]


def _check_replayable(job_id: int, row: Any) -> None:
    """Raise NotFound or Conflict when one job cannot be replayed (see Store.replay)."""
    if row is None:
        raise NotFound(f"no job with id {job_id}")
    if row["status"] != "dead":
        raise Conflict(f"job {job_id} is {row['status']}, not dead; only dead jobs are replayed")
    if row["body_purged_at"] is not None:
        raise Conflict(f"job {job_id} cannot be replayed: its event body was purged by "
                       "retention")
    if row["deleted_at"] is not None:
        raise Conflict(f"job {job_id} cannot be replayed: its destination was removed")


def _redact(dsn: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)

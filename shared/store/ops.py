"""What a store transaction may ask of its backend: the narrow connector under the store logic.

Each transaction in :mod:`hookline.shared.store.logic` is a generator that yields these operations
and receives their results (``rows = yield Query("claim_details", job_ids=ids)``). A backend
drives it: SQLite synchronously on its database thread (the whole transaction is one thread
hop), PostgreSQL with ``await`` on one pooled connection. Only the driver knows the dialect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from hookline.shared.errors import LockUnavailable

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Rows:
    """A batch parameter: one tuple per row. SQLite receives it as one JSON array of arrays
    under the parameter's own name; PostgreSQL as one array per column, named `columns`."""

    columns: tuple[str, ...]
    rows: Sequence[Sequence[Any]]


@dataclass(frozen=True, slots=True)
class Query:
    """Run the named query (or `sql`, text with :named parameters valid in both dialects).

    `params` are by name; a list or tuple is a batch (SQLite: JSON text; PostgreSQL: an
    array). `:now` is the transaction's instant in both dialects (the driver supplies it:
    SQLite the store's clock, PostgreSQL `hookline_now()`, the server's).
    `want` says what comes back: "all" (a list of rows), "one" (a row or None)
    or "count" (rows changed). A unique-key violation raises Conflict(`taken`) when `taken`
    is set. `per_row`: the one Rows parameter's rows are the query's parameters row by row
    where a statement costs no round trip (SQLite: an INSERT ... VALUES runs as multi-row
    statements, shared/store/sqlite_rows.py; any other query once per row, the rows it
    returns concatenated), as one statement of arrays elsewhere.
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    want: str = "all"
    taken: str | None = None
    sql: str | None = None
    per_row: bool = False


class Now:
    """Ask for the transaction's instant in unix seconds (SQLite: the store's clock, read
    once per transaction; PostgreSQL: the server's clock, or the test clock)."""


class BeginWrite:
    """From here on the transaction writes (SQLite: take the write lock, BEGIN IMMEDIATE).
    Lets a transaction read first and take no lock when there is nothing to do."""


class Notify:
    """Wake waiting workers once this transaction commits."""


class Durable:
    """This transaction's commit must survive a power loss before its caller goes on: the
    backend syncs it even where its commits are not synced one by one (SQLite's
    `worker_synchronous = NORMAL`). For a claim whose job, sent twice, would do more harm than
    a duplicate (see ClaimOperations._claim_in)."""


@dataclass(frozen=True, slots=True)
class OrderedMarks:
    """Guard jobs.ordered, each job's copy of its destination's `ordered` (the index of an
    ordered destination's head, jobs_ordered), against a change of `ordered` committed while
    a job is written.

    Not `exclusive`: this transaction is about to write or reopen jobs, reading their
    destinations' `ordered`. `exclusive`: it is about to turn a destination ordered and mark
    that destination's unfinished jobs. PostgreSQL takes one transaction-scoped advisory
    lock, shared or exclusive, so the two never overlap: each job written either committed
    before the marking began (which then sees it) or reads the new value. The exclusive
    taker gives way (as GiveWay: at most the store's `give_way_lock_timeout_s`, 0.5 s, for
    any lock, then StoreBusy), so it is the one given up where its waits meet a claim's.
    SQLite: nothing (one writer at a time)."""

    exclusive: bool


class GiveWay:
    """From here on, every lock this transaction waits for waits at most the store's
    `give_way_lock_timeout_s` (0.5 s; then LockUnavailable: nothing changed, try again). For
    an operator's change that workers' transactions may have to wait for (removing a
    destination or a tenant's destinations, turning a destination ordered): it never makes
    them wait long. (A removal does not wait for a job row at all: NOWAIT, as it holds the
    job's destination, which a finish wants after the job.) SQLite: nothing (one writer at a
    time)."""


GIVE_WAY_PAUSES_S = (0.1, 0.2, 0.4, 0.8)
"""Before each new try of a change that gave way, seconds (see :func:`retried_giving_way`)."""


async def retried_giving_way(run: Callable[[Tx[T]], Awaitable[T]],
                             make: Callable[[], Tx[T]]) -> T:
    """Run the transaction `make()` with `run` (the store's `_transact`); when it gave way
    (LockUnavailable: a lock not granted at once or within its GiveWay timeout; nothing
    changed), run a new one after each pause of GIVE_WAY_PAUSES_S: the workers' transactions
    it meets hold their rows for milliseconds, so the operator rarely sees it. Any other
    fault (a statement timeout, SQLite's busy timeout, a lost connection) is not tried again.

    Raises:
        LockUnavailable: it gave way every time (five tries, 1.5 s of pauses).
    """
    for pause_s in GIVE_WAY_PAUSES_S:
        try:
            return await run(make())
        except LockUnavailable:
            await asyncio.sleep(pause_s)
    return await run(make())


@dataclass(frozen=True, slots=True)
class AfterCommit:
    """Call `fn()` once the transaction has committed (e.g. to log what it did)."""

    fn: Callable[[], None]


Op = Query | Now | BeginWrite | Notify | Durable | OrderedMarks | GiveWay | AfterCommit
Tx = Generator[Op, Any, T]
"""A store transaction: yields operations, returns its result."""


@dataclass(frozen=True, slots=True)
class Finished(Generic[T]):
    """A transaction's result (see :func:`advance`)."""

    value: T


def advance(tx: Tx[T], answer: Any) -> Op | Finished[T]:
    """Send `answer` (the previous operation's result; None at first) into `tx`: its next
    operation, or Finished once it has returned. What it raises propagates."""
    try:
        return tx.send(answer)
    except StopIteration as stop:
        return Finished(stop.value)

NOW = Now()
BEGIN_WRITE = BeginWrite()
NOTIFY = Notify()
DURABLE = Durable()
GIVE_WAY = GiveWay()
WRITES_JOBS = OrderedMarks(exclusive=False)
CHANGES_ORDERED = OrderedMarks(exclusive=True)


def one(name: str, /, **params: Any) -> Query:
    """A query whose first row (or None) is wanted."""
    return Query(name, params, want="one")


def rows(name: str, /, **params: Any) -> Query:
    """A query whose rows are wanted."""
    return Query(name, params)


def count(name: str, /, **params: Any) -> Query:
    """A write whose number of changed rows is wanted."""
    return Query(name, params, want="count")

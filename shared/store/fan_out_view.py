"""What ingest's fan-out reads, remembered per process between transactions.

Fan-out needs, for a batch of events, the destinations subscribed to each (tenant, pattern)
candidate (the subscription index, see shared/store/ingest_tx.py), each reached destination's
payload filter, and whether each publishing tenant exists and is enabled. A process remembers
what it read in a :class:`FanOutMemory`, labelled with the database's fan-out version (table
`fan_out_version`, schema 22): every change that can alter a remembered answer (a
subscription added or removed, a filter changed, a tenant removed, disabled or enabled) sets
the version to a new random value inside the changing transaction. A tenant's creation does
not: a memory remembers only tenants that exist (a tenant it does not know is asked for), so
ingest creating tenants on first use never writes the version row (on PostgreSQL it would
wait there for every uncommitted change of any destination).

Each ingest transaction reads the version in one statement, together with whatever the
memory lacks; what the memory holds is used only when that version equals the memory's label,
and when it does not, the whole batch is answered by one statement (on PostgreSQL each
statement sees its own moment: answers are never joined across two). So a change committed
before an event's transaction reads the version (on any host, by any process) is honoured
exactly as when everything was read anew, and in the steady state fan-out costs one small
statement per batch, however many destinations and tenants exist.

While the subscription index is at most WHOLE_INDEX_LIMIT rows, a memory holds it whole and
answers every key, those with no destination too. On SQLite, whose writers share one lock,
the whole index is read again before the write lock is taken (:func:`refresh_fan_out`) and
the write transaction only compares versions.

The invariant: every entry in a memory was read by a statement that read the memory's
version. :meth:`FanOutMemory.absorb` and :meth:`FanOutMemory.replace` keep it (a different
version empties the memory first), under a lock so two transactions of one process cannot
interleave their updates.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hookline.shared.errors import StoreError
from hookline.shared.policy.notify import is_operational
from hookline.shared.store.ops import Query, Rows, Tx

Key = tuple[str, str]
"""(tenant, subscription pattern)."""
Reached = tuple[tuple[int, str | None], ...]
"""(destination id, its payload filter's JSON text or None) per subscribed destination."""
TenantState = bool | None
"""A tenant's disabled flag; None: no such tenant."""

MAX_REMEMBERED = 200_000
"""Keys learnt one by one, and tenants, a memory holds at most of each (about 40 MB at worst);
past it, it starts that part over. Event types and tenant ids are the caller's to choose, so
what a memory sees is not bounded otherwise."""
WHOLE_INDEX_LIMIT = 50_000
"""A memory holds the whole subscription index (one statement: about 0.1 s for 30,000
subscriptions) while it has at most this many rows. Past it, the process learns key by key
until it restarts (reading a larger index again after each change would cost more)."""


def subscription_patterns(event_type: str) -> list[str]:
    """The subscription patterns that match `event_type`: itself, `*`, and `prefix.*` for
    every `.` in it (the rule of :func:`hookline.shared.endpoint_models.subscribes`); `*`
    not for an operational event (`hookline.`: only a subscription naming it receives it)."""
    patterns = [event_type] if is_operational(event_type) else [event_type, "*"]
    patterns += [event_type[:i + 1] + "*" for i, c in enumerate(event_type) if c == "."]
    return patterns


@dataclass(frozen=True, slots=True)
class FanOutView:
    """Subscription answers: the destinations of each key (a key it lacks: none). A view of
    the whole index is kept by the memory and answers every transaction until the version
    moves; it is never changed after, except for `reaches`, what :meth:`reach` worked out."""

    subscriptions: dict[Key, Reached]
    reaches: dict[tuple[str, str], Reached] = field(default_factory=dict)

    def reach(self, tenant: str, event_type: str) -> Reached:
        """The destinations an event of `event_type` for `tenant` reaches, with their
        filters, in destination id order (worked out once per view and type)."""
        found = self.reaches.get((tenant, event_type))
        if found is None:
            merged: dict[int, str | None] = {}
            for pattern in subscription_patterns(event_type):
                for destination_id, text in self.subscriptions.get((tenant, pattern), ()):
                    merged[destination_id] = text
            found = tuple(sorted(merged.items()))
            if len(self.reaches) < MAX_REMEMBERED:
                self.reaches[(tenant, event_type)] = found
        return found


@dataclass(frozen=True, slots=True)
class FanOutAnswers:
    """One transaction's answers: `view` for the subscriptions, `tenants` the state of each
    tenant asked for."""

    view: FanOutView
    tenants: dict[str, TenantState]


class FanOutMemory:
    """A process's remembered fan-out answers at one version (see the module doc): the whole
    index (`whole`) or the answers to the keys asked so far, and the tenants known to exist."""

    __slots__ = ("_lock", "_whole", "subscriptions", "tenants", "too_big", "version")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.version: int | None = None
        self.too_big = False
        """The index exceeded WHOLE_INDEX_LIMIT once: this process learns key by key."""
        self.subscriptions: dict[Key, Reached] = {}
        self.tenants: dict[str, bool] = {}
        self._whole: FanOutView | None = None

    def recall(self, keys: Iterable[Key], tenants: Iterable[str]
               ) -> tuple[int | None, FanOutView | None, dict[Key, Reached], dict[str, bool]]:
        """(the label, the whole index's view or None, the remembered answers among `keys`
        (none asked of a whole memory) and among `tenants`)."""
        with self._lock:
            states = self.tenants
            known_tenants = {t: states[t] for t in tenants if t in states}
            if self._whole is not None:
                return self.version, self._whole, {}, known_tenants
            subscriptions = self.subscriptions
            return (self.version, None,
                    {k: subscriptions[k] for k in keys if k in subscriptions}, known_tenants)

    def absorb(self, version: int, subscriptions: dict[Key, Reached],
               tenants: dict[str, TenantState]) -> None:
        """Remember answers read at `version` (a different version forgets the rest first);
        of the tenants, only those that exist."""
        with self._lock:
            if version != self.version:
                self.subscriptions, self.tenants, self._whole = {}, {}, None
                self.version = version
            if self._whole is None:
                if len(self.subscriptions) + len(subscriptions) > MAX_REMEMBERED:
                    self.subscriptions = {}
                self.subscriptions.update(subscriptions)
            if len(self.tenants) + len(tenants) > MAX_REMEMBERED:
                self.tenants = {}  # a whole index stays: reading it again costs more
            self.tenants.update((t, s) for t, s in tenants.items() if s is not None)

    def learn_key_by_key(self) -> None:
        """The index is past WHOLE_INDEX_LIMIT: forget everything, learn key by key."""
        with self._lock:
            self.too_big, self.version, self._whole = True, None, None
            self.subscriptions, self.tenants = {}, {}

    def replace(self, version: int, view: FanOutView) -> None:
        """Hold `view`, the whole index read at `version` (the tenants too are forgotten
        when the version differs)."""
        with self._lock:
            if version != self.version:
                self.tenants = {}
            self.subscriptions, self.version, self._whole = view.subscriptions, version, view


def refresh_fan_out(memory: FanOutMemory | None) -> Tx[None]:
    """Before SQLite's write lock: bring a memory that holds (or may hold) the whole index up
    to the database's version, so the write transaction that follows only compares versions
    (reading the index whole takes about 0.1 s per 30,000 subscriptions, which the other
    writers would otherwise wait for). Nothing for a memory that learns key by key."""
    if memory is None or memory.too_big:
        return
    version, _ = yield from _read(set(), set())
    label, whole, _, _ = memory.recall((), ())
    if whole is None or version != label:
        yield from _load_whole(memory)


def read_fan_out(memory: FanOutMemory | None, kinds: Iterable[tuple[str, str]],
                 tenants: Iterable[str], *, reload: bool = False) -> Tx[FanOutAnswers]:
    """The answers for the batch's (tenant, event type) `kinds` and its named `tenants` as of
    this transaction: one statement while the memory is current (the version, the tenants
    not known to exist, and what a key-by-key memory lacks); when the version moved, one
    more that answers the whole batch, or (`reload`, a memory that holds the whole index)
    the whole index read again in the transaction. Without a memory, one statement asks for
    everything."""
    tenants = set(tenants)
    if memory is None:
        _, answers = yield from _read(_keys(kinds), tenants)
        return answers
    label, whole, _, known_tenants = memory.recall((), tenants)
    if whole is None and memory.version is None and not memory.too_big and reload:
        label, whole = yield from _load_whole(memory)
    if whole is not None:
        version, fresh = yield from _read(set(), tenants - known_tenants.keys())
        if version == label:
            memory.absorb(version, {}, fresh.tenants)
            return FanOutAnswers(whole, {**known_tenants, **fresh.tenants})
        if reload:
            label, whole = yield from _load_whole(memory)
        if not reload or whole is not None:
            # One statement answers this batch (with `reload`, the version may have moved
            # again since the index was read); without it, refresh_fan_out reads the index
            # again before the next batch takes the lock.
            version, answers = yield from _read(_keys(kinds), tenants)
            if version == label:
                memory.absorb(version, {}, answers.tenants)
            return answers
    keys = _keys(kinds)
    label, _, known_keys, known_tenants = memory.recall(keys, tenants)
    version, fresh = yield from _read(keys - known_keys.keys(), tenants - known_tenants.keys())
    if version == label:
        memory.absorb(version, fresh.view.subscriptions, fresh.tenants)
        return FanOutAnswers(FanOutView({**known_keys, **fresh.view.subscriptions}),
                             {**known_tenants, **fresh.tenants})
    version, answers = yield from _read(keys, tenants)  # one moment for the whole batch
    memory.absorb(version, answers.view.subscriptions, answers.tenants)
    return answers


def read_tenant_states(tenants: Iterable[str]) -> Tx[dict[str, TenantState]]:
    """The state of each of `tenants` now (one statement; nothing remembered)."""
    _, answers = yield from _read(set(), set(tenants))
    return answers.tenants


def _keys(kinds: Iterable[tuple[str, str]]) -> set[Key]:
    return {(tenant, pattern) for tenant, event_type in kinds
            for pattern in subscription_patterns(event_type)}


def _load_whole(memory: FanOutMemory) -> Tx[tuple[int | None, FanOutView | None]]:
    """Read the whole index into `memory`; (its label, its view; None when the index is past
    WHOLE_INDEX_LIMIT: the memory learns key by key from then on)."""
    version, index = yield from _read_whole()
    if index is None:
        memory.learn_key_by_key()
        return None, None
    memory.replace(version, index)
    return version, index


def _read(keys: set[Key], tenants: set[str]) -> Tx[tuple[int, FanOutAnswers]]:
    """(the version, the answers for exactly `keys` and `tenants`) from one statement."""
    found = yield Query("fan_out_view", {
        "keys": Rows(("tenant_id", "pattern"), sorted(keys)),
        "tenants": Rows(("id",), [(t,) for t in sorted(tenants)])})
    reached: dict[Key, list[tuple[int, str | None]]] = {k: [] for k in keys}
    version, states = _collect(found, reached)
    return version, FanOutAnswers(FanOutView({k: tuple(v) for k, v in reached.items()}),
                                  {**dict.fromkeys(tenants), **states})


def _read_whole() -> Tx[tuple[int, FanOutView | None]]:
    """(the version, the whole index; None past WHOLE_INDEX_LIMIT) from one statement."""
    found = yield Query("fan_out_index", {"limit": WHOLE_INDEX_LIMIT + 1})
    reached: dict[Key, list[tuple[int, str | None]]] = {}
    version, _ = _collect(found, reached)
    if sum(map(len, reached.values())) > WHOLE_INDEX_LIMIT:
        return version, None
    return version, FanOutView({k: tuple(v) for k, v in reached.items()})


def _collect(found: Iterable[Any], reached: dict[Key, list[tuple[int, str | None]]]
             ) -> tuple[int, dict[str, TenantState]]:
    """Sort `fan_out_view` or `fan_out_index` rows: the subscriptions into `reached` (in
    destination id order); returns (the version, the tenants' states).

    Raises:
        StoreError: no version row (schema 22 makes one; nothing deletes it).
    """
    version: int | None = None
    states: dict[str, TenantState] = {}
    for r in found:
        kind = r["kind"]
        if kind == "subscription":
            reached.setdefault((r["tenant_id"], r["pattern"]), []).append(
                (int(r["destination_id"]), r["filter"]))
        elif kind == "tenant":
            states[r["tenant_id"]] = bool(r["disabled"])
        else:
            version = int(r["version"])
    if version is None:
        raise StoreError("the fan_out_version row is missing: restore it with "
                         "INSERT INTO fan_out_version VALUES (1, 0)")
    for destinations in reached.values():
        destinations.sort()
    return version, states

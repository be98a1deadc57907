"""What ingest's fan-out reads, remembered per process between transactions.

Fan-out needs, for a batch of events, the destinations subscribed to each (tenant, pattern)
candidate (the subscription index, see shared/store/ingest_tx.py), each reached destination's
payload filter, and whether each publishing tenant exists and is enabled. A process remembers
what it read in a :class:`FanOutMemory`, labelled with the database's fan-out version (table
`fan_out_version`, schema 22): every change that can alter those answers (a subscription
added or removed, a filter changed, a tenant created, removed, disabled or enabled) sets the
version to a new random value inside the changing transaction.

Each ingest transaction reads the version in its first statement, together with whatever the
memory lacks; what the memory holds is used only when that version equals the memory's label.
So a change committed before an event's transaction reads the version (on any host, by any
process) is honoured exactly as when everything was read anew, and in the steady state
fan-out costs one small statement per batch, however many destinations and tenants exist.

The invariant: every entry in a memory was read by a statement that read the memory's
version. :meth:`FanOutMemory.absorb` keeps it (a different version empties the memory first),
under a lock so two transactions of one process cannot interleave their updates.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hookline.shared.policy.notify import is_operational
from hookline.shared.store.ops import Query, Rows, Tx

Key = tuple[str, str]
"""(tenant, subscription pattern)."""
Reached = tuple[tuple[int, str | None], ...]
"""(destination id, its payload filter's JSON text or None) per subscribed destination."""
TenantState = bool | None
"""A tenant's disabled flag; None: no such tenant."""

MAX_REMEMBERED = 200_000
"""Keys plus tenants a memory holds at most (about 40 MB at worst); past it, it starts over.
Event types are the caller's to choose, so the keys seen are not bounded otherwise."""
WHOLE_INDEX_LIMIT = 50_000
"""A memory loads the whole subscription index and every tenant's state in one statement
(about 20 ms for 30,000 subscriptions) when neither exceeds this many rows; it then answers
every key, those with no destination too, without asking the database. Past it, it learns
key by key."""


def subscription_patterns(event_type: str) -> list[str]:
    """The subscription patterns that match `event_type`: itself, `*`, and `prefix.*` for
    every `.` in it (the rule of :func:`hookline.shared.endpoint_models.subscribes`); `*`
    not for an operational event (`hookline.`: only a subscription naming it receives it)."""
    patterns = [event_type] if is_operational(event_type) else [event_type, "*"]
    patterns += [event_type[:i + 1] + "*" for i, c in enumerate(event_type) if c == "."]
    return patterns


@dataclass(frozen=True, slots=True)
class FanOutView:
    """One transaction's answers: the destinations of each key (a key it lacks: none) and the
    state of each tenant (a tenant it lacks: no such tenant). A view of the whole index is
    kept by the memory and answers every transaction until the version moves; it is never
    changed after, except for `reaches`, what :meth:`reach` worked out."""

    subscriptions: dict[Key, Reached]
    tenants: dict[str, TenantState]
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


class FanOutMemory:
    """A process's remembered fan-out answers at one version (see the module doc): the whole
    index (`whole`: a key it lacks has no destination, a tenant it lacks does not exist), or
    the answers to the keys and tenants asked so far."""

    __slots__ = ("_lock", "_whole", "subscriptions", "tenants", "too_big", "version", "whole")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.version: int | None = None
        self.whole = False
        self.too_big = False
        """The index exceeded WHOLE_INDEX_LIMIT once: this process learns key by key."""
        self.subscriptions: dict[Key, Reached] = {}
        self.tenants: dict[str, TenantState] = {}
        self._whole: FanOutView | None = None

    def recall(self, keys: Iterable[Key], tenants: Iterable[str]
               ) -> tuple[int | None, dict[Key, Reached], dict[str, TenantState]]:
        """(the label, the remembered answers among `keys` and `tenants`) of a key-by-key
        memory."""
        with self._lock:
            subscriptions, states = self.subscriptions, self.tenants
            return (self.version,
                    {k: subscriptions[k] for k in keys if k in subscriptions},
                    {t: states[t] for t in tenants if t in states})

    def whole_view(self) -> tuple[int | None, FanOutView | None]:
        """(the label, the whole index as a view; None when the memory is not whole)."""
        with self._lock:
            return self.version, self._whole if self.whole else None

    def absorb(self, version: int, view: FanOutView) -> None:
        """Remember `view`, read at `version` (a different version forgets the rest first)."""
        with self._lock:
            if version != self.version or (len(self.subscriptions) + len(self.tenants)
                                           + len(view.subscriptions) > MAX_REMEMBERED):
                self.subscriptions, self.tenants = {}, {}
                self.version, self.whole, self._whole = version, False, None
            self.subscriptions.update(view.subscriptions)
            self.tenants.update(view.tenants)

    def replace(self, version: int, view: FanOutView) -> None:
        """Hold `view`, the whole index read at `version`, and nothing else."""
        with self._lock:
            self.subscriptions, self.tenants = view.subscriptions, view.tenants
            self.version, self.whole, self._whole = version, True, view


def read_fan_out(memory: FanOutMemory | None, kinds: Iterable[tuple[str, str]],
                 tenants: Iterable[str]) -> Tx[FanOutView]:
    """The answers for the batch's (tenant, event type) `kinds` and its named `tenants` as of
    this transaction. While the memory is current: one statement (it reads the version, and
    what a key-by-key memory lacks). When the version moved since: the whole index again,
    or (past WHOLE_INDEX_LIMIT) a second statement asking again for what the memory held.
    Without a memory, one statement asks for everything."""
    if memory is not None:
        label, whole = memory.whole_view()
        if whole is not None:
            version, _ = yield from _read(set(), set())
            if version == label:
                return whole
        if not memory.too_big:
            version, index = yield from _read_whole()
            if index is not None:
                memory.replace(version, index)
                return index
            memory.too_big = True
    keys = {(tenant, pattern) for tenant, event_type in kinds
            for pattern in subscription_patterns(event_type)}
    tenants = set(tenants)
    if memory is None:
        _, view = yield from _read(keys, tenants)
        return view
    label, known_keys, known_tenants = memory.recall(keys, tenants)
    version, fresh = yield from _read(keys - known_keys.keys(), tenants - known_tenants.keys())
    memory.absorb(version, fresh)
    if version != label and (known_keys or known_tenants):
        again_version, again = yield from _read(set(known_keys), set(known_tenants))
        memory.absorb(again_version, again)
        known_keys, known_tenants = again.subscriptions, again.tenants
    return FanOutView({**known_keys, **fresh.subscriptions}, {**known_tenants, **fresh.tenants})


def _read(keys: set[Key], tenants: set[str]) -> Tx[tuple[int, FanOutView]]:
    """(the version, the answers for exactly `keys` and `tenants`) from one statement."""
    found = yield Query("fan_out_view", {
        "keys": Rows(("tenant_id", "pattern"), sorted(keys)),
        "tenants": Rows(("id",), [(t,) for t in sorted(tenants)])})
    reached: dict[Key, list[tuple[int, str | None]]] = {k: [] for k in keys}
    version, states = _collect(found, reached)
    return version, FanOutView({k: tuple(v) for k, v in reached.items()},
                               {**dict.fromkeys(tenants), **states})


def _read_whole() -> Tx[tuple[int, FanOutView | None]]:
    """(the version, the whole index and every tenant's state; None past
    WHOLE_INDEX_LIMIT) from one statement."""
    found = yield Query("fan_out_index", {"limit": WHOLE_INDEX_LIMIT + 1})
    reached: dict[Key, list[tuple[int, str | None]]] = {}
    version, states = _collect(found, reached)
    if len(states) > WHOLE_INDEX_LIMIT or sum(map(len, reached.values())) > WHOLE_INDEX_LIMIT:
        return version, None
    return version, FanOutView({k: tuple(v) for k, v in reached.items()}, states)


def _collect(found: Iterable[Any], reached: dict[Key, list[tuple[int, str | None]]]
             ) -> tuple[int, dict[str, TenantState]]:
    """Sort `fan_out_view` or `fan_out_index` rows: the subscriptions into `reached` (in
    destination id order); returns (the version, the tenants' states)."""
    version = 0
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
    for destinations in reached.values():
        destinations.sort()
    return version, states

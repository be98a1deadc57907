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
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class FanOutView:
    """One transaction's answers: the destinations of every asked key (empty: none) and the
    state of every asked tenant."""

    subscriptions: dict[Key, Reached]
    tenants: dict[str, TenantState]


class FanOutMemory:
    """A process's remembered fan-out answers at one version (see the module doc)."""

    __slots__ = ("_lock", "subscriptions", "tenants", "version")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.version: int | None = None
        self.subscriptions: dict[Key, Reached] = {}
        self.tenants: dict[str, TenantState] = {}

    def recall(self, keys: Iterable[Key], tenants: Iterable[str]
               ) -> tuple[int | None, dict[Key, Reached], dict[str, TenantState]]:
        """(the label, the remembered answers among `keys` and `tenants`)."""
        with self._lock:
            subscriptions, states = self.subscriptions, self.tenants
            return (self.version,
                    {k: subscriptions[k] for k in keys if k in subscriptions},
                    {t: states[t] for t in tenants if t in states})

    def absorb(self, version: int, view: FanOutView) -> None:
        """Remember `view`, read at `version` (a different version forgets the rest first)."""
        with self._lock:
            if version != self.version or (len(self.subscriptions) + len(self.tenants)
                                           + len(view.subscriptions) > MAX_REMEMBERED):
                self.subscriptions, self.tenants = {}, {}
                self.version = version
            self.subscriptions.update(view.subscriptions)
            self.tenants.update(view.tenants)


def read_fan_out(memory: FanOutMemory | None, keys: Iterable[Key],
                 tenants: Iterable[str]) -> Tx[FanOutView]:
    """The answers for `keys` and `tenants` as of this transaction: one statement when the
    memory is current (it then asks only for what the memory lacks), two when the database's
    version moved since (the second asks again for what the memory held). Without a memory,
    one statement asks for everything."""
    keys, tenants = set(keys), set(tenants)
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
    version = 0
    reached: dict[Key, list[tuple[int, str | None]]] = {k: [] for k in keys}
    states: dict[str, TenantState] = dict.fromkeys(tenants)
    for r in found:
        kind = r["kind"]
        if kind == "subscription":
            reached[(r["tenant_id"], r["pattern"])].append(
                (int(r["destination_id"]), r["filter"]))
        elif kind == "tenant":
            states[r["tenant_id"]] = bool(r["disabled"])
        else:
            version = int(r["version"])
    return version, FanOutView({k: tuple(sorted(v)) for k, v in reached.items()}, states)

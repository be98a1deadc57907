"""Ingest's transaction, written once for both backends as a generator of
:mod:`hookline.shared.store.ops` operations: a batch of events and the job of each subscribed
destination, committed together (the store's `add_events` and `add_backlog`).

Fan-out reads the subscription index (`destination_subscriptions`, kept in step with the
destinations table by triggers inside the same database): an event of type `a.b.c` for tenant
T reaches the live destinations of T subscribed to `a.b.c`, `a.b.*`, `a.*` or `*`. The lookup
runs inside the transaction that stores the event, so a destination created, changed, paused
or removed by a transaction that committed before it (on any host) is honoured exactly; its
cost follows the destinations an event reaches, not the destinations that exist. A process
remembers the answers between transactions, labelled with the database's fan-out version,
which that same transaction reads first (shared/store/fan_out_view.py): the guarantee holds,
and in the steady state fan-out is one small statement per batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hookline.shared.models import (
    DEFAULT_TENANT,
    Accepted,
    Duplicate,
    NewEvent,
    StoreResult,
    TenantRefusal,
    TenantRefused,
)
from hookline.shared.policy import forwarding
from hookline.shared.signing import new_message_ids
from hookline.shared.store.fan_out_view import (
    FanOutMemory,
    FanOutView,
    TenantState,
    read_fan_out,
    read_tenant_states,
    refresh_fan_out,
)
from hookline.shared.store.filter_tx import load_filters
from hookline.shared.store.jobs_tx import insert_jobs_tx
from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.ops import BEGIN_WRITE, NOTIFY, NOW, Query, Rows, Tx
from hookline.shared.store.tenants_tx import new_token_epoch

EventKey = tuple[str, str, str]
"""(tenant, source, source event id): the idempotency key."""


def add_events_tx(events: Sequence[NewEvent], *, create_tenants: bool = False,
                  memory: FanOutMemory | None = None,
                  shared_lock: bool = False) -> Tx[list[StoreResult]]:
    """Insert a batch of events, then the jobs of all of them in one query; each event that is
    new (not stored, nor earlier in the batch) is Accepted, the others Duplicate; an event for
    a tenant that does not exist (unless `create_tenants`) or is disabled is TenantRefused.
    `memory`: the process's remembered fan-out answers (shared/store/fan_out_view.py);
    `shared_lock`: the store's writers share one lock (SQLite), so the memory is brought up
    to date before it is taken."""
    if not events:
        return []
    now = yield NOW
    # The rows are built before the write lock is taken: SQLite has one writer for every
    # process, so ingest holds the lock only for the statements.
    event_rows = [(message_id, e.tenant, e.source, e.source_event_id, e.type, e.body,
                   forwarding.encode(e.forwarded_headers), e.trace_context, e.schema_problem)
                  for message_id, e in zip(new_message_ids(len(events), now), events,
                                           strict=True)]
    named = sorted({e.tenant for e in events} - {DEFAULT_TENANT})
    kinds = {(e.tenant, e.type) for e in events}
    if shared_lock:
        yield from refresh_fan_out(memory)
    yield BEGIN_WRITE
    answers = yield from read_fan_out(memory, kinds, named, reload=not shared_lock)
    refused = yield from _tenant_refusals(answers.tenants, named, create_tenants)
    kept = [e for e in events if e.tenant not in refused]
    new_events = Rows(
        ("message_id", "tenant_id", "source", "source_event_id", "type", "body",
         "forwarded_headers", "trace_context", "schema_problem"),
        [r for r, e in zip(event_rows, events, strict=True) if e.tenant not in refused]
        if refused else event_rows)
    inserted: dict[EventKey, Any] = {
        (r["tenant_id"], r["source"], r["source_event_id"]): r for r in (yield Query(
            "insert_event", {"events": new_events}, per_row=True))} if kept else {}
    keys = [(e.tenant, e.source, e.source_event_id) for e in kept]
    missing = [k for k in dict.fromkeys(keys) if k not in inserted]
    existing: dict[EventKey, Any] = {
        (r["tenant_id"], r["source"], r["source_event_id"]): r for r in (yield Query(
            "find_event", {"keys": Rows(("tenant_id", "source", "source_event_id"), missing)},
            per_row=True))} if missing else {}
    fresh = [(e, k) for e, k in zip(kept, keys, strict=True) if k in inserted]
    reached, texts = _fan_out(answers.view, [e for e, _ in fresh])
    filters = yield from load_filters(texts, [e.tenant for e, _ in fresh])
    pairs: list[tuple[Any, int]] = []
    first: set[EventKey] = set()
    for event, key in fresh:
        if key not in first:
            first.add(key)
            event_id = inserted[key]["id"]
            targets: Sequence[int] = reached.get((event.tenant, event.type), ())
            if filters is not None:
                targets = filters.select(event, targets)
            pairs += [(event_id, d) for d in targets]
    job_ids: dict[int, list[int]] = {}
    deltas = MetricDeltas()  # the figures /metrics reads, after the rows (oldest job probe)
    if pairs:  # one query for every job of the batch: this is ingest's hot path
        for r in (yield from insert_jobs_tx(pairs, deltas)):
            job_ids.setdefault(r["event_id"], []).append(r["id"])
        if (yield from _claimable(pairs, shared_lock)):
            yield NOTIFY
    deltas.events(len(inserted))
    if filters is not None:
        filters.count(deltas)
    yield from deltas.apply()
    results: list[StoreResult] = []
    seen: set[EventKey] = set()
    for event in events:
        if event.tenant in refused:
            results.append(TenantRefused(tenant=event.tenant, reason=refused[event.tenant]))
            continue
        key = (event.tenant, event.source, event.source_event_id)
        if key in inserted and key not in seen:
            row = inserted[key]
            results.append(Accepted(event_id=row["id"], message_id=row["message_id"],
                                    job_ids=tuple(sorted(job_ids.get(row["id"], ())))))
        else:
            row = inserted.get(key) or existing[key]
            results.append(Duplicate(event_id=row["id"], message_id=row["message_id"]))
        seen.add(key)
    return results


def _claimable(pairs: Sequence[tuple[int, int]], shared_lock: bool) -> Tx[bool]:
    """Whether a worker could claim one of the new jobs of `pairs` ((event id, destination
    id)) now, so the commit should wake the workers: False only when every destination is
    paused, read where the store's writers share one lock (SQLite). There a resume commits
    either before this transaction (read here) or after it, and then wakes the workers
    itself. Elsewhere a resume may commit between the read and the COMMIT, so always True.
    (Each worker woken runs a claim: waking them for jobs nobody may claim cost 9 to 17 % of
    ingest's events per second on 2 cores, docs/benchmarks.md.)"""
    if not shared_lock:
        return True
    live = yield Query("any_live_destination",
                       {"destination_ids": sorted({destination for _, destination in pairs})},
                       want="one")
    return live is not None


def _tenant_refusals(known: Mapping[str, TenantState], named: Sequence[str],
                     create_tenants: bool) -> Tx[dict[str, TenantRefusal]]:
    """{tenant: reason} for the batch's `named` tenants (the default tenant always exists and
    cannot be disabled) that may not publish, from their `known` states; with
    `create_tenants`, the missing ones are created first (and read again: another host may
    have created one, disabled, a moment before)."""
    states = {t: known.get(t) for t in named}
    absent = [t for t, state in states.items() if state is None]
    if create_tenants and absent:
        # Each with a fresh token epoch, as a PUT would: a token minted for an earlier
        # tenant of the same id (deleted, its events purged) must not open this one.
        yield Query("create_tenants", {"tenants": Rows(
            ("id", "epoch"), [(t, new_token_epoch()) for t in absent])}, want="count")
        states.update((yield from read_tenant_states(absent)))
    return {t: "tenant_not_found" if state is None else "tenant_disabled"
            for t, state in states.items() if state is not False}


def _fan_out(view: FanOutView, events: Sequence[NewEvent]
             ) -> tuple[dict[tuple[str, str], list[int]], dict[int, str]]:
    """({(tenant, event type): destination ids in id order} for the batch's new events,
    {reached destination id: its payload filter's JSON text} for those that have one), from
    the subscription index's answers in `view`."""
    reached: dict[tuple[str, str], list[int]] = {}
    texts: dict[int, str] = {}
    for tenant, event_type in {(e.tenant, e.type) for e in events}:
        found = view.reach(tenant, event_type)
        if found:
            reached[(tenant, event_type)] = [destination_id for destination_id, _ in found]
            texts.update((d, text) for d, text in found if text is not None)
    return reached, texts

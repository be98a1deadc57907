"""Ingest's transaction, written once for both backends as a generator of
:mod:`hookline.shared.store.ops` operations: a batch of events and the job of each subscribed
destination, committed together (the store's `add_events` and `add_backlog`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hookline.shared.endpoint_models import subscribes
from hookline.shared.models import Accepted, Duplicate, NewEvent
from hookline.shared.policy import forwarding
from hookline.shared.signing import new_message_ids
from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.ops import BEGIN_WRITE, NOTIFY, NOW, Query, Rows, Tx, one


def add_events_tx(events: Sequence[NewEvent]) -> Tx[list[Accepted | Duplicate]]:
    """Insert a batch of events, then the jobs of all of them in one query; each event that is
    new (not stored, nor earlier in the batch) is Accepted, the others Duplicate."""
    if not events:
        return []
    now = yield NOW
    # The rows are built before the write lock is taken: SQLite has one writer for every
    # process, so ingest holds the lock only for the statements.
    new_events = Rows(
        ("message_id", "source", "source_event_id", "type", "body", "forwarded_headers"),
        [(message_id, e.source, e.source_event_id, e.type, e.body,
          forwarding.encode(e.forwarded_headers))
         for message_id, e in zip(new_message_ids(len(events), now), events, strict=True)])
    yield BEGIN_WRITE
    # [id, event types] of each live destination, read as one row (one step, not one per
    # destination: ingest's hot path).
    subscriptions = [(destination_id, json.loads(event_types)) for destination_id, event_types
                     in json.loads((yield one("subscriptions"))["subscriptions"])]
    inserted = {(r["source"], r["source_event_id"]): r for r in (yield Query(
        "insert_event", {"events": new_events}, per_row=True))}
    keys = [(e.source, e.source_event_id) for e in events]
    missing = [k for k in dict.fromkeys(keys) if k not in inserted]
    existing = {(r["source"], r["source_event_id"]): r for r in (yield Query(
        "find_event", {"keys": Rows(("source", "source_event_id"), missing)},
        per_row=True))} if missing else {}
    pairs: list[tuple[int, int]] = []
    first: set[tuple[str, str]] = set()
    for event, key in zip(events, keys, strict=True):
        if key in inserted and key not in first:
            first.add(key)
            pairs += [(inserted[key]["id"], destination_id)
                      for destination_id, event_types in subscriptions
                      if subscribes(event_types, event.type)]
    job_ids: dict[int, list[int]] = {}
    if pairs:  # one query for every job of the batch: this is ingest's hot path
        for r in (yield Query("insert_jobs", {"pairs": Rows(("event_ids", "destination_ids"),
                                                             pairs)}, per_row=True)):
            job_ids.setdefault(r["event_id"], []).append(r["id"])
        yield NOTIFY
    deltas = MetricDeltas()  # the figures /metrics reads, after the rows (oldest job probe)
    deltas.events(len(inserted))
    for _, destination_id in pairs:
        deltas.jobs(destination_id, None, "pending")
    yield from deltas.apply()
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

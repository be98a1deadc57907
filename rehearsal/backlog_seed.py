"""Seed a database with a backlog of pending delivery jobs, through the store.

The backlog scenario (rehearsal/scenario_backlog.py) needs up to millions of pending jobs
before the service starts. They are written by the store (`Store.add_backlog`: what
`add_events` writes for ingest, in fewer statements, in large batches), so the rows are those
ingest writes, whatever the schema and migrations become.
"""

from __future__ import annotations

import asyncio
import os

from hookline.rehearsal.loadgen import event_body
from hookline.shared.models import NewEvent
from hookline.shared.store import SqliteOptions, Store, open_store

EVENT_TYPE = "bench.event"
"""Type of every seeded event (the load generator's too)."""
BATCH_EVENTS = 5_000
"""Events per `add_events` transaction while seeding."""
_EXCLUDED_TYPE = "hookline.bench.not-subscribed"
"""A subscription no seeded event matches: keeps a destination out of the last event."""


def fill_backlog(db: str, jobs: int, body_bytes: int, batch_events: int = BATCH_EVENTS) -> None:
    """Write `jobs` pending jobs into the database `db`, spread evenly over its live
    destinations that take `bench.event` (paused ones get jobs too, as in ingest).

    Each event is a `POST /v1/events` body of about `body_bytes` bytes from source `api`,
    stored with `Store.add_backlog` in transactions of `batch_events` events, so each
    receiving destination gets one job per event, due at once. When `jobs` is not a multiple
    of the destinations, the last event goes to the first destinations only (the others are
    unsubscribed from it for that one transaction, then restored). The store runs with
    synchronous NORMAL (setup, not measured); nothing else may change destinations meanwhile.

    Args:
        db: a SQLite path or PostgreSQL URL the store has already migrated.
        jobs: pending jobs to write, at least 1.
        body_bytes: size of each event body, bytes.
        batch_events: events per transaction.

    Raises:
        ValueError: `jobs` is below 1, or no live destination takes `bench.event`.
        StoreError: the store failed.
    """
    if jobs < 1:
        raise ValueError("fill_backlog needs at least one job")
    asyncio.run(_fill(db, jobs, body_bytes, batch_events))


async def _fill(db: str, jobs: int, body_bytes: int, batch_events: int) -> None:
    store = open_store(db, SqliteOptions(synchronous="NORMAL"))
    await store.open()
    try:
        receiving = [d for d in await store.list_destinations()
                     if d.subscribes_to(EVENT_TYPE)]
        if not receiving:
            raise ValueError("fill_backlog needs a live destination that takes bench.event")
        full_events, rest = divmod(jobs, len(receiving))
        run_id = os.urandom(4).hex()
        for first in range(0, full_events, batch_events):
            await _add(store, run_id, range(first, min(full_events, first + batch_events)),
                       body_bytes)
        if rest:
            left_out = receiving[rest:]
            for dest in left_out:
                await store.update_destination(dest.name, event_types=[_EXCLUDED_TYPE])
            try:
                await _add(store, run_id, range(full_events, full_events + 1), body_bytes)
            finally:
                for dest in left_out:
                    await store.update_destination(dest.name,
                                                   event_types=list(dest.event_types))
        await store.maintenance()  # SQLite: fold the WAL back into the file
    finally:
        await store.close()


async def _add(store: Store, run_id: str, indexes: range, body_bytes: int) -> None:
    """Store one transaction of seeded events, numbered by `indexes`."""
    await store.add_backlog([
        NewEvent(source="api", source_event_id=f"bench-{run_id}-{i}", type=EVENT_TYPE,
                 body=event_body(i, run_id, body_bytes)) for i in indexes])

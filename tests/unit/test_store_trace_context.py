"""The trace context stored with an event and a destination's `propagate_trace`, in the store
on each backend in turn (a SQLite file, then PostgreSQL), and carried by `migrate-store`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hookline.shared.errors import InvalidSetting
from hookline.shared.models import AttemptResult, Retry
from hookline.shared.signing import generate_secret
from hookline.shared.store.copy import copy_sqlite_to_postgres
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tracing import decode_trace_context, encode_trace_context
from tests.conftest import new_event, query_db

LEASE_S = 30.0
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
STORED = encode_trace_context({"traceparent": PARENT, "tracestate": STATE})


def test_the_stored_form_round_trips_with_and_without_tracestate():
    assert f"{PARENT}\n{STATE}" == STORED
    assert decode_trace_context(STORED) == {"traceparent": PARENT, "tracestate": STATE}
    assert encode_trace_context({"traceparent": PARENT}) == PARENT
    assert decode_trace_context(PARENT) == {"traceparent": PARENT}
    assert encode_trace_context({}) is None and decode_trace_context(None) == {}


async def test_each_claim_carries_its_events_trace_context(store, clock):
    """The trace context goes in with the event and comes back with every claim of its jobs,
    the first attempt's and a retry's alike; an event stored without one (tracing off) and
    a duplicate of a traced event keep what the first copy stored."""
    await store.add_destination(name="traced", url="http://127.0.0.1:9/t",
                                secret=generate_secret(), event_types=["*"], max_in_flight=10,
                                propagate_trace=True)
    await store.add_destination(name="plain", url="http://127.0.0.1:9/p",
                                secret=generate_secret(), event_types=["*"], max_in_flight=10)
    traced = replace(new_event("e1"), trace_context=STORED)
    untraced = new_event("e2")
    await store.add_events([traced, untraced])
    await store.add_events([replace(new_event("e2"), trace_context=PARENT)])  # a duplicate

    claims = await store.claim("w1", 10, LEASE_S, 5)
    assert sorted(((c.destination_name, c.propagate_trace, c.trace_context) for c in claims),
                  key=str) == sorted([("traced", True, STORED), ("traced", True, None),
                                      ("plain", False, STORED), ("plain", False, None)], key=str)

    result = AttemptResult(started_at=clock(), duration_s=0.01, status_code=503)
    await store.finish([(c, Retry(delay_s=1.0, error="HTTP 503"), result) for c in claims])
    clock.advance(5)
    again = await store.claim("w1", 10, LEASE_S, 5)
    assert {c.attempt for c in again} == {2}
    assert sorted((c.trace_context for c in again), key=str) == [STORED, STORED, None, None]


async def test_propagate_trace_is_set_changed_and_shown(store):
    """`propagate_trace` defaults to off, is set at creation, changed by an update (the
    admin and tenant APIs' PATCH and the CLI's `update`), and shown by the destination's
    view; anything but a boolean is refused naming the field."""
    dest = await store.add_destination(name="d", url="http://127.0.0.1:9/d",
                                       secret=generate_secret(), event_types=["*"],
                                       max_in_flight=1)
    assert dest.propagate_trace is False and dest.redacted()["propagate_trace"] is False
    changed = await store.update_destination("d", propagate_trace=True)
    assert changed.propagate_trace is True
    assert (await store.get_destination("d")).redacted()["propagate_trace"] is True
    with pytest.raises(InvalidSetting, match="propagate_trace"):
        await store.update_destination("d", propagate_trace="yes")
    with pytest.raises(InvalidSetting, match="propagate_trace"):
        await store.add_destination(name="e", url="http://127.0.0.1:9/e",
                                    secret=generate_secret(), event_types=["*"],
                                    max_in_flight=1, propagate_trace=1)


async def test_migrate_store_carries_trace_context_and_propagate_trace(tmp_path: Path,
                                                                        pg_url: str):
    """`hookline migrate-store` copies both new columns to PostgreSQL unchanged."""
    source = str(tmp_path / "source.db")
    async with SqliteStore(source) as sqlite:
        await sqlite.add_destination(name="d", url="http://127.0.0.1:9/d",
                                     secret=generate_secret(), event_types=["*"],
                                     max_in_flight=1, propagate_trace=True)
        await sqlite.add_events([replace(new_event("e1"), trace_context=STORED),
                                 new_event("e2")])
    await copy_sqlite_to_postgres(source, pg_url)
    events = await query_db(pg_url, "SELECT source_event_id, trace_context FROM events "
                                    "ORDER BY id")
    assert [(e["source_event_id"], e["trace_context"]) for e in events] == [
        ("e1", STORED), ("e2", None)]
    [dest] = await query_db(pg_url, "SELECT propagate_trace FROM destinations")
    assert dest["propagate_trace"] == 1

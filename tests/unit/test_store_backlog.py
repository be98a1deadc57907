"""`Store.add_backlog`: bulk-loaded events get the same jobs `add_events` would give them, on
SQLite and PostgreSQL (the backlog benchmark seeds its database this way)."""

from __future__ import annotations

from hookline.shared.models import NewEvent
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store

SECRET = generate_secret()


def event(source_event_id: str, type_: str) -> NewEvent:
    return NewEvent(source="api", source_event_id=source_event_id, type=type_,
                    body=b'{"n": 1}')


async def test_backlog_fans_out_like_add_events_and_skips_known_ids(store: Store) -> None:
    await store.add_destination(name="all", url="http://127.0.0.1:9/a", secret=SECRET,
                                event_types=["*"], max_in_flight=10)
    await store.add_destination(name="orders", url="http://127.0.0.1:9/o", secret=SECRET,
                                event_types=["order.*"], max_in_flight=10)
    await store.add_events([event("known", "order.paid")])  # 2 jobs already

    written = await store.add_backlog([
        event("o1", "order.paid"), event("u1", "user.created"), event("o2", "order.sent"),
        event("known", "order.paid"),  # stored before: skipped
        event("o1", "user.created"),  # repeats earlier in the batch: skipped
    ])

    assert written == 5  # o1, o2: 2 jobs each; u1: 1 job
    jobs = await store.list_jobs(limit=100)
    assert len(jobs) == 7 and {j.status for j in jobs} == {"pending"}
    by_destination = {d: sum(j.destination == d for j in jobs) for d in ("all", "orders")}
    assert by_destination == {"all": 4, "orders": 3}
    assert len({(j.event_id, j.destination) for j in jobs}) == 7
    assert {j.event_type for j in jobs if j.destination == "orders"} == {"order.paid",
                                                                         "order.sent"}
    claimed = await store.claim("w", 10, 30.0, 5)
    assert len(claimed) == 7  # due at once, like ingest's jobs


async def test_an_empty_backlog_writes_nothing(store: Store) -> None:
    await store.add_destination(name="all", url="http://127.0.0.1:9/a", secret=SECRET,
                                event_types=["*"], max_in_flight=10)
    assert await store.add_backlog([]) == 0
    assert await store.list_jobs() == []

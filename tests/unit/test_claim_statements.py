"""What a claim asks the database, seen by the database driver's own record of the statements
it runs (a real store: SQLite's trace callback on the inline store, as the workers' is;
asyncpg's query logger on PostgreSQL): jobs with no attempt counted cost no takeover
statements. At everyday rates a statement costs about as much for 3 rows as flat out for 30
(docs/benchmarks.md, "A claim of fresh work asks no takeover questions"), so each one left
out is CPU saved per event (and on PostgreSQL a round trip).

The takeover semantics themselves (a lost worker's job, a replay of a job lost at the cap,
a hand-back) are tested on both backends in tests/unit/test_store_lost_attempts.py and
tests/unit/test_store_quarantine.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from hookline.shared.models import AttemptResult, Retry
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.store.claim_tx import untried_job
from tests.conftest import FakeClock, is_postgres, new_event

# Words only each statement holds, in both dialects (shared/store/queries/*.sql).
TAKEOVERS_AMONG = "AS open_attempts"
MARK_ATTEMPT_LOST = "'lease expired (worker lost)'"


@contextlib.asynccontextmanager
async def traced(store: Any, store_url: str, clock: FakeClock
                 ) -> AsyncIterator[tuple[Store, list[str]]]:
    """A store on the test's database whose statements are recorded as the driver runs
    them: the fixture's own SQLite store, or a PostgreSQL store (the same clock) whose
    connections each log their queries."""
    statements: list[str] = []
    if not is_postgres(store_url):
        store._connection().set_trace_callback(statements.append)
        yield store, statements
        return
    from hookline.shared.store.postgres import PostgresStore

    class TracedPostgresStore(PostgresStore):
        async def _init_connection(self, conn: Any) -> None:
            await super()._init_connection(conn)
            conn.add_query_logger(lambda logged: statements.append(logged.query))

    traced_store = TracedPostgresStore(store_url, clock=clock)
    await traced_store.open()
    try:
        yield traced_store, statements
    finally:
        await traced_store.close()


async def ran(statements: list[str], opening: str) -> int:
    """How many of the traced `statements` hold `opening` (a statement's text begins with
    the comment lines above it in the file), once every record has arrived (asyncpg logs a
    query one event-loop step after it ran)."""
    await asyncio.sleep(0)
    return sum(1 for text in statements if opening in text)


async def asked(statements: list[str]) -> tuple[int, int]:
    """(takeovers_among, mark_attempt_lost) statements among the traced ones."""
    return (await ran(statements, TAKEOVERS_AMONG), await ran(statements, MARK_ATTEMPT_LOST))


async def cleared(statements: list[str]) -> None:
    """Forget the traced statements, once every record of them has arrived."""
    await asyncio.sleep(0)
    statements.clear()


async def test_fresh_jobs_ask_no_takeover_and_a_retried_one_does(store, store_url,
                                                                  destination_factory, clock):
    """Twelve jobs never claimed: the claim asks neither takeovers_among nor
    mark_attempt_lost. A job retried once is asked about again, by both, and is not a
    takeover."""
    for name in ("d1", "d2", "d3"):
        await destination_factory(name)
    await store.add_events([new_event(f"e{n}") for n in range(4)])
    async with traced(store, store_url, clock) as (claimer, statements):
        await cleared(statements)
        claims = await claimer.claim("w1", 12, lease_s=30, max_attempts=5)
        assert len(claims) == 12 and not any(c.taken_over for c in claims)
        assert await asked(statements) == (0, 0)

        retry = AttemptResult(started_at=clock(), duration_s=0.01, status_code=503)
        assert await claimer.finish([(claims[0], Retry(delay_s=0, error="HTTP 503"), retry)])
        await cleared(statements)
        [again] = await claimer.claim("w1", 12, lease_s=30, max_attempts=5)
        assert again.job_id == claims[0].job_id and again.attempt == 2 and not again.taken_over
        assert await asked(statements) == (1, 1)


async def test_an_ordered_destinations_fresh_head_asks_no_takeover(store, store_url, clock):
    """An ordered destination's head (read by ordered_head, one job per claim) with no
    attempt counted is not asked about either; after a retry it is."""
    await store.add_destination(name="fifo", url="http://127.0.0.1:9/x", secret=generate_secret(),
                                event_types=["*"], max_in_flight=1, ordered=True)
    await store.add_events([new_event("e1"), new_event("e2")])
    async with traced(store, store_url, clock) as (claimer, statements):
        await cleared(statements)
        [head] = await claimer.claim("w1", 4, lease_s=30, max_attempts=5)
        assert await asked(statements) == (0, 0)
        retry = AttemptResult(started_at=clock(), duration_s=0.01, status_code=503)
        assert await claimer.finish([(head, Retry(delay_s=0, error="HTTP 503"), retry)])
        await cleared(statements)
        [again] = await claimer.claim("w1", 4, lease_s=30, max_attempts=5)
        assert again.job_id == head.job_id and not again.taken_over
        assert await asked(statements) == (1, 1)


async def test_an_ordered_destinations_head_whose_lease_expired_is_taken_over(store, store_url,
                                                                            clock):
    """An ordered destination's head whose worker was lost (lease expired) is asked about,
    by both statements, and taken over: only a pending head with no attempt counted is left
    out."""
    await store.add_destination(name="fifo", url="http://127.0.0.1:9/x", secret=generate_secret(),
                                event_types=["*"], max_in_flight=1, ordered=True)
    await store.add_events([new_event("e1")])
    async with traced(store, store_url, clock) as (claimer, statements):
        [head] = await claimer.claim("w1", 4, lease_s=30, max_attempts=5)
        clock.advance(31)
        await cleared(statements)
        [again] = await claimer.claim("w2", 4, lease_s=30, max_attempts=5)
        assert again.job_id == head.job_id and again.taken_over
        assert await asked(statements) == (1, 1)


def test_only_a_pending_job_never_claimed_nor_replayed_is_untried():
    assert untried_job("pending", 0, 0)
    assert not untried_job("pending", 1, 0)  # retried: it has an attempt row
    assert not untried_job("pending", 0, 1)  # replayed: its last attempt may be "worker lost"
    assert not untried_job("running", 0, 0)  # an expired lease: a takeover


async def test_what_untried_leaves_out_is_never_a_takeover(store, store_url, destination_factory,
                                                          clock):
    """The invariant the claim relies on, on both backends: a job handed back on its first
    claim is pending again with attempts 0 and replays 0, and its attempt row is closed, so
    its next claim is no takeover; a job replayed after its worker was lost at the cap has
    replays 1, so it is asked about, and taken over."""
    await destination_factory()
    await store.add_events([new_event("e1"), new_event("e2")])
    first = await store.claim("w1", 2, lease_s=30, max_attempts=1)
    assert await store.hand_back([first[0]]) == 1
    [job] = [j for j in await store.list_jobs() if j.id == first[0].job_id]
    assert (job.status, job.attempts) == ("pending", 0)
    [again] = await store.claim("w2", 2, lease_s=30, max_attempts=1)
    assert again.job_id == job.id and not again.taken_over

    clock.advance(31)  # both leases expire on their final attempt: dead, "worker lost"
    assert await store.claim("w3", 2, lease_s=30, max_attempts=1) == []
    assert await store.replay(job_id=job.id) == 1
    [replayed] = await store.claim("w3", 2, lease_s=30, max_attempts=1)
    assert replayed.job_id == job.id and replayed.taken_over

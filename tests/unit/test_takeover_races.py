"""PostgreSQL: a worker whose lease expired finishes late, just as another worker's claim
takes its job over. Neither may wait for the other in a cycle: the server would break it
after its deadlock check (1 s) by failing one transaction (StoreBusy), and the claim it
fails may carry up to 64 jobs of other destinations.

Locks are taken in one order by both: a finish locks its job before its attempt row (and its
destination after both), and a claim skips a job another transaction holds (FOR UPDATE SKIP
LOCKED) rather than wait for it while holding its destinations. A third connection holds a
row to stop one side at the point where, in the other order, the cycle would close."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from hookline.shared.models import AttemptResult, Claim, Done, Retry
from hookline.shared.store.postgres import PostgresStore
from tests.conftest import FakeClock, new_event
from tests.unit.test_ordered_head import _until_waiting

OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
FAILED = AttemptResult(started_at=0.0, duration_s=0.01, status_code=500)
SECRET = "whsec_" + "A" * 32
LEASE_S = 30.0
OUTCOMES = {"delivered": (Done(), OK), "retried": (Retry(delay_s=0.0, error="HTTP 500"), FAILED)}


async def _late_claim(store: PostgresStore, clock: FakeClock, *, ordered: bool = False) -> Claim:
    """One job of destination `d` (ordered or not) claimed by worker `late`, whose lease has
    since expired."""
    await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                secret=SECRET, max_in_flight=10, ordered=ordered)
    await store.add_events([new_event("e1")])
    [late] = await store.claim("late", 1, LEASE_S, 5)
    clock.advance(LEASE_S + 1)
    return late


async def _until_done_or_waiting(task: asyncio.Future[Any], conn: asyncpg.Connection,
                                 statement: str) -> None:
    """Return once `task` is done or a session waits for a lock in `statement`."""
    waiting = asyncio.ensure_future(_until_waiting(conn, statement))
    try:
        await asyncio.wait({task, waiting}, timeout=20.0, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()


async def _job(conn: asyncpg.Connection, job_id: int) -> tuple[str, str | None]:
    row = await conn.fetchrow("SELECT status, lease_owner FROM jobs WHERE id = $1", job_id)
    return row["status"], row["lease_owner"]


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
async def test_a_late_finish_holding_its_job_is_not_taken_over_and_completes(
        pg_url, outcome):
    """The late finish has locked its job and waits for its attempt row (held here); a claim
    meanwhile skips the job instead of taking it over and then waiting for that attempt row,
    which the finish would hold next: the claim takes nothing, the finish completes."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        late = await _late_claim(store, clock)
        blocker = await asyncpg.connect(pg_url)
        try:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM attempts WHERE lease_token = $1 "
                                      "FOR UPDATE", late.lease_token)
                finish = asyncio.ensure_future(store.finish([(late, *OUTCOMES[outcome])]))
                await _until_waiting(blocker, "UPDATE attempts")
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 5))
                # In the other order the claim takes the job over and waits here too.
                await _until_done_or_waiting(claim, blocker, "UPDATE attempts SET error")
            done = await asyncio.wait_for(
                asyncio.gather(finish, claim, return_exceptions=True), timeout=20.0)
            assert done == [[True], []]
            assert await _job(blocker, late.job_id) == (
                ("done", None) if outcome == "delivered" else ("pending", None))
        finally:
            await blocker.close()


async def test_a_claim_holding_the_destination_skips_the_head_a_late_finish_holds(pg_url):
    """An ordered destination: the claim waits for the destination (held here), and the
    late finish of a failed attempt, having locked its job and attempt row, waits for the
    same destination (its failure run). Released, the claim reads the job as the head to
    take over (read unlocked, unlike an unordered destination's due jobs) but skips it
    rather than wait for the finish, which waits for the claim's destination: both
    complete."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        late = await _late_claim(store, clock, ordered=True)
        blocker = await asyncpg.connect(pg_url)
        try:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM destinations WHERE id = $1 FOR UPDATE",
                                      late.destination_id)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 5))
                await _until_waiting(blocker, "SELECT d.id FROM destinations d")
                finish = asyncio.ensure_future(store.finish([(late, *OUTCOMES["retried"])]))
                await _until_waiting(blocker, "UPDATE destinations SET failure_streak")
            done = await asyncio.wait_for(
                asyncio.gather(claim, finish, return_exceptions=True), timeout=20.0)
            assert done == [[], [True]]
            assert await _job(blocker, late.job_id) == ("pending", None)
            streak = await blocker.fetchval("SELECT failure_streak FROM destinations "
                                            "WHERE id = $1", late.destination_id)
            assert streak == 1
        finally:
            await blocker.close()


async def test_a_claim_taking_over_first_makes_the_late_finish_history_only(pg_url):
    """The other way round: the claim has taken the job over and waits for the old attempt
    row (held here) to close it as lost; the late finish waits for the job the claim holds,
    not for that row. Released, the claim completes, and the late result is recorded as the
    lost attempt's history: the job stays the new claim's."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        late = await _late_claim(store, clock)
        blocker = await asyncpg.connect(pg_url)
        try:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM attempts WHERE lease_token = $1 "
                                      "FOR UPDATE", late.lease_token)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 5))
                await _until_waiting(blocker, "UPDATE attempts SET error")
                finish = asyncio.ensure_future(store.finish([(late, *OUTCOMES["delivered"])]))
                await _until_waiting(blocker, "UPDATE jobs")
            taken, kept = await asyncio.wait_for(
                asyncio.gather(claim, finish, return_exceptions=True), timeout=20.0)
            assert [c.job_id for c in taken] == [late.job_id] and taken[0].taken_over
            assert kept == [False]
            assert await _job(blocker, late.job_id) == ("running", "next")
            old = await blocker.fetchrow("SELECT status_code, error FROM attempts "
                                         "WHERE lease_token = $1", late.lease_token)
            assert (old["status_code"], old["error"]) == (200, "lease expired (worker lost)")
        finally:
            await blocker.close()

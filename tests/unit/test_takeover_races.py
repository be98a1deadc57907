"""PostgreSQL: a worker whose lease expired finishes late, just as another worker's claim
takes its job over. Neither may wait for the other in a cycle: the server would break it
after its deadlock check (1 s) by failing one transaction (StoreBusy), and the claim it
fails may carry up to 64 jobs of other destinations.

A claim never waits for a job row another transaction holds (it skips it: FOR UPDATE SKIP
LOCKED), and waits for an attempt row only when it is still open and its job is the claim's;
a finish locks its job before its attempt row, and its destinations after both. A third
connection holds a row to stop one side at the point where, in the other order, the cycle
would close."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from hookline.shared.models import AttemptResult, Claim, Dead, Done, Retry
from hookline.shared.store.postgres import PostgresStore
from tests.conftest import FakeClock, new_event

OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
FAILED = AttemptResult(started_at=0.0, duration_s=0.01, status_code=500)
SECRET = "whsec_" + "A" * 32
LEASE_S = 30.0
OUTCOMES = {"delivered": (Done(), OK), "retried": (Retry(delay_s=0.0, error="HTTP 500"), FAILED)}


async def _destination(store: PostgresStore, *, ordered: bool = False) -> None:
    await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                secret=SECRET, max_in_flight=10, ordered=ordered)


async def _late_claim(store: PostgresStore, clock: FakeClock, *, ordered: bool = False,
                      max_attempts: int = 5) -> Claim:
    """One job of destination `d` (ordered or not) claimed by worker `late`, whose lease has
    since expired (with `max_attempts` 1, on its final attempt: lost at its cap)."""
    await _destination(store, ordered=ordered)
    await store.add_events([new_event("e1")])
    [late] = await store.claim("late", 1, LEASE_S, max_attempts)
    clock.advance(LEASE_S + 1)
    return late


HOLD_ATTEMPT = "SELECT 1 FROM attempts WHERE lease_token = $1 FOR UPDATE"
HOLD_DESTINATION = "SELECT 1 FROM destinations WHERE id = $1 FOR UPDATE"
"""What the third connection holds (its first argument: a lease token, a destination id)."""


@contextlib.asynccontextmanager
async def third_connection(url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own to the test's database, to hold rows and watch the others."""
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


async def _waiting(conn: asyncpg.Connection) -> int:
    """How many sessions of this database wait for a lock now."""
    await conn.execute("SELECT pg_stat_clear_snapshot()")  # read anew inside a transaction
    return int(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "wait_event_type = 'Lock' AND datname = current_database()"))


async def _until_waiting(conn: asyncpg.Connection, sessions: int,
                         unless_done: asyncio.Future[Any] | None = None) -> None:
    """Return once `sessions` sessions of this database wait for a lock, or `unless_done`
    is done (AssertionError after 20 s when it is not given)."""
    for _ in range(400):
        if (unless_done is not None and unless_done.done()) or await _waiting(conn) >= sessions:
            return
        await asyncio.sleep(0.05)
    if unless_done is None:
        raise AssertionError(f"fewer than {sessions} sessions wait for a lock")


async def _until_waiting_at_most(conn: asyncpg.Connection, sessions: int) -> None:
    """Return once at most `sessions` sessions of this database wait for a lock
    (AssertionError after 20 s)."""
    for _ in range(400):
        if await _waiting(conn) <= sessions:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"more than {sessions} sessions wait for a lock")


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
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute(HOLD_ATTEMPT, late.lease_token)
                finish = asyncio.ensure_future(store.finish([(late, *OUTCOMES[outcome])]))
                await _until_waiting(blocker, 1)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 5))
                # In the other order the claim takes the job over and waits here too.
                await _until_waiting(blocker, 2, unless_done=claim)
            done = await asyncio.wait_for(
                asyncio.gather(finish, claim, return_exceptions=True), timeout=20.0)
            assert done == [[True], []]
            assert await _job(blocker, late.job_id) == (
                ("done", None) if outcome == "delivered" else ("pending", None))


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
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute(HOLD_DESTINATION, late.destination_id)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 5))
                await _until_waiting(blocker, 1)
                finish = asyncio.ensure_future(store.finish([(late, *OUTCOMES["retried"])]))
                await _until_waiting(blocker, 2)
            done = await asyncio.wait_for(
                asyncio.gather(claim, finish, return_exceptions=True), timeout=20.0)
            assert done == [[], [True]]
            assert await _job(blocker, late.job_id) == ("pending", None)
            streak = await blocker.fetchval("SELECT failure_streak FROM destinations "
                                            "WHERE id = $1", late.destination_id)
            assert streak == 1


async def test_a_skipped_head_of_a_rate_limited_destination_keeps_its_turn(pg_url):
    """An ordered destination limited to one send per 10 s: its head is read unlocked, so a
    claim may choose it while another transaction holds it (here, as a late finish would)
    and then skip it, leasing nothing. Its next send stays where it was: once the head is
    let go, the next claim takes it at once, not 10 s later."""
    async with PostgresStore(pg_url, clock=FakeClock()) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret=SECRET, max_in_flight=10, ordered=True,
                                    rate_limit_per_s=0.1)
        await store.add_events([new_event("e1"), new_event("e2")])
        async with third_connection(pg_url) as blocker:
            head = await blocker.fetchval("SELECT min(id) FROM jobs")
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", head)
                assert await store.claim("w", 10, LEASE_S, 5) == []
            [claim] = await store.claim("w", 10, LEASE_S, 5)
            assert claim.job_id == head
            assert await store.claim("w", 10, LEASE_S, 5) == []  # the limit still holds


async def test_a_takeover_skipped_leaves_the_claim_the_other_due_jobs(pg_url):
    """An ordered destination's head is a takeover (its worker lost), read unlocked and
    chosen alone, but a late finish holds it (held here): the claim skips it, and takes the
    other destination's due job instead of nothing until the next wake-up or poll."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        late = await _late_claim(store, clock, ordered=True)
        await store.add_destination(name="d2", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret=SECRET, max_in_flight=10)
        await store.add_events([new_event("e2")])
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE",
                                      late.job_id)
                claimed = await store.claim("next", 10, LEASE_S, 5)
            assert [(c.destination_name, c.taken_over) for c in claimed] == [("d2", False)]
            [taken] = await store.claim("other", 10, LEASE_S, 5)  # a worker holding nothing
            assert (taken.job_id, taken.taken_over) == (late.job_id, True)


async def test_a_claim_taking_over_first_makes_the_late_finish_history_only(pg_url):
    """The other way round: the claim has taken the job over and waits for the old attempt
    row (held here) to close it as lost; the late finish waits for the job the claim holds,
    not for that row. Released, the claim completes, and the late result is recorded as the
    lost attempt's history: the job stays the new claim's."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        late = await _late_claim(store, clock)
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute(HOLD_ATTEMPT, late.lease_token)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 5))
                await _until_waiting(blocker, 1)
                finish = asyncio.ensure_future(store.finish([(late, *OUTCOMES["delivered"])]))
                await _until_waiting(blocker, 2)
            taken, kept = await asyncio.wait_for(
                asyncio.gather(claim, finish, return_exceptions=True), timeout=20.0)
            assert [c.job_id for c in taken] == [late.job_id] and taken[0].taken_over
            assert kept == [False]
            assert await _job(blocker, late.job_id) == ("running", "next")
            old = await blocker.fetchrow("SELECT status_code, error FROM attempts "
                                         "WHERE lease_token = $1", late.lease_token)
            assert (old["status_code"], old["error"]) == (200, "lease expired (worker lost)")


async def test_a_claim_skips_a_job_at_its_cap_that_a_late_finish_holds(pg_url):
    """Two jobs of one worker, both on their final attempt, leases expired; the worker
    finishes them late as dead letters, the higher id first, and its finish holds that job
    while it waits for its attempt row (held here). A claim ending the jobs lost at the cap
    (kill_lost_at_cap) skips the held job rather than lock the other and wait for it, which
    the finish would want next: the claim ends the other one (lost), the finish completes
    (its late result for that one is history only)."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        await _destination(store)
        await store.add_events([new_event("e1"), new_event("e2")])
        low, high = sorted(await store.claim("late", 2, LEASE_S, 1), key=lambda c: c.job_id)
        clock.advance(LEASE_S + 1)
        dead = (Dead(error="HTTP 500"), FAILED)
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute(HOLD_ATTEMPT, high.lease_token)
                finish = asyncio.ensure_future(store.finish([(high, *dead), (low, *dead)]))
                await _until_waiting(blocker, 1)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 1))
                await _until_waiting(blocker, 2, unless_done=claim)
            done = await asyncio.wait_for(
                asyncio.gather(finish, claim, return_exceptions=True), timeout=20.0)
            assert done == [[True, False], []]
            errors = await blocker.fetch("SELECT status, last_error FROM jobs ORDER BY id")
            assert [tuple(r) for r in errors] == [
                ("dead", "worker lost (lease expired on the final attempt)"),
                ("dead", "HTTP 500")]


async def test_a_late_finish_of_a_replayed_job_does_not_stop_its_takeover(pg_url):
    """A job died "worker lost" at its cap and was replayed; its lost worker comes back and
    finishes it late, with a fresh job of the same destination, both failed. The stale
    result is written to the old attempt row, which the finish holds from then on; it
    waits here for the fresh job's attempt row (held here), then will want the destination
    (the fresh job's failure run). A claim holding the destination takes the replay over
    and only reads that old row: both complete."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        await _destination(store)
        await store.add_events([new_event("e1")])
        [stale] = await store.claim("late", 1, LEASE_S, 1)
        clock.advance(LEASE_S + 1)
        assert await store.claim("other", 10, LEASE_S, 1) == []  # dies lost at its cap
        await store.add_events([new_event("e2")])
        [fresh] = await store.claim("late", 1, LEASE_S, 5)
        assert await store.replay(job_id=stale.job_id) == 1
        retried = (Retry(delay_s=0.0, error="HTTP 500"), FAILED)
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute(HOLD_ATTEMPT, fresh.lease_token)
                finish = asyncio.ensure_future(store.finish([(stale, *retried),
                                                             (fresh, *retried)]))
                await _until_waiting(blocker, 1)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 5))
                await _until_waiting(blocker, 2, unless_done=claim)
            kept, taken = await asyncio.wait_for(
                asyncio.gather(finish, claim, return_exceptions=True), timeout=20.0)
            assert kept == [False, True]
            assert [(c.job_id, c.taken_over) for c in taken] == [(stale.job_id, True)]
            old = await blocker.fetchrow("SELECT status_code, error FROM attempts "
                                         "WHERE lease_token = $1", stale.lease_token)
            assert (old["status_code"], old["error"]) == (
                500, "worker lost (lease expired on the final attempt)")


async def test_a_job_lost_at_its_cap_is_never_taken_over(pg_url):
    """A job on its final attempt whose lease expired is ended by the claim
    (kill_lost_at_cap), never taken over: its worker died on it. Here the kill skips it
    while a destination turning ordered holds it (marking it); that transaction then lets
    go of it unchanged before the claim reads its due jobs, and the claim must still leave
    it alone; the next claim ends it."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store, \
            PostgresStore(pg_url, clock=clock) as operator:
        operator.give_way_lock_timeout_s = 30.0  # a loaded machine's margin
        lost = await _late_claim(store, clock, max_attempts=1)
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute(HOLD_DESTINATION, lost.destination_id)
                turn = asyncio.ensure_future(operator.update_destination("d", ordered=True))
                await _until_waiting(blocker, 1)  # the job marked (held), waits for d
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 1))
                await _until_waiting(blocker, 2)  # the kill skipped the job; waits for d
            turned, taken = await asyncio.wait_for(
                asyncio.gather(turn, claim, return_exceptions=True), timeout=20.0)
            assert turned.ordered and taken == []
            assert await store.claim("next", 10, LEASE_S, 1) == []
            row = await blocker.fetchrow("SELECT status, attempts, last_error FROM jobs "
                                         "WHERE id = $1", lost.job_id)
            assert tuple(row) == ("dead", 1, "worker lost (lease expired on the final attempt)")


async def test_a_job_lost_at_its_cap_held_by_a_late_finish_that_rolls_back_is_not_taken_over(
        pg_url):
    """The same on a destination that is not ordered (its due jobs' read): the lost
    worker's late finish holds the job while the claim's kill skips it, then rolls back (a
    failed transaction; here cancelled) before the claim reads its due jobs. The claim
    leaves the job alone; the next claim ends it."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store, \
            PostgresStore(pg_url, clock=clock) as late_store:
        lost = await _late_claim(store, clock, max_attempts=1)
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute(HOLD_ATTEMPT, lost.lease_token)
                await blocker.execute(HOLD_DESTINATION, lost.destination_id)
                finish = asyncio.ensure_future(late_store.finish(
                    [(lost, Dead(error="HTTP 500"), FAILED)]))
                await _until_waiting(blocker, 1)  # holds the job, waits for its attempt
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 1))
                await _until_waiting(blocker, 2)  # the kill skipped the job; waits for d
                finish.cancel()  # its transaction rolls back: the job is free, unchanged
                await _until_waiting_at_most(blocker, 1)
            assert await asyncio.wait_for(claim, timeout=20.0) == []
            for _ in range(200):  # the cancelled transaction may hold the job a moment more
                assert await store.claim("next", 10, LEASE_S, 1) == []
                row = await blocker.fetchrow("SELECT status, attempts, last_error FROM jobs "
                                             "WHERE id = $1", lost.job_id)
                if row["status"] != "running":
                    break
                await asyncio.sleep(0.05)
            assert tuple(row) == ("dead", 1, "worker lost (lease expired on the final attempt)")

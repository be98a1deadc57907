"""PostgreSQL: an operator's change against a worker's transaction, where their row locks
could meet in a cycle (found by a reviewer, each reproduced here first). The server would
break such a cycle after its deadlock check (1 s) by failing either side, and a worker's
side may be a batch of 64 jobs. Instead:
- removing a destination, or a tenant's destinations, locks a destination and then its
  jobs, the reverse of a finish (its jobs, then their destinations): it never waits for a
  job row (NOWAIT: LockUnavailable at once, nothing changed) and is tried again (five tries)
  before the fault reaches the operator;
- a change of many destinations locks them in id order, as claims and finishes do (the
  retention round forgetting previous secrets, a tenant's removal).
A third connection holds a row, or the ordered-marks guard, to stop the worker's side where
the cycle would close."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from hookline.shared.errors import LockUnavailable, StoreBusy
from hookline.shared.models import AttemptResult, Dead, Retry
from hookline.shared.operator_models import JobSelection
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.store import ops
from hookline.shared.store.postgres import ORDERED_MARKS_LOCK, PostgresStore
from hookline.shared.tenant_models import TenantFields
from tests.conftest import FakeClock, new_event
from tests.unit.test_takeover_races import (
    HOLD_ATTEMPT,
    _until_waiting,
    third_connection,
)

FAILED = AttemptResult(started_at=0.0, duration_s=0.01, status_code=500)
RETRY = (Retry(delay_s=0.0, error="HTTP 500"), FAILED)
SECRET = "whsec_" + "A" * 32
LEASE_S = 30.0


async def _destination(store: PostgresStore, name: str, *, tenant: str = "_default",
                       event_types: list[str] | None = None) -> None:
    await store.add_destination(name=name, url="http://127.0.0.1:9/",
                                event_types=event_types or ["push"], secret=SECRET,
                                max_in_flight=10, tenant=tenant)


class _GivingWayStore(PostgresStore):
    """Records the LockUnavailable of each transaction that gave way."""

    gave_way: list[str]

    async def _transact(self, tx: Any, *, write: bool) -> Any:
        try:
            return await super()._transact(tx, write=write)
        except LockUnavailable as exc:
            self.gave_way = [*getattr(self, "gave_way", []), str(exc)]
            raise


async def _until_gave_way(store: _GivingWayStore) -> None:
    for _ in range(400):
        if getattr(store, "gave_way", []):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the removal never gave way")


async def _deadlocks(conn: asyncpg.Connection) -> int:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    return int(await conn.fetchval(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"))


def _no_deadlock(results: list[Any]) -> None:
    """No result is the server's deadlock error (a change giving way is a lock timeout)."""
    for r in results:
        assert not (isinstance(r, BaseException) and "deadlock" in str(r)), results


async def test_removing_a_destination_gives_way_to_a_finish(pg_url):
    """A finish has locked its job (and waits here for its attempt row); the destination's
    removal locks the destination and then waits for that job; the finish will want the
    destination (its failure run). The removal gives way at once, not waiting for the job;
    the finish completes; the removal, tried again, removes the destination and its job."""
    async with _GivingWayStore(pg_url, clock=FakeClock()) as store:
        await _destination(store, "d")
        await store.add_events([new_event("e1")])
        [claim] = await store.claim("w", 1, LEASE_S, 5)
        async with third_connection(pg_url) as blocker:
            before = await _deadlocks(blocker)
            async with blocker.transaction():
                await blocker.execute(HOLD_ATTEMPT, claim.lease_token)
                finish = asyncio.ensure_future(store.finish([(claim, *RETRY)]))
                await _until_waiting(blocker, 1)
                remove = asyncio.ensure_future(store.remove_destination("d"))
                await _until_gave_way(store)
            done = await asyncio.wait_for(
                asyncio.gather(finish, remove, return_exceptions=True), timeout=20.0)
            _no_deadlock(done)
            assert done == [[True], 1]  # the job, retried: pending, then ended
            assert "could not obtain lock on row" in store.gave_way[0]  # NOWAIT, no wait
            assert await _deadlocks(blocker) == before


async def test_removing_a_destination_gives_way_to_a_claim_ending_a_lost_job(pg_url):
    """A claim has ended a job lost at its cap (kill_lost_at_cap: it holds the job) and waits
    here to close its attempt; the destination's removal locks the destination and waits
    for that job; the claim will want the destination (its window). The removal gives way
    at once; the claim completes, with the destination's other job, which the removal, tried
    again, then ends."""
    clock = FakeClock()
    async with _GivingWayStore(pg_url, clock=clock) as store:
        await _destination(store, "d")
        await store.add_events([new_event("e1")])
        [lost] = await store.claim("lost", 1, LEASE_S, 1)
        await store.add_events([new_event("e2")])
        clock.advance(LEASE_S + 1)
        async with third_connection(pg_url) as blocker:
            before = await _deadlocks(blocker)
            async with blocker.transaction():
                await blocker.execute(HOLD_ATTEMPT, lost.lease_token)
                claim = asyncio.ensure_future(store.claim("next", 10, LEASE_S, 1))
                await _until_waiting(blocker, 1)
                remove = asyncio.ensure_future(store.remove_destination("d"))
                await _until_gave_way(store)
            done = await asyncio.wait_for(
                asyncio.gather(claim, remove, return_exceptions=True), timeout=20.0)
            _no_deadlock(done)
            assert len(done[0]) == 1 and done[1] == 1, done
            assert "could not obtain lock on row" in store.gave_way[0]
            assert await _deadlocks(blocker) == before


async def _failing_pair(store: PostgresStore, tenant: str = "_default") -> list[Any]:
    """Destinations `a` and `b` (of `tenant`) and an operator's destination of operational
    events, failing announced at once; one event, claimed to both: the claims."""
    store.notify = NotifyPolicy(failing_streak=1)
    await _destination(store, "a", tenant=tenant)
    await _destination(store, "b", tenant=tenant)
    await _destination(store, "ops", event_types=["hookline.*"])
    await store.add_events([new_event("e1", tenant=tenant)])
    claims = await store.claim("w", 10, LEASE_S, 5)
    assert len(claims) == 2
    return claims


async def test_a_tenants_removal_locks_its_destinations_in_id_order(pg_url):
    """A finish of failures to `a` and `b` holds `a` (its failure run) and waits here to
    announce it (the ordered-marks guard). The tenant's removal locks its destinations in id
    order, so it waits for `a` holding nothing the finish wants; in scan order (a's row
    moved after b's by an update) it held `b`, which the finish wants next."""
    async with PostgresStore(pg_url, clock=FakeClock()) as store:
        await store.put_tenant("t", TenantFields())
        claims = await _failing_pair(store, tenant="t")
        await store.update_destination("a", tenant="t", timeout_s=7.0)  # a's row moves
        async with third_connection(pg_url) as blocker:
            await blocker.execute("ANALYZE destinations")  # as autovacuum would: a seq scan
            before = await _deadlocks(blocker)
            async with blocker.transaction():
                await blocker.execute("SELECT pg_advisory_xact_lock($1)", ORDERED_MARKS_LOCK)
                finish = asyncio.ensure_future(store.finish([(c, *RETRY) for c in claims]))
                await _until_waiting(blocker, 1)
                delete = asyncio.ensure_future(store.delete_tenant("t"))
                await _until_waiting(blocker, 2, unless_done=delete)
            done = await asyncio.wait_for(
                asyncio.gather(finish, delete, return_exceptions=True), timeout=20.0)
            _no_deadlock(done)
            assert done[0] == [True, True], done
            assert await _deadlocks(blocker) == before


async def test_forgetting_previous_secrets_locks_destinations_in_id_order(pg_url):
    """The retention round forgets previous secrets whose overlap ended, locking their
    destinations in id order: behind a finish that holds `a` and will want `b`, it waits
    for `a` first, holding nothing; in scan order (a rotated after b) it held `b`."""
    clock = FakeClock()
    async with PostgresStore(pg_url, clock=clock) as store:
        claims = await _failing_pair(store)
        await store.rotate_secret("b", "whsec_" + "B" * 32, 1.0)
        await store.rotate_secret("a", "whsec_" + "C" * 32, 1.0)  # a's row after b's
        clock.advance(2.0)
        async with third_connection(pg_url) as blocker:
            await blocker.execute("ANALYZE destinations")
            before = await _deadlocks(blocker)
            async with blocker.transaction():
                await blocker.execute("SELECT pg_advisory_xact_lock($1)", ORDERED_MARKS_LOCK)
                finish = asyncio.ensure_future(store.finish([(c, *RETRY) for c in claims]))
                await _until_waiting(blocker, 1)
                purge = asyncio.ensure_future(store.purge(
                    bodies_before_s=0.0, metadata_before_s=0.0, dedupe_before_s=0.0))
                await _until_waiting(blocker, 2)
            done = await asyncio.wait_for(
                asyncio.gather(finish, purge, return_exceptions=True), timeout=20.0)
            _no_deadlock(done)
            assert done[0] == [True, True] and done[1].previous_secrets == 2, done
            assert await _deadlocks(blocker) == before


async def test_a_removal_that_keeps_giving_way_changes_nothing(pg_url):
    """A job of the destination stays locked (here) longer than the removal's five tries:
    LockUnavailable reaches the caller, and the destination and its job are as they were."""
    async with PostgresStore(pg_url, clock=FakeClock()) as store:
        await _destination(store, "d")
        [accepted] = await store.add_events([new_event("e1")])
        async with third_connection(pg_url) as blocker:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE",
                                      accepted.job_ids[0])
                with pytest.raises(LockUnavailable, match="could not obtain lock on row"):
                    await store.remove_destination("d")
            assert (await store.get_destination("d")).name == "d"
            assert await blocker.fetchval("SELECT status FROM jobs") == "pending"


async def test_only_a_lock_not_granted_is_tried_again(monkeypatch):
    """retried_giving_way runs a new transaction after LockUnavailable only (five tries in
    all); any other StoreBusy (a statement timeout, SQLite's busy timeout) reaches the
    caller at once, as it would after the same wait again."""
    monkeypatch.setattr(ops, "GIVE_WAY_PAUSES_S", (0.0,) * 4)
    runs: list[str] = []

    def failing(fault: Exception, times: int) -> Any:
        async def run(tx: Any) -> str:
            runs.append(tx)
            if len(runs) <= times:
                raise fault
            return "done"
        return run

    assert await ops.retried_giving_way(failing(LockUnavailable("x"), 4), lambda: "tx") == "done"
    assert len(runs) == 5
    runs.clear()
    with pytest.raises(LockUnavailable):
        await ops.retried_giving_way(failing(LockUnavailable("x"), 5), lambda: "tx")
    assert len(runs) == 5
    runs.clear()
    with pytest.raises(StoreBusy):
        await ops.retried_giving_way(failing(StoreBusy("statement timeout"), 1), lambda: "tx")
    assert len(runs) == 1


async def test_an_event_published_while_its_destination_is_removed_gets_no_job_there(pg_url):
    """Ingest reads the fan-out (the destination live), then waits for the removal's lock on
    the destination row; the removal ends the destination's jobs and commits. The job ingest
    then writes would be pending on a removed destination, never claimed nor ended: it is
    not written, and not counted. The event is stored, with its job for the other
    destination."""
    async with PostgresStore(pg_url, clock=FakeClock()) as store:
        await _destination(store, "d")
        await _destination(store, "kept")
        async with third_connection(pg_url) as removal:
            async with removal.transaction():  # as remove_destination does, held open here
                await removal.execute(
                    "UPDATE destinations SET deleted_at = 1, name = name || '~removed-' || id "
                    "WHERE name = 'd'")
                ingest = asyncio.ensure_future(store.add_events([new_event("e1")]))
                await _until_waiting(removal, 1)
            [accepted] = await asyncio.wait_for(ingest, timeout=20.0)
            jobs = await removal.fetch("SELECT j.id, d.name FROM jobs j "
                                       "JOIN destinations d ON d.id = j.destination_id")
            assert [(r["id"], r["name"]) for r in jobs] == [(accepted.job_ids[0], "kept")]
            assert len(accepted.job_ids) == 1
            counted = await removal.fetch(  # the maintained figures /metrics reads
                "SELECT destination_id, sum(n) AS n FROM (SELECT destination_id, n FROM "
                "metric_counts WHERE family = 'jobs' AND label = 'pending' UNION ALL SELECT "
                "destination_id, n FROM metric_count_deltas WHERE family = 'jobs' AND label = "
                "'pending') c GROUP BY destination_id ORDER BY destination_id")
            kept = await removal.fetchval("SELECT id FROM destinations WHERE name = 'kept'")
            assert [(r["destination_id"], r["n"]) for r in counted] == [(0, 1), (kept, 1)]


@pytest.mark.parametrize("action", ["replay", "resend"])
async def test_a_job_reopened_while_its_destination_is_removed_is_left_alone(pg_url, action):
    """A replay or resend reads its candidates (dead jobs of live destinations) while a
    removal of their destination is in progress: it waits for the removal, then leaves the
    destination's jobs alone. Reopened after the removal's kill, one would be pending on a
    removed destination, never claimed nor ended."""
    async with PostgresStore(pg_url, clock=FakeClock()) as store:
        await _destination(store, "d")
        await store.add_events([new_event("e1")])
        [claim] = await store.claim("w", 1, LEASE_S, 1)
        await store.finish([(claim, Dead(error="HTTP 410"), FAILED)])
        async with third_connection(pg_url) as removal:
            async with removal.transaction():  # as remove_destination does, held open here
                await removal.execute(
                    "UPDATE destinations SET deleted_at = 1, name = name || '~removed-' || id "
                    "WHERE name = 'd'")
                reopen = asyncio.ensure_future(
                    store.replay(all_dead=True) if action == "replay"
                    else store.resend(JobSelection(job_id=claim.job_id)))
                await _until_waiting(removal, 1)
            done = await asyncio.wait_for(reopen, timeout=20.0)
            assert (done if action == "replay" else done.count) == 0
            assert await removal.fetchval("SELECT status FROM jobs") == "dead"

"""The poison-job quarantine in the claim (both backends, real databases): a job taken over
(its last worker was lost with it, maybe killed by it) is only ever claimed alone, by a claim
that may take over; one that may not skips it and reports it waiting."""

from __future__ import annotations

from hookline.shared.models import AttemptResult, ClaimRequest, Done
from tests.conftest import new_event

OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)


def request(worker: str, *, may_take_over: bool, limit: int = 10) -> ClaimRequest:
    return ClaimRequest(worker=worker, limit=limit, lease_s=30, max_attempts=5,
                        may_take_over=may_take_over)


async def two_lost_and_three_fresh(store, destination_factory, clock) -> None:
    """Jobs 1 and 2 claimed by a worker that is then lost (their leases expire); jobs 3-5
    fresh and due."""
    await destination_factory(max_in_flight=10)
    await store.add_events([new_event("e1"), new_event("e2")])
    assert len(await store.claim("lost", 2, lease_s=30, max_attempts=5)) == 2
    clock.advance(31)
    await store.add_events([new_event(f"e{i}") for i in (3, 4, 5)])


async def test_a_claim_that_may_take_over_takes_one_takeover_alone_lowest_id_first(
        store, destination_factory, clock):
    """With fresh work due beside them, each claim that may take over takes exactly one job
    taken over, job 1 then job 2, and nothing else; the next one gets the fresh jobs."""
    await two_lost_and_three_fresh(store, destination_factory, clock)
    [first] = await store.claim("w1", 10, lease_s=30, max_attempts=5)
    [second] = await store.claim("w2", 10, lease_s=30, max_attempts=5)
    assert [(c.job_id, c.taken_over, c.attempt) for c in (first, second)] == [
        (1, True, 2), (2, True, 2)]
    fresh = await store.claim("w3", 10, lease_s=30, max_attempts=5)
    assert sorted(c.job_id for c in fresh) == [3, 4, 5]
    assert not any(c.taken_over for c in fresh)


async def test_a_claim_that_may_not_take_over_skips_it_and_reports_it_waiting(
        store, destination_factory, clock):
    """A worker still holding claims claims only fresh work and hears a takeover waits;
    once its results are written in the same transaction as its next claim, that claim may
    take over and gets job 1 alone (job 2 still waiting)."""
    await two_lost_and_three_fresh(store, destination_factory, clock)
    kept, fresh, waiting = await store.finish_and_claim([], None,
                                                        request("w1", may_take_over=False))
    assert kept == [] and waiting
    assert sorted(c.job_id for c in fresh) == [3, 4, 5]
    running = {j.id: j.lease_owner for j in await store.list_jobs(status="running")}
    assert running[1] == running[2] == "lost"  # skipped: still the lost worker's

    kept, claims, waiting = await store.finish_and_claim(
        [(c, Done(), OK) for c in fresh], None, request("w1", may_take_over=True))
    assert kept == [True, True, True] and waiting  # job 2 still waits
    assert [(c.job_id, c.taken_over) for c in claims] == [(1, True)]
    done = {j.id for j in await store.list_jobs(status="done")}
    assert done == {3, 4, 5}  # written before the takeover was handed out


async def test_a_replay_of_a_job_lost_at_the_cap_is_skipped_too(store, destination_factory,
                                                               clock):
    """A dead "worker lost" job replayed is pending, not running, yet still a takeover: a
    claim that may not take over leaves it; one that may takes it alone."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    await store.claim("lost", 1, lease_s=30, max_attempts=1)
    clock.advance(31)
    assert await store.claim("w1", 1, lease_s=30, max_attempts=1) == []  # dead at the cap
    [job] = await store.list_jobs()
    assert await store.replay(job_id=job.id) == 1
    await store.add_events([new_event("e2")])
    _, claims, waiting = await store.finish_and_claim([], None,
                                                      request("w1", may_take_over=False))
    assert waiting and [c.job_id for c in claims] == [2]
    [replayed] = await store.claim("w2", 10, lease_s=30, max_attempts=5)
    assert (replayed.job_id, replayed.taken_over) == (job.id, True)

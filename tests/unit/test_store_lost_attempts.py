"""No attempt stays in flight forever (both backends, real databases): the attempt a lost worker
was sending is closed, with an error and the time it ran, in the transaction that takes the
job over or makes it dead; a closed attempt's outcome never changes afterwards, so the
`hookline_attempts_total` counter only grows."""

from __future__ import annotations

from structlog.testing import capture_logs

from hookline.shared.models import AttemptResult, Dead, Done, Retry
from tests.conftest import execute_db, new_event, opened_store, query_db

LOST_AT_CAP = "worker lost (lease expired on the final attempt)"
TAKEN_OVER = "lease expired (worker lost)"


async def stored_attempts(store_url: str) -> list[dict]:
    """The attempt rows as stored, read on a connection of their own (not the store's)."""
    return await query_db(store_url, "SELECT job_id, attempt, worker, lease_token, started_at, "
                                     "duration_s, status_code, error FROM attempts ORDER BY id")


async def test_final_attempt_lost_is_closed_with_the_jobs_error(store, store_url,
                                                                destination_factory, clock):
    """A job whose worker dies on its final attempt goes dead "worker lost" and the attempt it
    was in flight on is closed in the same claim: that error, and the seconds from its start
    to the reclaim. Nothing is left in flight."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    await store.claim("w1", 1, lease_s=30, max_attempts=2)
    clock.advance(31)
    [second] = await store.claim("w2", 1, lease_s=30, max_attempts=2)
    assert second.taken_over and second.attempt == 2
    clock.advance(45)
    with capture_logs() as logs:
        assert await store.claim("w3", 1, lease_s=30, max_attempts=2) == []

    [job] = await store.list_jobs()
    assert (job.status, job.last_error) == ("dead", LOST_AT_CAP)
    # Its story ends in the log as a finished one's does (w2 cannot tell it).
    assert [line for line in logs if line["event"] == "job_dead"] == [{
        "event": "job_dead", "log_level": "warning", "job_id": job.id,
        "event_id": job.event_id, "destination": job.destination, "tenant": "_default",
        "attempt": 2, "reason": LOST_AT_CAP, "found_by": "w3"}]
    rows = await stored_attempts(store_url)
    assert [(r["worker"], r["error"]) for r in rows] == [("w1", TAKEN_OVER), ("w2", LOST_AT_CAP)]
    assert [round(r["duration_s"], 3) for r in rows] == [31.0, 45.0]
    assert all(r["status_code"] is None for r in rows)
    stats = await store.stats()
    assert stats.attempts_by_outcome == {"worker_lost": 2}


async def test_a_replay_of_a_job_lost_at_the_cap_is_still_quarantined(store, store_url,
                                                                      destination_factory,
                                                                      clock):
    """Closing the lost attempt must not hide it from the next claim: the replayed job is
    taken over (sent alone), once; the claim after a normal retry is not."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    await store.claim("w1", 1, lease_s=30, max_attempts=1)
    clock.advance(31)
    assert await store.claim("w2", 1, lease_s=30, max_attempts=1) == []
    [job] = await store.list_jobs()
    assert await store.replay(job_id=job.id) == 1
    [replayed] = await store.claim("w2", 1, lease_s=30, max_attempts=1)
    assert replayed.taken_over
    await store.finish([(replayed, Retry(delay_s=0, error="HTTP 503"),
                         AttemptResult(started_at=clock(), duration_s=0.1, status_code=503))])
    rows = await stored_attempts(store_url)
    assert [r["error"] for r in rows] == [LOST_AT_CAP, None]  # the lost row kept its error
    [retried] = await store.claim("w2", 1, lease_s=30, max_attempts=5)
    assert not retried.taken_over


async def test_a_late_result_keeps_the_lost_outcome(store, store_url, destination_factory,
                                                    clock):
    """A worker that was only slow finishes after its attempt was closed as lost: its result
    is recorded (status, duration) but the attempt stays `worker_lost`, so no outcome count
    ever goes down between two scrapes."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    [stale] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    clock.advance(31)
    [taker] = await store.claim("w2", 1, lease_s=30, max_attempts=5)
    before = (await store.stats()).attempts_by_outcome
    assert before == {"worker_lost": 1, "in_flight": 1}
    late = AttemptResult(started_at=clock() - 40, duration_s=40.0, status_code=204)
    assert await store.finish([(stale, Done(), late)]) == [False]
    assert await store.finish([(taker, Done(), AttemptResult(
        started_at=clock(), duration_s=0.2, status_code=200))]) == [True]
    after = (await store.stats()).attempts_by_outcome
    assert after == {"worker_lost": 1, "delivered": 1}
    rows = await stored_attempts(store_url)
    assert (rows[0]["error"], rows[0]["status_code"], rows[0]["duration_s"]) == (
        TAKEN_OVER, 204, 40.0)


async def test_a_late_failed_result_keeps_the_lost_outcome(store, store_url,
                                                           destination_factory, clock):
    """The same for a slow worker whose late result is a failure (a retry after a 503, or a
    dead end after a 410: the one-by-one finish path, not the delivered batch): its result is
    recorded, the attempt stays `worker_lost`, in flight counts only the taker's attempt, and
    the job, now the taker's, is not touched."""
    await destination_factory()
    await store.add_events([new_event("e1"), new_event("e2")])
    stale = await store.claim("w1", 2, lease_s=30, max_attempts=5)
    clock.advance(31)
    takers = [*await store.claim("w2", 2, lease_s=30, max_attempts=5),  # taken over one by
              *await store.claim("w2", 2, lease_s=30, max_attempts=5)]  # one (quarantine)
    assert all(t.taken_over for t in takers) and len(takers) == 2
    assert (await store.stats()).attempts_by_outcome == {"worker_lost": 2, "in_flight": 2}
    late = [AttemptResult(started_at=clock() - 40, duration_s=40.0, status_code=code)
            for code in (503, 410)]
    assert await store.finish([(stale[0], Retry(delay_s=5, error="HTTP 503"), late[0]),
                               (stale[1], Dead(error="HTTP 410"), late[1])]) == [False, False]
    assert (await store.stats()).attempts_by_outcome == {"worker_lost": 2, "in_flight": 2}
    [figures], _ = await store.destination_figures()
    assert (figures.in_flight, figures.attempts, figures.jobs) == (
        2, {"worker_lost": 2}, {"running": 2})
    rows = await stored_attempts(store_url)
    assert [(r["error"], r["status_code"]) for r in rows[:2]] == [(TAKEN_OVER, 503),
                                                                  (TAKEN_OVER, 410)]
    assert await store.finish([(t, Done(), AttemptResult(started_at=clock(), duration_s=0.2,
                                                         status_code=200))
                               for t in takers]) == [True, True]
    assert (await store.stats()).attempts_by_outcome == {"worker_lost": 2, "delivered": 2}


async def test_opening_closes_attempts_an_older_version_left_in_flight(store, store_url,
                                                                       destination_factory):
    """A database where an older hookline made a job dead "worker lost" and left its attempt
    open: opening it with this version closes that attempt (error, duration up to the job's
    end) and leaves the attempt of a job still running under its lease alone."""
    await destination_factory()
    await store.add_events([new_event("e1"), new_event("e2")])
    lost, running = await store.claim("w1", 2, lease_s=30, max_attempts=1)
    # What an older kill_lost_at_cap did: the job is dead, its attempt row untouched.
    await execute_db(store_url, "UPDATE jobs SET status = 'dead', lease_token = NULL, "
                                "lease_owner = NULL, lease_until = NULL, "
                                "last_error = 'worker lost (lease expired on the final attempt)', "
                                f"finished_at = updated_at + 45 WHERE id = {lost.job_id}")
    await execute_db(store_url, "DELETE FROM schema_version WHERE version = 7")
    async with opened_store(store_url):
        pass
    rows = {r["job_id"]: r for r in await stored_attempts(store_url)}
    assert (rows[lost.job_id]["error"], rows[lost.job_id]["duration_s"]) == (LOST_AT_CAP, 45.0)
    assert (rows[running.job_id]["error"], rows[running.job_id]["duration_s"]) == (None, None)


async def test_a_finish_written_again_changes_nothing_again(store, store_url,
                                                            destination_factory, clock):
    """A worker writes the same results again when its write's commit landed but its answer
    was lost (PostgreSQL frozen, a connection cut at the commit): each attempt, job and
    failure run is counted once, the results count as written (no false `lease_lost`), and
    the attempt rows keep what the first write recorded. Both finish paths: the delivered
    batch and the one-by-one path (a failure in the batch)."""
    await destination_factory("d", max_in_flight=10)
    await store.add_events([new_event(f"e{i}") for i in range(4)])
    ok = AttemptResult(started_at=clock(), duration_s=0.1, status_code=200)
    failed = AttemptResult(started_at=clock(), duration_s=0.1, status_code=500)
    claims = await store.claim("w", 4, lease_s=30, max_attempts=5)
    batch, mixed = claims[:2], claims[2:]
    delivered = [(claim, Done(), ok) for claim in batch]
    one_by_one = [(mixed[0], Retry(delay_s=60, error="HTTP 500"), failed),
                  (mixed[1], Done(), ok)]
    for items in (delivered, one_by_one):
        assert await store.finish(items) == [True, True]
        counted = await store.stats()
        rows = await stored_attempts(store_url)
        streak = (await store.get_destination("d")).failure_streak
        assert await store.finish(items) == [True, True]  # the same write, again
        assert await store.stats() == counted
        assert await stored_attempts(store_url) == rows
        assert (await store.get_destination("d")).failure_streak == streak
    stats = await store.stats()
    assert stats.attempts_by_outcome == {"delivered": 3, "http_5xx": 1}
    assert "in_flight" not in stats.attempts_by_outcome


async def test_a_stale_result_written_again_moves_no_failure_run(store, destination_factory,
                                                                  clock):
    """The result of a claim whose job was taken over meanwhile is history only: written
    once or again (a retried write), it counts no attempt twice and moves no failure run;
    the new claim's result does."""
    await destination_factory("d", max_in_flight=10)
    await store.add_events([new_event("e1")])
    [stale] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    clock.advance(31)
    [taken] = await store.claim("w2", 1, lease_s=30, max_attempts=5)
    assert taken.taken_over
    failed = AttemptResult(started_at=clock(), duration_s=0.1, status_code=500)
    items = [(stale, Retry(delay_s=60, error="HTTP 500"), failed)]
    assert await store.finish(items) == [False]
    counted = await store.stats()
    assert await store.finish(items) == [False]  # the same write, again
    assert await store.stats() == counted
    assert (await store.get_destination("d")).failure_streak == 0
    assert await store.finish([(taken, Retry(delay_s=60, error="HTTP 500"), failed)]) == [True]
    assert (await store.get_destination("d")).failure_streak == 1

"""An ordered (FIFO) destination's head: its oldest unfinished job, whichever way the
destination became ordered. On SQLite (schema 25) each job carries its destination's
`ordered`, and the head is the first entry of jobs_ordered: a destination turned ordered
with jobs waiting, or one in flight, or a database migrated with them, must still send
only its oldest unfinished job, and one turned back sends them all; a job finished before
its destination turned ordered and replayed or resent after is its head again."""

from __future__ import annotations

import sqlite3

import pytest

from hookline.shared.models import AttemptResult, Dead, Done
from hookline.shared.operator_models import JobSelection
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
FAIL = AttemptResult(started_at=0.0, duration_s=0.01, status_code=410)


def _flags(store: SqliteStore) -> dict[int, tuple[str, int]]:
    """Each job's (status, ordered) as stored, read outside the store."""
    db = sqlite3.connect(store.path)
    try:
        return {job_id: (status, ordered) for job_id, status, ordered in db.execute(
            "SELECT id, status, ordered FROM jobs ORDER BY id")}
    finally:
        db.close()


async def test_a_destination_turned_ordered_with_jobs_waiting_and_in_flight_keeps_them_in_order(
        store, destination_factory):
    """Four jobs waiting, the oldest in flight, when the destination turns ordered: nothing
    more is claimed while the oldest is in flight, then only the next; turned back, the
    rest are claimed at once."""
    await destination_factory("d", max_in_flight=10)
    jobs = sorted(job_id for accepted in await store.add_events(
        [new_event(f"e{i}") for i in range(4)]) for job_id in accepted.job_ids)
    [first] = await store.claim("w", 1, 30.0, 5)
    assert first.job_id == jobs[0]
    await store.update_destination("d", ordered=True)
    assert await store.claim("w", 10, 30.0, 5) == []  # the head is in flight
    await store.finish([(first, Done(), OK)])
    [second] = await store.claim("w", 10, 30.0, 5)
    assert second.job_id == jobs[1]
    assert await store.claim("w", 10, 30.0, 5) == []
    if isinstance(store, SqliteStore):
        assert _flags(store) == {jobs[0]: ("done", 1), jobs[1]: ("running", 1),
                                 jobs[2]: ("pending", 1), jobs[3]: ("pending", 1)}
    await store.update_destination("d", ordered=False)
    rest = await store.claim("w", 10, 30.0, 5)
    assert sorted(c.job_id for c in rest) == jobs[2:]
    if isinstance(store, SqliteStore):  # unfinished jobs unmarked; a done one may keep it
        assert [ordered for status, ordered in _flags(store).values()
                if status != "done"] == [0, 0, 0]


async def test_jobs_of_an_ordered_destination_are_marked_when_written(
        store, destination_factory):
    """Jobs written for an ordered destination are its head in id order, beside jobs of an
    unordered one that are all claimable at once."""
    await destination_factory("fifo", event_types=("fifo",))
    await destination_factory("free", event_types=("free",))
    await store.update_destination("fifo", ordered=True)
    await store.add_events([new_event(f"{kind}{i}", type_=kind)
                            for i in range(3) for kind in ("fifo", "free")])
    claims = await store.claim("w", 10, 30.0, 5)
    by_destination = sorted((c.destination_id, c.job_id) for c in claims)
    fifo = await store.get_destination("fifo")
    fifo_jobs = [job_id for destination_id, job_id in by_destination
                 if destination_id == fifo.id]
    assert len(claims) == 4 and len(fifo_jobs) == 1
    if isinstance(store, SqliteStore):
        marked = {job_id for job_id, (_, ordered) in _flags(store).items() if ordered}
        assert fifo_jobs[0] == min(marked) and len(marked) == 3


async def test_a_job_finished_before_its_destination_turned_ordered_is_its_head_once_reopened(
        store, destination_factory):
    """A dead job and a done one of a destination not yet ordered; the destination turns
    ordered with a later job waiting: the replayed dead job is sent before it, and a resent
    done job, alone, is sent too (not left pending for ever)."""
    await destination_factory("d", max_in_flight=10)
    jobs = sorted(job_id for accepted in await store.add_events(
        [new_event(f"e{i}") for i in range(3)]) for job_id in accepted.job_ids)
    dead, done = await store.claim("w", 2, 30.0, 5)
    await store.finish([(dead, Dead(error="HTTP 410"), FAIL), (done, Done(), OK)])
    await store.update_destination("d", ordered=True)
    assert await store.replay(job_id=dead.job_id) == 1
    [head] = await store.claim("w", 10, 30.0, 5)
    assert head.job_id == jobs[0] == dead.job_id
    await store.finish([(head, Done(), OK)])
    [later] = await store.claim("w", 10, 30.0, 5)
    assert later.job_id == jobs[2]
    await store.finish([(later, Done(), OK)])
    assert (await store.resend(JobSelection(job_id=done.job_id))).job_ids == (done.job_id,)
    [again] = await store.claim("w", 10, 30.0, 5)
    assert again.job_id == done.job_id


@pytest.mark.sqlite_only
async def test_a_database_from_before_jobs_ordered_marks_its_unfinished_jobs(
        store, destination_factory, clock):
    """A schema-24 database (schema 25 taken off again: its triggers, index and column)
    with an ordered destination's jobs done, in flight and waiting: opened, each unfinished
    job is marked and the head is still the job in flight, then the oldest waiting one."""
    await destination_factory("d", max_in_flight=10)
    await store.update_destination("d", ordered=True)
    jobs = sorted(job_id for accepted in await store.add_events(
        [new_event(f"e{i}") for i in range(4)]) for job_id in accepted.job_ids)
    [first] = await store.claim("w", 1, 30.0, 5)
    await store.finish([(first, Done(), OK)])
    [second] = await store.claim("w", 1, 30.0, 5)
    assert (first.job_id, second.job_id) == tuple(jobs[:2])
    path = store.path
    await store.close()
    db = sqlite3.connect(path)
    with db:
        for statement in ("DROP TRIGGER jobs_ordered_insert", "DROP TRIGGER jobs_ordered_changed",
                          "DROP INDEX jobs_ordered", "ALTER TABLE jobs DROP COLUMN ordered",
                          "DELETE FROM schema_version WHERE version = 25"):
            db.execute(statement)
    db.close()
    reopened = SqliteStore(path, clock=clock)
    await reopened.open()
    try:
        assert _flags(reopened) == {jobs[0]: ("done", 0), jobs[1]: ("running", 1),
                                    jobs[2]: ("pending", 1), jobs[3]: ("pending", 1)}
        assert await reopened.claim("w", 10, 30.0, 5) == []
        await reopened.finish([(second, Done(), OK)])
        [third] = await reopened.claim("w", 10, 30.0, 5)
        assert third.job_id == jobs[2]
        # the job done at the upgrade, unmarked, is the head again once resent
        await reopened.finish([(third, Done(), OK)])
        await reopened.resend(JobSelection(job_id=first.job_id))
        [resent] = await reopened.claim("w", 10, 30.0, 5)
        assert resent.job_id == first.job_id
    finally:
        await reopened.close()

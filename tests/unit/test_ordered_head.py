"""An ordered (FIFO) destination's head: its oldest unfinished job, whichever way the
destination became ordered. Each job carries its destination's `ordered` (SQLite since
schema 25, PostgreSQL since 26), and the head is the first entry of jobs_ordered: a
destination turned ordered with jobs waiting, or one in flight, or a database migrated with
them, must still send only its oldest unfinished job, and one turned back sends them all; a
job finished before its destination turned ordered and replayed or resent after is its head
again. On PostgreSQL a job written while `ordered` changes is marked all the same (the
guard of shared/store/ops.py, OrderedMarks)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable

import asyncpg
import pytest

from hookline.shared.models import AttemptResult, Claim, Dead, Done, Retry
from hookline.shared.operator_models import JobSelection
from hookline.shared.store import Store
from hookline.shared.store.postgres import ORDERED_MARKS_LOCK, PostgresStore, _query
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
FAIL = AttemptResult(started_at=0.0, duration_s=0.01, status_code=410)
RETRY = AttemptResult(started_at=0.0, duration_s=0.01, status_code=500)
SECRET = "whsec_" + "A" * 32


async def _flags(store: Store) -> dict[int, tuple[str, int]]:
    """Each job's (status, ordered as 0 or 1) as stored, read outside the store."""
    query = "SELECT id, status, ordered FROM jobs ORDER BY id"
    if isinstance(store, SqliteStore):
        db = sqlite3.connect(store.path)
        try:
            found = list(db.execute(query))
        finally:
            db.close()
    else:
        conn = await asyncpg.connect(store.dsn)  # type: ignore[attr-defined]
        try:
            found = [tuple(r) for r in await conn.fetch(query)]
        finally:
            await conn.close()
    return {job_id: (status, int(ordered)) for job_id, status, ordered in found}


async def _until_waiting(conn: asyncpg.Connection, statement: str) -> None:
    """Return once a session of the server waits for a lock in a statement that starts
    with `statement` (AssertionError after 20 s)."""
    for _ in range(400):
        await conn.execute("SELECT pg_stat_clear_snapshot()")  # read anew inside a transaction
        if await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE $1", statement + "%"):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no session waits in {statement!r}")


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
    assert await _flags(store) == {jobs[0]: ("done", 1), jobs[1]: ("running", 1),
                                   jobs[2]: ("pending", 1), jobs[3]: ("pending", 1)}
    await store.update_destination("d", ordered=False)
    rest = await store.claim("w", 10, 30.0, 5)
    assert sorted(c.job_id for c in rest) == jobs[2:]
    # the marks stay (turning unordered is instant): only an ordered destination reads them
    assert [ordered for status, ordered in (await _flags(store)).values()] == [1, 1, 1, 1]
    # ordered again, with three in flight and two new jobs: the new ones wait for all three
    await store.update_destination("d", ordered=True)
    later = sorted(job_id for accepted in await store.add_events(
        [new_event(f"e{i}") for i in range(4, 6)]) for job_id in accepted.job_ids)
    await store.finish([(second, Done(), OK)])
    assert await store.claim("w", 10, 30.0, 5) == []
    for claim in rest:
        await store.finish([(claim, Done(), OK)])
    [head] = await store.claim("w", 10, 30.0, 5)
    assert head.job_id == later[0]
    assert await store.claim("w", 10, 30.0, 5) == []


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
    marked = {job_id for job_id, (_, ordered) in (await _flags(store)).items() if ordered}
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


async def _ordered_with_one_done_one_in_flight(store: Store) -> tuple[list[int], Claim, Claim]:
    """Destination `d` turned ordered, then four jobs written: the first done, the second
    in flight. Returns the job ids in order, and the first's and the second's claims."""
    await store.update_destination("d", ordered=True)
    jobs = sorted(job_id for accepted in await store.add_events(
        [new_event(f"e{i}") for i in range(4)]) for job_id in accepted.job_ids)
    [first] = await store.claim("w", 1, 30.0, 5)
    await store.finish([(first, Done(), OK)])
    [second] = await store.claim("w", 1, 30.0, 5)
    assert (first.job_id, second.job_id) == tuple(jobs[:2])
    return jobs, first, second


@pytest.mark.sqlite_only
async def test_a_database_from_before_jobs_ordered_marks_its_unfinished_jobs(
        store, destination_factory, clock):
    """A schema-24 database (schemas 25 and 26 taken off again: the trigger, index and column)
    with an ordered destination's jobs done, in flight and waiting: opened, each unfinished
    job is marked and the head is still the job in flight, then the oldest waiting one."""
    await destination_factory("d", max_in_flight=10)
    jobs, first, second = await _ordered_with_one_done_one_in_flight(store)
    path = store.path
    await store.close()
    db = sqlite3.connect(path)
    with db:
        for statement in ("DROP TRIGGER jobs_ordered_insert", "DROP INDEX jobs_ordered",
                          "ALTER TABLE jobs DROP COLUMN ordered",
                          "DELETE FROM schema_version WHERE version IN (25, 26)"):
            db.execute(statement)
    db.close()
    reopened = SqliteStore(path, clock=clock)
    await reopened.open()
    try:
        assert await _flags(reopened) == {jobs[0]: ("done", 0), jobs[1]: ("running", 1),
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


async def test_a_postgresql_database_from_before_jobs_ordered_marks_its_unfinished_jobs(pg_url):
    """PostgreSQL, schema 25 (26 taken off again: the index and the column) with an ordered
    destination's jobs done, in flight and waiting: opened, each unfinished job is marked,
    the head is the job in flight, then the oldest waiting one, read from jobs_ordered."""
    async with PostgresStore(pg_url) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret=SECRET, max_in_flight=10)
        jobs, _, second = await _ordered_with_one_done_one_in_flight(store)
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("DROP INDEX jobs_ordered; ALTER TABLE jobs DROP COLUMN ordered; "
                           "DELETE FROM schema_version WHERE version = 26")
    finally:
        await conn.close()
    async with PostgresStore(pg_url) as store:
        assert await _flags(store) == {jobs[0]: ("done", 0), jobs[1]: ("running", 1),
                                       jobs[2]: ("pending", 1), jobs[3]: ("pending", 1)}
        assert await store.claim("w", 10, 30.0, 5) == []
        await store.finish([(second, Done(), OK)])
        [third] = await store.claim("w", 10, 30.0, 5)
        assert third.job_id == jobs[2]
        conn = await asyncpg.connect(pg_url)
        try:
            # a few rows: the planner would scan the table; can the index serve it alone?
            await conn.execute("SET enable_seqscan = off; SET enable_bitmapscan = off")
            sql, names = _query("ordered_head")
            values = {"destination_id": third.destination_id, "test_now_s": None}
            plan = "\n".join(r[0] for r in await conn.fetch(
                "EXPLAIN " + sql, *[values[n] for n in names]))
        finally:
            await conn.close()
        assert "jobs_ordered" in plan and "Sort" not in plan, plan


async def test_a_change_of_ordered_waits_for_a_job_being_written_then_marks_it(pg_url):
    """PostgreSQL: another transaction writes a job the way ingest does (the shared guard,
    then the job with its destination's `ordered`, still false) and has not committed when
    the destination turns ordered. The change waits for it, then marks that job too: READ
    COMMITTED alone would let the job commit unmarked after the marking, never to be the
    head."""
    async with PostgresStore(pg_url) as store:
        for name in ("d", "other"):
            await store.add_destination(name=name, url="http://127.0.0.1:9/",
                                        event_types=[name], secret=SECRET, max_in_flight=10)
        [accepted] = await store.add_events([new_event("e1", type_="other")])
        writer = await asyncpg.connect(pg_url)
        try:
            async with writer.transaction():
                await writer.execute("SELECT pg_advisory_xact_lock_shared($1)",
                                     ORDERED_MARKS_LOCK)
                job_id = await writer.fetchval(
                    "INSERT INTO jobs (event_id, destination_id, run_at, created_at, "
                    "updated_at, ordered) SELECT e.event_id, d.id, 0, 0, 0, d.ordered "
                    "FROM destinations d, (SELECT $1::bigint AS event_id) e "
                    "WHERE d.name = 'd' RETURNING id", accepted.event_id)
                store.give_way_lock_timeout_s = 30.0  # a loaded machine's margin
                change = asyncio.ensure_future(store.update_destination("d", ordered=True))
                await asyncio.sleep(0.3)
                assert not change.done()  # waiting for the writer's guard
            await asyncio.wait_for(change, timeout=10.0)
        finally:
            await writer.close()
        assert (await _flags(store))[job_id] == ("pending", 1)


@pytest.mark.parametrize("writer", ["ingest", "replay", "resend"])
async def test_a_job_written_while_ordered_changes_reads_the_new_value(pg_url, writer):
    """PostgreSQL: while a change of `ordered` holds the exclusive guard (the destination's
    row already written, not committed), a transaction that writes a job (ingest's
    add_events) or makes one unfinished again (a replay of a dead job, a resend of a done
    one) waits for it and then marks that job: reading the committed value first would
    leave it unmarked."""
    async with PostgresStore(pg_url) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret=SECRET, max_in_flight=10)
        if writer == "ingest":
            def write() -> Awaitable[object]:
                return store.add_events([new_event("e1")])
        else:
            await store.add_events([new_event("e1")])
            [claim] = await store.claim("w", 1, 30.0, 5)
            await store.finish([(claim, Dead(error="HTTP 410"), FAIL) if writer == "replay"
                                else (claim, Done(), OK)])

            def write() -> Awaitable[object]:
                return (store.replay(job_id=claim.job_id) if writer == "replay"
                        else store.resend(JobSelection(job_id=claim.job_id)))
        changer = await asyncpg.connect(pg_url)
        try:
            async with changer.transaction():
                await changer.execute("SELECT pg_advisory_xact_lock($1)", ORDERED_MARKS_LOCK)
                await changer.execute("UPDATE destinations SET ordered = 1 WHERE name = 'd'")
                waiting = asyncio.ensure_future(write())
                await asyncio.sleep(0.3)
                assert not waiting.done()  # waiting for the guard
            await asyncio.wait_for(waiting, timeout=10.0)
        finally:
            await changer.close()
        [(status, ordered)] = (await _flags(store)).values()
        assert (status, ordered) == ("pending", 1)


async def test_turning_off_or_on_again_waits_for_no_writer(pg_url):
    """PostgreSQL: with a transaction writing jobs open (holding the shared guard), turning
    an ordered destination off, and setting ordered on one already ordered (with another
    setting), complete at once: only turning ordered takes the exclusive guard."""
    async with PostgresStore(pg_url) as store:
        for name in ("off", "again"):
            await store.add_destination(name=name, url="http://127.0.0.1:9/",
                                        event_types=["*"], secret=SECRET, max_in_flight=10)
            await store.update_destination(name, ordered=True)
        writer = await asyncpg.connect(pg_url)
        try:
            async with writer.transaction():
                await writer.execute("SELECT pg_advisory_xact_lock_shared($1)",
                                     ORDERED_MARKS_LOCK)
                off = await asyncio.wait_for(store.update_destination("off", ordered=False),
                                             timeout=5.0)
                again = await asyncio.wait_for(
                    store.update_destination("again", ordered=True, timeout_s=7),
                    timeout=5.0)
                alone = await asyncio.wait_for(store.update_destination("again", ordered=True),
                                               timeout=5.0)
        finally:
            await writer.close()
        assert (off.ordered, again.ordered, again.timeout_s, alone.timeout_s) == (
            False, True, 7, 7)


async def test_a_job_retried_while_its_destination_turns_ordered_is_marked(pg_url):
    """PostgreSQL: a destination turns ordered while its marking waits for a row another
    transaction holds, and meanwhile a job in flight is finished with a retry (running ->
    pending). It is marked all the same, and the three jobs go out one at a time, in order:
    a marking that read each status in a statement of its own would miss it (its snapshot
    saw it running in the first, pending in neither), never to be the head."""
    async with PostgresStore(pg_url) as store:
        store.give_way_lock_timeout_s = 30.0  # a loaded machine's margin
        await store.add_destination(name="d", url="http://127.0.0.1:9/", event_types=["*"],
                                    secret=SECRET, max_in_flight=10)
        jobs = sorted(job_id for accepted in await store.add_events(
            [new_event(f"e{i}") for i in range(3)]) for job_id in accepted.job_ids)
        [first] = await store.claim("w", 1, 30.0, 5)
        assert first.job_id == jobs[0]
        blocker = await asyncpg.connect(pg_url)
        try:
            async with blocker.transaction():
                await blocker.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", jobs[2])
                change = asyncio.ensure_future(store.update_destination("d", ordered=True))
                await _until_waiting(blocker, "UPDATE jobs SET ordered = 1")
                retry = asyncio.ensure_future(store.finish(
                    [(first, Retry(delay_s=0.0, error="HTTP 500"), RETRY)]))
                await asyncio.sleep(0.3)  # done, or waiting for the marking's row lock
                assert not change.done()
            await asyncio.wait_for(asyncio.gather(change, retry), timeout=30.0)
        finally:
            await blocker.close()
        assert await _flags(store) == {job_id: ("pending", 1) for job_id in jobs}
        sent = []
        for _ in range(4):
            got = await store.claim("w", 10, 30.0, 5)
            sent.append([c.job_id for c in got])
            await store.finish([(c, Done(), OK) for c in got])
        assert sent == [[jobs[0]], [jobs[1]], [jobs[2]], []]

"""The worker's writer (workers/writer.py) in-process, against a real database (each backend
in turn where the property is not SQLite's own) and the receiver fixture on 127.0.0.1:
write spacing under load, results kept through a held write lock, slot accounting with the
fair share, a graceful stop that records what finished and hands back the rest, and a result
that waited for the next claim recorded as finished when its answer arrived."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Claim, ClaimRequest, Outcome
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.store.sqlite import SqliteStore
from hookline.workers import writer as writer_module
from hookline.workers.loop import Worker
from hookline.workers.sender import Sender
from hookline.workers.writer import FILLED_ENOUGH, RESULT_LINGER_S
from tests.conftest import new_event, settle

FAST = Config(allow_networks="127.0.0.0/8", retry_base_s=0.05, retry_cap_s=0.1, max_attempts=3,
              lease_s=10.0, attempt_timeout_s=5.0, poll_interval_s=0.2,
              graceful_timeout_s=0.5)


class WriteRecorder:
    """The real store, with every write of the worker's writer recorded as
    (monotonic start time, results in it) before it is passed on, and the claims it made
    whose result gates their destination's next job (Claim.gates_next)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.writes: list[tuple[float, int]] = []
        self.gating: list[Claim] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def finish(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                     breaker: Any = None) -> list[bool]:
        self.writes.append((time.monotonic(), len(items)))
        return await self._store.finish(items, breaker=breaker)

    async def finish_and_claim(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                               breaker: Any, request: ClaimRequest
                               ) -> tuple[list[bool], list[Claim], bool]:
        self.writes.append((time.monotonic(), len(items)))
        kept, claims, waiting = await self._store.finish_and_claim(items, breaker, request)
        self.gating += [claim for claim in claims if claim.gates_next]
        return kept, claims, waiting


@contextlib.asynccontextmanager
async def running_worker(store: Any, config: Config = FAST) -> AsyncIterator[Worker]:
    stop = asyncio.Event()
    async with Sender(timeout_s=config.attempt_timeout_s, policy=config.address_policy) as sender:
        worker = Worker(store, config, "w1", sender)
        task = asyncio.create_task(worker.run(stop))
        try:
            yield worker
        finally:
            stop.set()
            await task


async def until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def add(store: Store, receiver: Receiver, name: str, secret: str,
              event_types: list[str] | None = None) -> None:
    await store.add_destination(name=name, url=receiver.url(name), secret=secret,
                                event_types=event_types or ["*"], max_in_flight=100)


async def _deliver_to_8_destinations(store: Store, config: Config, behaviour: str
                                     ) -> tuple[WriteRecorder, dict[str, int], int, float]:
    """25 events to 8 destinations (200 deliveries), each answering with `behaviour`, by
    one worker with `config`: its writes, the jobs by status, the requests received, and
    the seconds from the worker's start until no job was left."""
    secret = generate_secret()
    recorder = WriteRecorder(store)
    names = [f"ok{i}" for i in range(8)]
    async with Receiver([Endpoint(name, secret, parse_behaviour(behaviour))
                         for name in names]) as receiver:
        for name in names:
            await add(store, receiver, name, secret)
        await store.add_events([new_event(f"e{i}") for i in range(25)])
        started = time.monotonic()
        async with running_worker(recorder, config):
            counts = await settle(store)
            took_s = time.monotonic() - started
    return recorder, counts, len(receiver.effects), took_s


async def test_under_load_writes_are_spaced_by_the_batch_interval(real_store):
    """200 deliveries to 8 destinations with batch_interval_s=100 ms (no claim uses up a
    destination's room, so no result gates the next job; 8 slots, so fewer results than
    FILLED_ENOUGH are ever queued): consecutive writes start about 100 ms apart (unspaced,
    10-30 ms), they carry several results each, and every result is written exactly once."""
    config = replace(FAST, batch_interval_s=0.1, worker_concurrency=8, claim_batch=8,
                     destination_slot_share=1.0)
    recorder, counts, requests, _ = await _deliver_to_8_destinations(real_store, config,
                                                                     "slow:0.005")
    assert counts["done"] == 200 and requests == 200
    # The premise: a claim that runs out of free slots (a write of one result asks for one
    # job) leaves its destination room, so its result is spaced like any other.
    assert not recorder.gating, recorder.gating
    starts = [at for at, _ in recorder.writes]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # 50 ms, not 100: each start is recorded a moment after the writer's own mark, and on a
    # loaded machine that moment can be long (15 ms with a core busy elsewhere, 50 ms
    # spacing: a gap of 35 ms).
    assert gaps and min(gaps) >= 0.05, gaps
    assert sum(results for _, results in recorder.writes) == 200
    assert max(results for _, results in recorder.writes) >= 5


async def test_results_filled_enough_are_not_held_for_the_batch_interval(real_store):
    """With batch_interval_s=1 s and 32 slots over 8 destinations, FILLED_ENOUGH results
    queue between writes and are written at once: 200 deliveries take well under the 1 s a
    write each would."""
    config = replace(FAST, batch_interval_s=1.0, worker_concurrency=32, claim_batch=32,
                     destination_slot_share=1.0)
    recorder, counts, _, took_s = await _deliver_to_8_destinations(real_store, config, "ok")
    assert counts["done"] == 200
    assert max(results for _, results in recorder.writes) >= FILLED_ENOUGH
    # About 1.3 s: the last results, fewer than FILLED_ENOUGH, wait out the 1 s; held,
    # every write would wait it (about 7 s).
    assert took_s < 4.0, (took_s, recorder.writes)


@pytest.mark.sqlite_only
async def test_a_gating_result_ends_a_spacing_wait_already_under_way(real_store):
    """batch_interval_s=200 ms: an ordinary result (1 ms answer) starts the wait for the
    interval; a result that gates its destination's next job (max_in_flight 1, 3 ms answer)
    arrives during it and ends it, so both are written within a few ms, not 200. (The
    writer's own logic; the setup needs both jobs in the first claim, which the SQLite
    claim gives here; on PostgreSQL its first claim took one.)"""
    secret = generate_secret()
    config = replace(FAST, batch_interval_s=0.2, worker_concurrency=2, claim_batch=2,
                     destination_slot_share=1.0)
    recorder = WriteRecorder(real_store)
    async with Receiver([Endpoint("plain", secret, parse_behaviour("slow:0.001")),
                         Endpoint("one", secret, parse_behaviour("slow:0.003"))]) as receiver:
        await add(real_store, receiver, "plain", secret)
        await real_store.add_destination(name="one", url=receiver.url("one"), secret=secret,
                                         event_types=["*"], max_in_flight=1)
        await real_store.add_events([new_event("e1")])
        async with running_worker(recorder, config):
            counts = await settle(real_store)
    assert counts["done"] == 2
    assert [results for _, results in recorder.writes][:2] == [0, 2], recorder.writes
    claimed_at = next(at for at, results in recorder.writes if results == 0)
    written_at = next(at for at, results in recorder.writes if results)
    assert written_at - claimed_at < 0.1, recorder.writes  # 200 ms when the wait held


async def test_a_result_that_gates_a_destination_is_not_held_for_the_batch_interval(
        real_store):
    """A destination taking one job at a time (max_in_flight 1: each result gates its next
    job) with batch_interval_s=200 ms: its writes follow each other within a few ms, not 200
    ms per delivery. (The interval is long so that a loaded machine's slower writes, 10-26
    ms apart on PostgreSQL under CI's load, stay far from the limit.)"""
    secret = generate_secret()
    config = replace(FAST, batch_interval_s=0.2)
    recorder = WriteRecorder(real_store)
    async with Receiver([Endpoint("one", secret, parse_behaviour("ok"))]) as receiver:
        await real_store.add_destination(name="one", url=receiver.url("one"), secret=secret,
                                         event_types=["*"], max_in_flight=1)
        await real_store.add_events([new_event(f"e{i}") for i in range(12)])
        async with running_worker(recorder, config):
            counts = await settle(real_store)
    assert counts["done"] == 12
    gaps = sorted(b - a for (a, _), (b, _) in itertools.pairwise(recorder.writes))
    assert gaps[len(gaps) // 2] < 0.1, gaps  # the median: 200 ms each when held


@pytest.mark.sqlite_only
async def test_results_survive_a_held_write_lock(tmp_path):
    """Another process holds SQLite's write lock past the busy timeout while attempts
    finish: their results are retried until written, none is lost or re-sent, and the
    outage is recorded once."""
    db = str(tmp_path / "held.db")
    store = SqliteStore(db, busy_timeout_s=0.2)
    await store.open()
    secret = generate_secret()
    holder: sqlite3.Connection | None = None
    try:
        async with Receiver([Endpoint("slow", secret, parse_behaviour("slow:0.3"))]) as receiver:
            await add(store, receiver, "slow", secret)
            await store.add_events([new_event(f"e{i}") for i in range(8)])
            async with running_worker(store) as worker:
                await until(lambda: receiver.in_flight("slow") > 0, 10, "a request")
                holder = sqlite3.connect(db, isolation_level=None, timeout=10)
                holder.execute("BEGIN IMMEDIATE")
                await until(lambda: receiver.in_flight("slow") == 0, 10, "the answers")
                await asyncio.sleep(3.0)  # every result waits for the lock meanwhile
                holder.rollback()
                holder.close()
                holder = None
                counts = await settle(store)
                assert worker.outage.outages == 1 and not worker.outage.ongoing
        assert counts["done"] == 8
        assert len(receiver.requests) == 8
        assert all(job.attempts == 1 for job in await store.list_jobs())
    finally:
        if holder is not None:
            holder.close()
        await store.close()


async def test_slots_are_never_overcommitted_and_the_fair_share_holds(real_store):
    """4 slots, at most 2 per destination, three destinations: a hanging one holds exactly
    2, the two healthy ones are served on the other 2, and the worker never holds more than
    4 claims nor has more than 4 requests open; at stop the hung attempts go back
    uncharged."""
    secret = generate_secret()
    config = replace(FAST, worker_concurrency=4, claim_batch=4, destination_slot_share=0.5)
    names = ("hang", "ok", "ok2")
    async with Receiver([Endpoint("hang", secret, parse_behaviour("hang")),
                         Endpoint("ok", secret, parse_behaviour("slow:0.02")),
                         Endpoint("ok2", secret, parse_behaviour("slow:0.02"))]) as receiver:
        await add(real_store, receiver, "hang", secret, ["h.*"])
        await add(real_store, receiver, "ok", secret, ["o.*"])
        await add(real_store, receiver, "ok2", secret, ["o.*"])
        await real_store.add_events([new_event(f"h{i}", "h.x") for i in range(6)])
        async with running_worker(real_store, config) as worker:
            await until(lambda: receiver.in_flight("hang") == 2, 10, "the hung attempts")
            await real_store.add_events([new_event(f"o{i}", "o.x") for i in range(30)])
            held: list[int] = []
            open_requests: list[int] = []
            while len(receiver.effects) < 60:
                held.append(len(worker.writer.held()))
                open_requests.append(sum(receiver.in_flight(name) for name in names))
                assert len(held) < 4000, f"healthy events not delivered: {receiver.summary()}"
                await asyncio.sleep(0.005)
        assert max(held) == 4 and max(open_requests) <= 4
        assert receiver.max_concurrent("hang") == 2
        assert receiver.max_concurrent("ok") <= 2 and receiver.max_concurrent("ok2") <= 2
    jobs = await real_store.list_jobs()
    hung = [job for job in jobs if job.status != "done"]
    assert len(hung) == 6 and all(j.status == "pending" and j.attempts == 0 for j in hung)


async def test_graceful_stop_records_an_answer_that_arrives_within_the_grace(real_store):
    """Stopping while a send is under way waits for its answer (within graceful_timeout_s)
    and records it: the job is done, not handed back."""
    secret = generate_secret()
    config = replace(FAST, graceful_timeout_s=5.0)
    async with Receiver([Endpoint("slow", secret, parse_behaviour("slow:0.5"))]) as receiver:
        await add(real_store, receiver, "slow", secret)
        await real_store.add_events([new_event("e1")])
        async with running_worker(real_store, config):
            await until(lambda: receiver.in_flight("slow") == 1, 10, "the request")
    [job] = await real_store.list_jobs()
    assert job.status == "done" and job.attempts == 1
    assert len(receiver.requests) == 1


class ExtendRecorder:
    """The real store, noting which task calls `extend` (the worker's writer must)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.extended_by: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        task = asyncio.current_task()
        self.extended_by.append(task.get_name() if task is not None else "")
        return await self._store.extend(claims, lease_s)


async def test_the_writer_extends_the_leases_it_holds(real_store):
    """A request in flight past a third of its lease: its lease is pushed forward in the
    database, every extension made by the writer's own task (the process's one writer)."""
    secret = generate_secret()
    # Extensions every lease_s / 3 = 1 s; the attempt ends at 2.8 s, well after the
    # second (the rows are read before it, on a loaded machine too).
    config = replace(FAST, lease_s=3.0, attempt_timeout_s=2.8)
    recorder = ExtendRecorder(real_store)
    async with Receiver([Endpoint("hang", secret, parse_behaviour("hang"))]) as receiver:
        await add(real_store, receiver, "hang", secret)
        await real_store.add_events([new_event("e1")])
        async with running_worker(recorder, config):
            await until(lambda: receiver.in_flight("hang") > 0, 10, "the request")
            [claimed] = await real_store.list_jobs(status="running")
            await until(lambda: len(recorder.extended_by) >= 2, 10, "two extensions")
            [extended] = await real_store.list_jobs(status="running")
    assert extended.lease_until is not None and claimed.lease_until is not None
    # At least the first extension has landed (1 s later than the claim's lease); the
    # second may still be on its way when the rows are read.
    assert extended.lease_until > claimed.lease_until + 0.5
    assert set(recorder.extended_by) == {"writer"}


async def test_a_result_that_waits_for_a_claim_is_finished_when_its_answer_arrived(real_store):
    """One event and no other: its result waits RESULT_LINGER_S for a next claim that never
    comes, then is written. The job's finished_at is when the receiver answered (its
    request's time, give or take the answer's trip), not the write's instant (updated_at),
    which is at least most of the wait later."""
    secret = generate_secret()
    recorder = WriteRecorder(real_store)
    # No poll within the wait; the event comes once the worker's start-up claims are over
    # (a slow one, under load, could otherwise come after the answer and carry the result).
    config = replace(FAST, poll_interval_s=5.0)
    async with Receiver([Endpoint("ok", secret, parse_behaviour("ok"))]) as receiver:
        await add(real_store, receiver, "ok", secret)
        async with running_worker(recorder, config):
            await until(lambda: len(recorder.writes) >= 1, 10, "the worker's first claim")
            await asyncio.sleep(0.2)
            await real_store.add_events([new_event("e1")])
            counts = await settle(real_store)
    assert counts["done"] == 1
    [job] = await real_store.list_jobs()
    [request] = receiver.requests
    assert job.finished_at is not None
    assert job.updated_at - job.finished_at >= 0.7 * RESULT_LINGER_S, recorder.writes
    # The answer's trip is a few ms; a loaded machine may stretch it, never to the write's.
    assert request.received_at - 0.05 <= job.finished_at < job.updated_at
    # Written once, by a write of its own (claims alone, e.g. at the poll, carry none).
    assert [results for _, results in recorder.writes if results] == [1]


@pytest.mark.parametrize(("max_in_flight", "slot_share"), [(1, 1.0), (10, 0.5)],
                         ids=["max_in_flight", "worker_share"])
async def test_a_result_its_destinations_next_job_waits_for_is_written_at_once(
        real_store, max_in_flight, slot_share, monkeypatch):
    """A destination at its max_in_flight (1), or at this worker's share of it (1 of 2
    slots), gets its next job claimed only once the previous result is written: those
    results (Claim.gates_next) do not wait RESULT_LINGER_S for a claim, or each delivery
    would take that long. With the linger (250 ms here, so that a loaded machine's slow
    writes stay far below it), each job's write (updated_at) would follow its answer
    (finished_at) by at least most of it."""
    linger_s = 0.25
    monkeypatch.setattr(writer_module, "RESULT_LINGER_S", linger_s)  # read by each Writer
    secret = generate_secret()
    config = replace(FAST, worker_concurrency=2, destination_slot_share=slot_share)
    async with Receiver([Endpoint("one", secret, parse_behaviour("ok"))]) as receiver:
        await real_store.add_destination(name="one", url=receiver.url("one"), secret=secret,
                                         event_types=["*"], max_in_flight=max_in_flight)
        await real_store.add_events([new_event(f"e{i}") for i in range(6)])
        async with running_worker(real_store, config):
            counts = await settle(real_store)
    assert counts["done"] == 6
    waits = sorted(job.updated_at - job.finished_at for job in await real_store.list_jobs()
                   if job.finished_at is not None)
    assert len(waits) == 6
    # The median: one write may be slow on a loaded machine, not most of them.
    assert waits[3] < 0.4 * linger_s, waits

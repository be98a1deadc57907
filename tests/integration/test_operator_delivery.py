"""Pause/resume and replay with a running in-process Worker, a real database (each backend in
turn: a SQLite file, then PostgreSQL) and the receiver fixture on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.workers.loop import Worker
from hookline.workers.sender import Sender
from tests.conftest import new_event, task_stacks

# Polls often, so a paused destination's due retry would be claimed if pause leaked.
POLLING = Config(allow_networks="127.0.0.0/8", retry_base_s=0.5, retry_cap_s=0.5, max_attempts=5,
                 lease_s=3.0, attempt_timeout_s=1.0, poll_interval_s=0.05,
                 graceful_timeout_s=0.5)
# One attempt then dead; a 5 s poll, so prompt redelivery proves the replay woke the worker.
ONE_SHOT = Config(allow_networks="127.0.0.0/8", max_attempts=1, lease_s=3.0, attempt_timeout_s=1.0,
                  poll_interval_s=5.0, graceful_timeout_s=0.5)


@contextlib.asynccontextmanager
async def running_worker(store: Store, config: Config) -> AsyncIterator[None]:
    stop = asyncio.Event()
    async with Sender(timeout_s=config.attempt_timeout_s, policy=config.address_policy) as sender:
        task = asyncio.create_task(Worker(store, config, "w1", sender).run(stop))
        try:
            yield
        finally:
            stop.set()
            await task


async def until(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; tasks:\n{task_stacks()}")
        await asyncio.sleep(0.02)


async def test_paused_destination_gets_nothing_until_resumed(real_store):
    """While paused, a destination receives zero requests (new events and a retry already
    scheduled and due) and its jobs are not charged, while a healthy destination keeps
    receiving; on resume every job is delivered."""
    secret = generate_secret()
    endpoints = [Endpoint("p", secret, parse_behaviour("fail:1")), Endpoint("live", secret)]
    async with Receiver(endpoints) as receiver:
        for name in ("p", "live"):
            await real_store.add_destination(name=name, url=receiver.url(name), secret=secret,
                                             event_types=["*"], max_in_flight=5)
        # "p" fails once, so a retry is scheduled 0.75-1.5 s out; the pause comes well
        # before it runs, on a loaded machine too.
        async with running_worker(real_store, replace(POLLING, retry_base_s=1.5,
                                                      retry_cap_s=1.5)):
            await real_store.add_events([new_event("first")])
            await until(lambda: any(r.endpoint == "p" for r in receiver.requests), 5, "p 1st")
            await real_store.set_paused("p", True, "test")
            await real_store.add_events([new_event(f"e{i}") for i in range(5)])
            # the healthy destination keeps flowing meanwhile
            await until(lambda: len([r for r in receiver.requests if r.endpoint == "live"])
                        == 6, 5, "live deliveries")
            seen_while_paused = len([r for r in receiver.requests if r.endpoint == "p"])
            await asyncio.sleep(2.0)  # the retry falls due, and 40 polls pass, while paused
            assert len([r for r in receiver.requests if r.endpoint == "p"]) == seen_while_paused
            p_jobs = [j for j in await real_store.list_jobs() if j.destination == "p"]
            assert {j.status for j in p_jobs} == {"pending"}
            assert sorted(j.attempts for j in p_jobs) == [0] * 5 + [seen_while_paused]

            await real_store.set_paused("p", False)
            await until(lambda: len({e.webhook_id for e in receiver.effects
                                     if e.endpoint == "p"}) == 6, 5, "deliveries to p")
        p_jobs = [j for j in await real_store.list_jobs() if j.destination == "p"]
        assert {j.status for j in p_jobs} == {"done"}
        assert sum(j.attempts for j in p_jobs) == len(
            [r for r in receiver.requests if r.endpoint == "p"])


async def test_resume_sends_a_waiting_retry_at_once(real_store):
    """The operator's trial: a receiver answers 500, the retry is scheduled 30-60 s out, the
    destination is paused, the receiver fixed and the destination resumed: the retry goes
    out at once (the running worker woken; its poll is 5 s), not after its backoff."""
    secret = generate_secret()
    async with Receiver([Endpoint("x", secret, parse_behaviour("fail:1"))]) as receiver:
        await real_store.add_destination(name="x", url=receiver.url("x"), secret=secret,
                                         event_types=["*"], max_in_flight=5)
        async with running_worker(real_store, replace(ONE_SHOT, max_attempts=5,
                                                      retry_base_s=60, retry_cap_s=60)):
            await real_store.add_events([new_event("e1")])
            await until(lambda: receiver.requests, 5, "the first attempt")
            await _until_retry_scheduled(real_store)
            await real_store.set_paused("x", True, "receiver down")
            await asyncio.sleep(1.2)  # past the notifier's 1 s cache of listening sockets

            assert await real_store.set_paused("x", False) == 1
            await until(lambda: receiver.effects, 2.5, "the retry delivered after the resume")
        [job] = await real_store.list_jobs()
        assert (job.status, job.attempts) == ("done", 2)


async def _until_retry_scheduled(store: Store) -> None:
    """Wait until the only job is pending again after its first attempt (its retry set)."""
    deadline = time.monotonic() + 5
    while (job := (await store.list_jobs())[0]).status != "pending" or job.attempts != 1:
        assert time.monotonic() < deadline, f"no retry scheduled; tasks:\n{task_stacks()}"
        await asyncio.sleep(0.02)


async def test_replay_of_dead_job_sends_same_id_and_bytes(real_store):
    """A job dead at the attempt cap, replayed, is delivered promptly by the running worker
    (woken by the replay; its poll is 5 s) with the same webhook-id, a byte-identical body
    (receiver sha256), a fresh signature that verifies, and a fresh attempt budget."""
    secret = generate_secret()
    body = b'{"id":"x1","type":"push","data":{"k":"v\\u00e9",  "spaces":  true}}'
    async with Receiver([Endpoint("flaky", secret, parse_behaviour("fail:1"))]) as receiver:
        await real_store.add_destination(name="flaky", url=receiver.url("flaky"),
                                         secret=secret, event_types=["*"], max_in_flight=1)
        async with running_worker(real_store, ONE_SHOT):
            (accepted,) = await real_store.add_events([new_event("x1", body=body)])
            deadline = time.monotonic() + 5
            while (await real_store.list_jobs())[0].status != "dead":
                assert time.monotonic() < deadline, f"job did not die; tasks:\n{task_stacks()}"
                await asyncio.sleep(0.02)
            assert len(receiver.requests) == 1 and receiver.effects == []
            # The worker is idle in its 5 s wait. (The store's notifier caches the list of
            # listening sockets for 1 s; wait past that so it sees the worker's socket.)
            await asyncio.sleep(1.2)

            assert await real_store.replay(all_dead=True, destination="flaky") == 1
            await until(lambda: receiver.effects, 2.5, "replayed delivery before the poll")
        effect = receiver.effects[0]
        assert effect.webhook_id == accepted.message_id
        assert {r.webhook_id for r in receiver.requests} == {accepted.message_id}
        assert {r.body_sha256 for r in receiver.requests} == {hashlib.sha256(body).hexdigest()}
        assert all(r.verified for r in receiver.requests)  # signed afresh, still valid
        story = await real_store.get_job(accepted.job_ids[0])
        assert story.job.status == "done" and story.job.attempts == 1 and story.replays == 1
        assert [a.status_code for a in story.attempts] == [500, 200]

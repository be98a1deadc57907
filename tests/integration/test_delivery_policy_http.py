"""Delivery policy against real receivers on 127.0.0.1: one worker in-process, a real store.

Every test checks the receiver saw exactly as many requests as attempts were recorded, and
that attempts of one job never overlap in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from aiohttp import web

from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.config import Config
from hookline.shared.record_models import Attempt
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.workers.loop import Worker
from hookline.workers.sender import Sender
from tests.conftest import new_event, serving, settle

FAST = Config(allow_networks="127.0.0.0/8", retry_base_s=0.05, retry_cap_s=0.1, max_attempts=3,
              lease_s=3.0, attempt_timeout_s=1.0, poll_interval_s=0.2, graceful_timeout_s=0.5)


@contextlib.asynccontextmanager
async def running_worker(store: Store, config: Config = FAST,
                         name: str = "w1") -> AsyncIterator[None]:
    stop = asyncio.Event()
    async with Sender(timeout_s=config.attempt_timeout_s, policy=config.address_policy) as sender:
        task = asyncio.create_task(Worker(store, config, name, sender).run(stop))
        try:
            yield
        finally:
            stop.set()
            await task


@contextlib.asynccontextmanager
async def redirector(status: int, location: str) -> AsyncIterator[tuple[str, list[float]]]:
    """A server answering every POST /r with `status` and `Location: location`; yields its
    URL and the list of request times."""
    hits: list[float] = []

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        hits.append(time.time())
        return web.Response(status=status, headers={"Location": location})

    app = web.Application()
    app.router.add_post("/r", handle)
    async with serving(app) as port:
        yield f"http://127.0.0.1:{port}/r", hits


def assert_no_overlap(attempts: list[Attempt]) -> None:
    """Attempts of one job follow each other: each starts after the previous one ended."""
    by_job: dict[int, list[Attempt]] = {}
    for a in attempts:
        by_job.setdefault(a.job_id, []).append(a)
    for rows in by_job.values():
        rows.sort(key=lambda a: a.attempt)
        for before, after in itertools.pairwise(rows):
            assert before.duration_s is not None
            assert before.started_at + before.duration_s <= after.started_at + 1e-3


async def add(store: Store, name: str, url: str, secret: str) -> None:
    await store.add_destination(name=name, url=url, secret=secret, event_types=["*"],
                                max_in_flight=10)


# The attempt timeout of the cases that time out: half FAST's 1 s, with the trickle twice as
# fast (a byte every 0.2 s, 2.2 s in all), so a timeout of the whole attempt still cuts it at
# a fifth of its body's time while a timeout per read (0.5 s) would never fire.
TIMEOUT_CASE_S = 0.5


@pytest.mark.parametrize(("spec", "attempts", "status", "error"), [
    ("status:500", 3, 500, None),
    ("drop_first", 2, 200, "ServerDisconnectedError"),
    ("hang", 2, None, "TimeoutError"),
    ("trickle:0.2", 2, None, "TimeoutError"),
])
async def test_receiver_behaviours_end_as_classified(real_store, spec, attempts, status,
                                                     error):
    """500 is retried to the cap (dead); a connection closed without an answer is retried
    and then delivered; a hanging receiver and one trickling its body (11 bytes, 0.2 s
    each) are both cut off by the total attempt timeout (0.5 s). Requests seen == attempts."""
    secret = generate_secret()
    config = replace(FAST, max_attempts=attempts)
    if error == "TimeoutError":
        config = replace(config, attempt_timeout_s=TIMEOUT_CASE_S)
    async with Receiver([Endpoint("r", secret, parse_behaviour(spec))]) as receiver:
        await add(real_store, "r", receiver.url("r"), secret)
        async with running_worker(real_store, config):
            await real_store.add_event(new_event("e1"))
            counts = await settle(real_store)
        rows = await real_store.list_attempts()
        assert len(receiver.requests) == len(rows) == attempts
    assert counts["done" if status == 200 else "dead"] == 1
    assert rows[-1].status_code == status
    if error is not None:
        assert rows[0].error.startswith(error)
        assert rows[0].status_code is None
    if error == "TimeoutError":
        # cut at ~0.5 s, not 2.2 s
        assert all(0.9 * TIMEOUT_CASE_S <= r.duration_s < 2.0 for r in rows)
    if status is not None:
        assert "Content-Type: application/json" in rows[-1].response_headers
    assert_no_overlap(rows)


async def test_429_retry_after_delays_the_next_attempt(real_store):
    """A 429 with `Retry-After: 1` makes the next attempt wait >= 1 s although our backoff is
    0.05 s; the attempt row keeps the header excerpt; then the job is delivered."""
    secret = generate_secret()
    config = replace(FAST, retry_cap_s=5.0)
    async with Receiver([Endpoint("r", secret, parse_behaviour("retry_after:1"))]) as receiver:
        await add(real_store, "r", receiver.url("r"), secret)
        async with running_worker(real_store, config):
            await real_store.add_event(new_event("e1"))
            counts = await settle(real_store)
        rows = await real_store.list_attempts()
        seen = [r.received_at for r in receiver.requests]
    assert counts["done"] == 1
    assert len(seen) == len(rows) == 2
    assert seen[1] - seen[0] >= 0.95
    assert rows[0].status_code == 429 and "Retry-After: 1" in rows[0].response_headers
    assert_no_overlap(rows)


@pytest.mark.parametrize("code", [301, 302, 307])
async def test_redirect_is_recorded_never_followed(real_store, code):
    """3xx is a failure: the Location is recorded, the redirect target never sees a request,
    the job is retried to the cap and dies with `HTTP 3xx -> target`."""
    secret = generate_secret()
    async with Receiver([Endpoint("target", secret)]) as receiver:
        target = receiver.url("target")
        async with redirector(code, target) as (url, hits):
            await add(real_store, "redir", url, secret)
            async with running_worker(real_store):
                await real_store.add_event(new_event("e1"))
                counts = await settle(real_store)
            rows = await real_store.list_attempts()
            assert len(hits) == len(rows) == FAST.max_attempts
        assert receiver.requests == []
    assert counts["dead"] == 1
    assert all(r.status_code == code and r.location == target for r in rows)
    [job] = await real_store.list_jobs()
    assert job.last_error.startswith(f"HTTP {code} -> {target}")
    assert_no_overlap(rows)


async def test_410_gone_kills_the_job_and_pauses_the_destination(real_store):
    """One 410 makes the job dead at once and pauses the destination with the reason
    `410 Gone from <url>`; a later event to it is not sent (its job waits)."""
    secret = generate_secret()
    async with Receiver([Endpoint("g", secret, parse_behaviour("gone"))]) as receiver:
        await add(real_store, "g", receiver.url("g"), secret)
        async with running_worker(real_store):
            await real_store.add_event(new_event("e1"))
            counts = await settle(real_store)
            destination = await real_store.get_destination("g")
            await real_store.add_event(new_event("e2"))
            await asyncio.sleep(0.5)
        assert len(receiver.requests) == len(await real_store.list_attempts()) == 1
    assert counts["dead"] == 1
    assert destination.paused
    assert destination.paused_reason == f"410 Gone from {receiver.url('g')}"
    assert (await real_store.stats()).jobs_by_status["pending"] == 1


async def test_rotation_sends_both_signatures_during_overlap(real_store):
    """During the overlap each request carries signatures by the new and the old secret,
    so receivers verifying with either accept it (standardwebhooks); after the overlap only
    the new secret signs, and a receiver still on the old one rejects the request."""
    old, new = generate_secret(), generate_secret()
    endpoints = [Endpoint("on-new", new), Endpoint("on-old", old)]
    async with Receiver(endpoints) as receiver:
        for name in ("on-new", "on-old"):
            await add(real_store, name, receiver.url(name), old)
            # 3 s: the 'during' event is sent within it, worker start-up included.
            await real_store.rotate_secret(name, new, overlap_s=3.0)
        async with running_worker(real_store, replace(FAST, max_attempts=1)):
            await real_store.add_event(new_event("during"))
            await settle(real_store)
            during = list(receiver.requests)
            await asyncio.sleep(max(0.0, (await real_store.get_destination("on-old"))
                                    .previous_secret_until - time.time() + 0.1))
            await real_store.add_event(new_event("after"))
            await settle(real_store)
        after = receiver.requests[len(during):]
    assert sorted((r.endpoint, r.verified) for r in during) == [
        ("on-new", True), ("on-old", True)]
    assert sorted((r.endpoint, r.verified) for r in after) == [
        ("on-new", True), ("on-old", False)]


async def _age_backlog(store: Store, destination_id: int, rounds: int) -> None:
    """Charge every job of one destination `rounds` failed attempts (via claim/finish),
    leaving them due now: a backlog of late retries."""
    from hookline.shared.models import AttemptResult, Retry

    failed = AttemptResult(started_at=time.time(), duration_s=0.01, status_code=503)
    for _ in range(rounds):
        claims = [c for c in await store.claim("ager", 1000, 30.0, 100)
                  if c.destination_id == destination_id]
        await store.finish([(c, Retry(delay_s=0.0, error="HTTP 503"), failed) for c in claims])


async def _healthy_latency(store: Store, config: Config, wait_s: float) -> float | None:
    """Run a worker over a 200-job late-retry backlog of a hanging destination, send one event
    to a healthy one, and return its accept-to-done latency (None if not done in wait_s)."""
    secret = generate_secret()
    endpoints = [Endpoint("dead", secret, parse_behaviour("hang")), Endpoint("healthy", secret)]
    async with Receiver(endpoints) as receiver:
        dead = await store.add_destination(name="dead", url=receiver.url("dead"), secret=secret,
                                           event_types=["backlog"], max_in_flight=500)
        await store.add_events([new_event(f"b{i}", type_="backlog") for i in range(200)])
        await _age_backlog(store, dead.id, config.late_retry_after_attempts)
        await add(store, "healthy", receiver.url("healthy"), secret)
        await store.update_destination("healthy", event_types=["fresh"])
        async with running_worker(store, config):
            deadline = time.monotonic() + 5
            while receiver.in_flight("dead") == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)  # the backlog holds the worker's slots
            [accepted] = await store.add_events([new_event("f1", type_="fresh")])
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                jobs = [j for j in await store.list_jobs(status="done")
                        if j.event_id == accepted.event_id]
                if jobs:
                    return jobs[0].finished_at - jobs[0].created_at
                await asyncio.sleep(0.02)
    return None


RESERVE = replace(FAST, worker_concurrency=8, claim_batch=8, attempt_timeout_s=3.0,
                  lease_s=6.0, max_attempts=100, late_retry_after_attempts=3,
                  late_retry_share=0.5, breaker_failures=0, breaker_window_s=0)


async def test_reserved_capacity_keeps_fresh_events_fast_behind_a_dead_backlog(real_store):
    """A destination that never answers, with 200 late retries due, does not delay a fresh
    event to a healthy destination: accept-to-done stays well under the 3 s attempt timeout
    that every late retry holds a slot for."""
    latency = await _healthy_latency(real_store, RESERVE, wait_s=2.5)
    assert latency is not None and latency < 1.5


async def test_the_late_reservation_alone_keeps_a_slot_for_fresh_events(real_store):
    """The same with no per-destination cap (destination_slot_share=1): the late-retry
    reservation by itself leaves slots for the fresh event."""
    latency = await _healthy_latency(real_store, replace(RESERVE, destination_slot_share=1.0),
                                     wait_s=2.5)
    assert latency is not None and latency < 1.5


async def test_without_reservation_the_backlog_does_delay_fresh_events(real_store):
    """Control for the test above: with late retries allowed every slot
    (late_retry_share=1) and one destination too (destination_slot_share=1), the fresh event
    waits for a hung attempt's 3 s timeout."""
    latency = await _healthy_latency(
        real_store, replace(RESERVE, late_retry_share=1.0, destination_slot_share=1.0),
        wait_s=8.0)
    assert latency is not None and latency >= 2.5


async def test_ordered_destination_delivers_in_order_one_at_a_time(real_store):
    """Ordered mode: every event fails twice (500) before its 200, yet the receiver sees the
    events strictly in acceptance order, never two at once, although max_in_flight is 10."""
    secret = generate_secret()
    async with Receiver([Endpoint("fifo", secret, parse_behaviour("fail:2"))]) as receiver:
        await add(real_store, "fifo", receiver.url("fifo"), secret)
        await real_store.update_destination("fifo", ordered=True)
        accepted = await real_store.add_events([new_event(f"e{i}") for i in range(4)])
        async with running_worker(real_store, replace(FAST, max_attempts=5)):
            counts = await settle(real_store)
        seen = [r.webhook_id for r in receiver.requests]
        assert receiver.max_concurrent("fifo") == 1
        assert len(seen) == len(await real_store.list_attempts()) == 12
    assert counts["done"] == 4
    assert seen == [a.message_id for a in accepted for _ in range(3)]


async def test_rate_limit_and_timeout_override_apply_to_real_sends(real_store):
    """rate_limit_per_s=5 spreads 10 requests over about 1 s (burst of 5, then 5 per second);
    a destination timeout_s of 0.3 cuts a hanging receiver at ~0.3 s, not the 1 s default."""
    secret = generate_secret()
    endpoints = [Endpoint("limited", secret), Endpoint("hang", secret, parse_behaviour("hang"))]
    async with Receiver(endpoints) as receiver:
        await add(real_store, "limited", receiver.url("limited"), secret)
        await real_store.update_destination("limited", rate_limit_per_s=5.0,
                                            event_types=["limited"])
        await add(real_store, "hang", receiver.url("hang"), secret)
        await real_store.update_destination("hang", timeout_s=0.3, event_types=["hang"])
        await real_store.add_events([new_event(f"e{i}", type_="limited") for i in range(10)]
                                    + [new_event("h", type_="hang")])
        async with running_worker(real_store, replace(FAST, max_attempts=1)):
            counts = await settle(real_store)
        times = sorted(r.received_at for r in receiver.requests if r.endpoint == "limited")
    assert counts == {"pending": 0, "running": 0, "done": 10, "dead": 1}
    # About 1 s at 5/s (0.6: the first request's own delay may eat into it); unlimited,
    # well under 0.1 s.
    assert len(times) == 10 and times[-1] - times[0] >= 0.6
    [hung] = [a for a in await real_store.list_attempts() if a.status_code is None]
    assert hung.error == "TimeoutError" and 0.25 <= hung.duration_s < 0.8


async def test_circuit_breaker_pauses_a_failing_destination(real_store):
    """With breaker_failures=3 (no minimum span), a destination answering 503 gets exactly
    three requests, is auto-paused with the reason recorded, and its job waits uncharged."""
    secret = generate_secret()
    config = replace(FAST, max_attempts=10, breaker_failures=3, breaker_min_span_s=0)
    async with Receiver([Endpoint("down", secret, parse_behaviour("status:503"))]) as receiver:
        await add(real_store, "down", receiver.url("down"), secret)
        async with running_worker(real_store, config):
            await real_store.add_event(new_event("e1"))
            deadline = time.monotonic() + 10
            while not (await real_store.get_destination("down")).paused:
                assert time.monotonic() < deadline, "not auto-paused"
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # a paused destination gets nothing more
        assert len(receiver.requests) == len(await real_store.list_attempts()) == 3
    down = await real_store.get_destination("down")
    assert down.paused_reason == "circuit breaker: 3 consecutive failed attempts"
    [job] = await real_store.list_jobs()
    assert job.status == "pending" and job.attempts == 3

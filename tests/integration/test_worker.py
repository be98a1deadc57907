"""The worker loop in-process against a real database (each backend in turn: a SQLite file,
then PostgreSQL) and the receiver fixture on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields
from hookline.workers.loop import Worker
from hookline.workers.sender import Sender
from tests.conftest import new_event, settle

FAST = Config(allow_networks="127.0.0.0/8", retry_base_s=0.05, retry_cap_s=0.1, max_attempts=3,
              lease_s=3.0, attempt_timeout_s=1.0, poll_interval_s=0.2, graceful_timeout_s=0.5)


@contextlib.asynccontextmanager
async def running_worker(store: Store, config: Config = FAST, name: str = "w1"):
    stop = asyncio.Event()
    async with Sender(timeout_s=config.attempt_timeout_s, policy=config.address_policy) as sender:
        task = asyncio.create_task(Worker(store, config, name, sender).run(stop))
        try:
            yield
        finally:
            stop.set()
            await task


async def add(store: Store, receiver: Receiver, name: str, secret: str,
              max_in_flight: int = 10) -> None:
    await store.add_destination(name=name, url=receiver.url(name), secret=secret,
                                event_types=["*"], max_in_flight=max_in_flight)


async def test_delivers_signed_exact_bytes_once(real_store):
    """Each event reaches the receiver once, verified by standardwebhooks, with the stored
    bytes; the job ends done with one attempt recorded."""
    secret = generate_secret()
    async with Receiver([Endpoint("ok", secret)]) as receiver:
        await add(real_store, receiver, "ok", secret)
        async with running_worker(real_store):
            await real_store.add_events([new_event(f"e{i}") for i in range(20)])
            counts = await settle(real_store)
        assert counts["done"] == 20
        assert len(receiver.effects) == 20
        assert all(r.verified for r in receiver.requests)
        assert len(receiver.requests) == len(await real_store.list_attempts()) == 20


async def test_new_event_is_picked_up_by_wakeup_not_poll(real_store):
    """With a 5 s poll interval, an idle worker still delivers a new event at once (about
    50 ms; the limit, 1 s, leaves a loaded machine room)."""
    secret = generate_secret()
    config = replace(FAST, poll_interval_s=5.0)
    async with Receiver([Endpoint("ok", secret)]) as receiver:
        await add(real_store, receiver, "ok", secret)
        async with running_worker(real_store, config):
            await asyncio.sleep(0.3)  # the worker is idle, waiting
            t0 = time.monotonic()
            await real_store.add_events([new_event("e1")])
            while not receiver.effects:
                await asyncio.sleep(0.005)
                assert time.monotonic() - t0 < 2.0, "not delivered before the poll"
            assert time.monotonic() - t0 < 1.0  # the poll: 5 s


async def test_transient_failures_retry_then_succeed(real_store):
    """An endpoint answering 500 twice then 200 gets 3 attempts and one effect."""
    secret = generate_secret()
    async with Receiver([Endpoint("flaky", secret, parse_behaviour("fail:2"))]) as receiver:
        await add(real_store, receiver, "flaky", secret)
        async with running_worker(real_store):
            await real_store.add_events([new_event("e1")])
            counts = await settle(real_store)
        assert counts["done"] == 1
        assert [a.status_code for a in await real_store.list_attempts()] == [500, 500, 200]
        assert len(receiver.effects) == 1


async def test_attempt_cap_makes_job_dead(real_store):
    """An endpoint that always fails is tried max_attempts times, then the job is dead."""
    secret = generate_secret()
    async with Receiver([Endpoint("down", secret, parse_behaviour("status:503"))]) as receiver:
        await add(real_store, receiver, "down", secret)
        async with running_worker(real_store):
            await real_store.add_events([new_event("e1")])
            counts = await settle(real_store)
        assert counts["dead"] == 1
        job = (await real_store.list_jobs())[0]
        assert job.attempts == FAST.max_attempts == len(receiver.requests)
        assert "attempt cap" in job.last_error


async def test_response_loss_gives_one_effect_and_a_retry(real_store):
    """A receiver that closes without answering gets a second attempt (same webhook-id)
    and records one effect: at-least-once plus receiver dedupe."""
    secret = generate_secret()
    async with Receiver([Endpoint("lossy", secret, parse_behaviour("drop_first"))]) as receiver:
        await add(real_store, receiver, "lossy", secret)
        async with running_worker(real_store):
            await real_store.add_events([new_event(f"e{i}") for i in range(5)])
            counts = await settle(real_store)
        assert counts["done"] == 5
        assert len(receiver.effects) == 5 and len(receiver.requests) == 10
        errors = [a.error for a in await real_store.list_attempts() if a.status_code is None]
        assert errors == ["ServerDisconnectedError"] * 5


async def test_max_in_flight_one_holds_with_two_workers(real_store):
    """Two workers never send two requests at once to a destination limited to 1."""
    secret = generate_secret()
    async with Receiver([Endpoint("slow", secret, parse_behaviour("slow:0.02"))]) as receiver:
        await add(real_store, receiver, "slow", secret, max_in_flight=1)
        async with running_worker(real_store, name="w1"), running_worker(real_store, name="w2"):
            await real_store.add_events([new_event(f"e{i}") for i in range(15)])
            await settle(real_store)
        assert receiver.max_concurrent("slow") == 1
        assert len(receiver.effects) == 15


async def test_graceful_stop_hands_back_uncharged(real_store):
    """Stopping during a send that outlasts the grace period hands the job back with its
    attempt count restored, pending and due."""
    secret = generate_secret()
    async with Receiver([Endpoint("hang", secret, parse_behaviour("hang"))]) as receiver:
        await add(real_store, receiver, "hang", secret)
        async with running_worker(real_store):
            await real_store.add_events([new_event("e1")])
            while receiver.in_flight("hang") == 0:
                await asyncio.sleep(0.01)
        job = (await real_store.list_jobs())[0]
        assert job.status == "pending" and job.attempts == 0


@pytest.mark.sqlite_only
async def test_a_busy_worker_passes_the_wake_up_to_an_idle_one(store_url):
    """On SQLite a commit wakes one worker, the first by socket name. When that one cannot
    take new work (here its one slot holds a hanging request), it passes the wake-up on: the
    other worker delivers the next event at once, not at its 30 s poll."""
    secret = generate_secret()
    config = replace(FAST, poll_interval_s=30.0, worker_concurrency=1, attempt_timeout_s=20.0,
                     lease_s=30.0)
    stores = [SqliteStore(store_url), SqliteStore(store_url)]
    for store in stores:
        await store.open()
    endpoints = [Endpoint("hang", secret, parse_behaviour("hang")), Endpoint("ok", secret)]
    try:
        async with Receiver(endpoints) as receiver:
            for name, types in (("hang", ["slow.*"]), ("ok", ["fast.*"])):
                await stores[0].add_destination(name=name, url=receiver.url(name),
                                                secret=secret, event_types=types,
                                                max_in_flight=10)
            async with running_worker(stores[0], config, "w0"), \
                    running_worker(stores[1], config, "w1"):
                while not all(s._listener for s in stores):  # both waiting
                    await asyncio.sleep(0.01)
                first = min((0, 1), key=lambda i: str(stores[i]._listener.path))
                await asyncio.sleep(0.3)  # both idle: their first claims (at start) are made
                await stores[0].add_events([new_event("e1", "slow.x")])
                while receiver.in_flight("hang") == 0:
                    await asyncio.sleep(0.01)
                [hanging] = await stores[0].list_jobs()
                assert hanging.lease_owner == f"w{first}"  # the one woken took it
                t0 = time.monotonic()
                await stores[0].add_events([new_event("e2", "fast.x")])
                while not receiver.effects:
                    await asyncio.sleep(0.005)
                    assert time.monotonic() - t0 < 5.0, "not delivered before the poll"
                assert time.monotonic() - t0 < 1.0
                while not (done := [a for a in await stores[0].list_attempts()
                                    if a.status_code == 200]):
                    await asyncio.sleep(0.01)  # the result is recorded after the effect
                assert done[0].worker == f"w{1 - first}"
    finally:
        for store in stores:
            await store.close()


DESTINATION_LINES = ("job_claimed", "attempt_failed", "job_retry_scheduled", "job_done",
                     "job_dead")
"""The worker's log lines about a delivery that name its destination."""


async def test_delivery_log_lines_name_the_destinations_tenant(real_store):
    """Every tenant may have a destination `billing`: each worker line naming a delivery's
    destination (claimed, failed, retry scheduled, done, dead) also names its tenant, so an
    operator reading `destination=billing` knows whose (the default tenant's too)."""
    secret = generate_secret()
    behaviour = {"_default": "ok", "acme": "status:503", "globex": "ok"}
    path = {tenant: f"{tenant.lstrip('_')}-billing" for tenant in behaviour}  # no `_` first
    endpoints = [Endpoint(path[tenant], secret, parse_behaviour(b))
                 for tenant, b in behaviour.items()]
    async with Receiver(endpoints) as receiver:
        for tenant in behaviour:
            if tenant != "_default":
                await real_store.put_tenant(tenant, TenantFields())
            await real_store.add_destination(name="billing", url=receiver.url(path[tenant]),
                                             secret=secret, event_types=["*"], max_in_flight=5,
                                             tenant=tenant)
        with capture_logs() as logs:
            async with running_worker(real_store):
                await real_store.add_events([new_event(f"e-{t}", tenant=t) for t in behaviour])
                counts = await settle(real_store)
    assert (counts["done"], counts["dead"]) == (2, 1)
    tenant_of_job = {job.id: job.tenant for job in await real_store.list_jobs()}
    lines = [line for line in logs if line["event"] in DESTINATION_LINES]
    assert {line["event"] for line in lines} == set(DESTINATION_LINES)
    for line in lines:
        assert line["destination"] == "billing", line
        assert line.get("tenant") == tenant_of_job[line["job_id"]], line

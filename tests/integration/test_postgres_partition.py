"""A silent network between hookline and PostgreSQL (rehearsal/blackhole.py: a real TCP proxy in
front of the test server that freezes every connection and then heals for new ones only).

Bounded by the settings (shortened here): ingest answers 503 within its commit timeout during
the partition and commits again within seconds of the heal, with no restart; readiness
follows its own commits; a host cut off while holding a destination's row lock blocks the
other hosts only until the server ends its transaction, and they then deliver all of that
destination's jobs, the lost host's leased ones after their lease; a frozen LISTEN connection
is replaced.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hookline.ingest.app import build_app
from hookline.rehearsal.blackhole import BlackholeProxy
from hookline.rehearsal.receiver import Endpoint, Receiver
from hookline.shared.config import Config
from hookline.shared.errors import StoreBusy, StoreUnavailable
from hookline.shared.models import AttemptResult, Done
from hookline.shared.signing import generate_secret
from hookline.shared.store import postgres as postgres_store
from hookline.shared.store.factory import postgres_limits
from hookline.shared.store.pg_limits import PostgresLimits
from hookline.shared.store.postgres import PostgresStore
from tests.conftest import new_event, serving
from tests.integration.test_operator_delivery import running_worker, until

# Every bound a few seconds at most, so each partition here lasts a few seconds.
LIMITS = PostgresLimits(connect_timeout_s=1.0, acquire_timeout_s=1.0,
                        transaction_timeout_s=1.5, statement_timeout_s=1.0,
                        idle_in_transaction_timeout_s=2.0, lock_timeout_s=1.0)
TOKEN = "partition-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)


async def _open(url: str) -> PostgresStore:
    store = PostgresStore(url, limits=LIMITS)
    await store.open()
    return store


@pytest.fixture
async def through_proxy(pg_url: str) -> AsyncIterator[tuple[BlackholeProxy, PostgresStore]]:
    """A store whose every connection crosses a blackhole proxy, and the proxy."""
    with BlackholeProxy.for_url(pg_url) as (proxy, url):
        store = await _open(url)
        try:
            yield proxy, store
        finally:
            await asyncio.wait_for(store.close(), 15)


async def _post(http: aiohttp.ClientSession, port: int, event_id: str) -> tuple[int, dict[str, str],
                                                                                 float]:
    started = time.monotonic()
    async with http.post(f"http://127.0.0.1:{port}/v1/events", headers=AUTH,
                         json={"id": event_id, "type": "push", "data": {}}) as answer:
        body = await answer.json()
        return answer.status, {"error": body.get("error", ""),
                               "retry_after": answer.headers.get("Retry-After", "")}, (
            time.monotonic() - started)


async def _commits_check(http: aiohttp.ClientSession, port: int) -> str:
    return (await _readyz_checks(http, port))["commits"]


async def _readyz_checks(http: aiohttp.ClientSession, port: int) -> dict[str, str]:
    async with http.get(f"http://127.0.0.1:{port}/readyz") as answer:
        return {k: str(v) for k, v in (await answer.json())["checks"].items()}


async def test_ingest_answers_503_during_a_partition_and_commits_again_after_the_heal(
        through_proxy: tuple[BlackholeProxy, PostgresStore], pg_url: str) -> None:
    """Before: 202. Frozen: each POST is answered 503 store_unavailable with Retry-After
    within the commit timeout (not after the client gave up), /readyz says the commits fail.
    Healed: a 202 again within seconds, same process, /readyz's commit check ok; the event
    answered 503 is sent again with its id and stored once."""
    proxy, store = through_proxy
    config = Config(db=pg_url, ingest_token=TOKEN, ingest_commit_timeout_s=1.0)
    app = build_app(store, config)
    timeout = aiohttp.ClientTimeout(total=30)  # far past every bound: a hang fails the test
    async with serving(app) as port, aiohttp.ClientSession(timeout=timeout) as http:
        assert (await _post(http, port, "before"))[0] == 202
        proxy.freeze()
        during = [await _post(http, port, f"during-{n}") for n in range(3)]
        for status, answer, took_s in during:
            assert (status, answer["error"]) == (503, "store_unavailable"), answer
            assert answer["retry_after"] and took_s < 10, (answer, took_s)
        checks = await _readyz_checks(http, port)
        assert checks["commits"].startswith("failing"), "readyz lies"
        # The database check says what is wrong (the store's deadline, here shorter than
        # the probe's own; the probe's timeout alone used to read "not writable: ").
        assert checks["database"].startswith("not writable: ") and (
            "did not answer in time" in checks["database"]), checks["database"]
        proxy.heal()
        healed_at = time.monotonic()
        while (status := (await _post(http, port, "after"))[0]) != 202:
            assert status == 503 and time.monotonic() - healed_at < 20, status
        assert await _commits_check(http, port) == "ok"
        # The client's retry of an event answered 503: stored exactly once.
        assert (await _post(http, port, "during-0"))[0] in (200, 202)
        assert (await _post(http, port, "during-0"))[0] == 200
    assert store.timeouts >= 1


async def test_a_host_cut_off_holding_a_destination_lock_blocks_the_others_only_briefly(
        through_proxy: tuple[BlackholeProxy, PostgresStore], pg_url: str) -> None:
    """The lost host leases two jobs, then is cut off in its next claim just after taking
    the destination's row lock. Its client gives up at its transaction deadline; the server
    ends the orphaned transaction at idle_in_transaction_session_timeout, and the other host then
    claims and delivers every job of that destination, the lost host's two after their
    lease."""
    proxy, lost = through_proxy
    other = await _open(pg_url)
    try:
        await other.add_destination(name="d", url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "a" * 32, event_types=["push"],
                                    max_in_flight=100)
        await other.add_events([new_event(f"e{n}") for n in range(6)])
        leased = await lost.claim("lost-host", 2, 3.0, 5)
        assert len(leased) == 2

        # A real claim, cut off once the server has answered its destination lock: the
        # server's session is left idle in transaction holding that row lock.
        proxy.freeze_mid_transaction(b"FOR NO KEY UPDATE")
        with pytest.raises(StoreUnavailable, match="did not answer in time"):
            await asyncio.wait_for(lost.claim("lost-host", 4, 3.0, 5), 20)
        assert proxy.frozen
        cut_off_at = time.monotonic()
        delivered: set[int] = set()
        first_claim_after_s = None
        while len(delivered) < 6:
            assert time.monotonic() - cut_off_at < 30, f"stuck: {len(delivered)} of 6"
            try:
                claims = await other.claim("other-host", 10, 30.0, 5)
            except (StoreBusy, StoreUnavailable):  # lock_timeout while the lock is held
                continue
            if claims and first_claim_after_s is None:
                first_claim_after_s = time.monotonic() - cut_off_at
            await other.finish([(claim, Done(), OK) for claim in claims])
            delivered.update(claim.job_id for claim in claims)
            await asyncio.sleep(0.2)
        assert {claim.job_id for claim in leased} <= delivered
        assert (await other.stats()).jobs_by_status["done"] == 6
    finally:
        await other.close()


async def test_a_frozen_listen_connection_is_replaced(
        through_proxy: tuple[BlackholeProxy, PostgresStore], pg_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The LISTEN connection freezes (the network healed for new connections only): it is
    pinged, replaced, and the next commit's wake-up reaches the waiter again."""
    monkeypatch.setattr(postgres_store, "LISTEN_CHECK_INTERVAL_S", 0.2)
    proxy, store = through_proxy
    assert not await store.wait_for_jobs(0.1)  # listening, nothing due
    frozen = store._listen_conn  # which connection listens is the point
    proxy.freeze()
    proxy.heal()
    # Pings fail within connect_timeout_s and a new listener is opened: as many waits as
    # that takes on a busy machine (a fixed count of four missed it under a full test run).
    deadline = time.monotonic() + 20
    while store._listen_conn in (frozen, None):
        assert time.monotonic() < deadline, "the frozen LISTEN connection was never replaced"
        await store.wait_for_jobs(0.3)
    other = await _open(pg_url)
    try:
        await other.add_destination(name="d", url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "a" * 32, event_types=["push"],
                                    max_in_flight=100)
        waiter = asyncio.create_task(store.wait_for_jobs(5.0))
        await asyncio.sleep(0.3)
        await other.add_events([new_event("wake")])
        assert await waiter, "the wake-up went to a frozen connection"
    finally:
        await other.close()


async def test_a_connection_the_server_ends_mid_transaction_is_store_unavailable(
        pg_url: str) -> None:
    """The server ends a claim's session while it waits on a row lock (pg_terminate_backend:
    AdminShutdown, as at a fast shutdown): the claim raises StoreUnavailable, which workers
    retry and ingest answers 503, never asyncpg's InterfaceError from closing a connection
    the pool had already taken back (which crashed the worker and answered 500)."""
    store = await _open(pg_url)
    holder = await asyncpg.connect(pg_url)
    try:
        await store.add_destination(name="d", url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "a" * 32, event_types=["push"],
                                    max_in_flight=10)
        await store.add_events([new_event("held")])
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM destinations FOR UPDATE")
            claim = asyncio.create_task(store.claim("w", 1, 3.0, 5))
            deadline = time.monotonic() + 10
            waiting: list[int] = []
            while not waiting:
                assert time.monotonic() < deadline, "the claim never waited on the lock"
                await asyncio.sleep(0.02)
                waiting = [r["pid"] for r in await holder.fetch(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND pid <> pg_backend_pid() AND datname = current_database()")]
            await holder.execute("SELECT pg_terminate_backend($1)", waiting[0])
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(claim, 10)
        assert [c.job_id for c in await store.claim("w", 1, 3.0, 5)]  # the pool recovers
    finally:
        await holder.close()
        await store.close()


async def test_metrics_still_answer_what_the_processes_know_during_a_partition(
        pg_url: str) -> None:
    """Frozen: /metrics answers 200 within Prometheus's default 10 s scrape timeout, with
    the default deadlines (a read's is 15 s), with hookline_ready 0,
    hookline_database_readable 0, what the processes know, and none of the database's
    families (a zero would read as jobs gone or a counter reset); healed: all of them again.
    Before, it answered 503 for the whole outage, hiding the very counters that tell it."""
    config = Config(db=pg_url, ingest_token=TOKEN, admin_token=TOKEN)
    with BlackholeProxy.for_url(pg_url) as (proxy, url):
        store = PostgresStore(url, limits=postgres_limits(config))
        await store.open()
        try:
            await _scrape_through_a_partition(proxy, store, config)
        finally:
            await asyncio.wait_for(store.close(), 20)


async def _scrape_through_a_partition(proxy: BlackholeProxy, store: PostgresStore,
                                      config: Config) -> None:
    async with serving(build_app(store, config)) as port, \
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30), headers=AUTH) as http:
        async def scrape() -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as answer:
                assert answer.status == 200, await answer.text()
                text = await answer.text()
            return {family.name: {tuple(sorted(s.labels.items())): s.value
                                  for s in family.samples}
                    for family in text_string_to_metric_families(text)}

        before = await scrape()
        assert "hookline_jobs" in before and before["hookline_database_readable"] == {(): 1}
        proxy.freeze()
        started = time.monotonic()
        during = await scrape()
        assert time.monotonic() - started < 10
        assert during["hookline_database_readable"] == {(): 0}
        assert during["hookline_ready"] == {(): 0}
        assert "hookline_jobs" not in during and "hookline_events_stored" not in during
        assert "hookline_build_info" in during
        proxy.heal()
        healed_at = time.monotonic()
        while (after := await scrape())["hookline_database_readable"] != {(): 1}:
            assert time.monotonic() - healed_at < 20
        assert "hookline_jobs" in after


async def test_a_claim_whose_commit_answer_is_lost_is_handed_back_and_sent_at_once(
        through_proxy: tuple[BlackholeProxy, PostgresStore], pg_url: str) -> None:
    """A worker's claim commits, but the server's answer to its COMMIT never reaches the
    worker (the network cut just then). Its next write hands the jobs that claim leased back,
    uncharged, and they are delivered long before their 30 s lease would have run out; on
    their final attempt (max_attempts 1) too, where the lease's end would have made them dead
    "worker lost", never sent."""
    proxy, store = through_proxy
    other = await _open(pg_url)
    secret = generate_secret()
    config = Config(allow_networks="127.0.0.0/8", max_attempts=1, lease_s=30.0,
                    attempt_timeout_s=2.0, poll_interval_s=0.2, graceful_timeout_s=0.5)
    try:
        async with Receiver([Endpoint("d", secret)]) as receiver:
            await other.add_destination(name="d", url=receiver.url("d"), secret=secret,
                                        event_types=["*"], max_in_flight=10)
            async with running_worker(store, config):
                proxy.freeze_at_commit(b"md5(random()")  # the claim's lease statement
                await other.add_events([new_event(f"e{n}") for n in range(3)])
                assert await asyncio.to_thread(proxy.wait_frozen, 10), "no claim committed"
                frozen_at = time.monotonic()
                proxy.heal()
                await until(lambda: len({e.webhook_id for e in receiver.effects}) == 3, 20,
                            "the three deliveries")
                assert time.monotonic() - frozen_at < 20  # the lease is 30 s
        jobs = await other.list_jobs()
        assert {(j.status, j.attempts) for j in jobs} == {("done", 1)}
        errors = [[a.error for a in (await other.get_job(j.id)).attempts] for j in jobs]
        assert ["handed back (claim answer lost)", None] in errors
    finally:
        await other.close()

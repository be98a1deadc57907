"""Rehearsal scenarios where the database itself goes away (see rehearsal/scenarios.py).

* `postgres_outage`: a PostgreSQL server of the scenario's own (rehearsal/pgserver.py, so an
  operator's server is never stopped) is stopped with `pg_ctl stop -m fast` for 3 s and
  started again while a client posts events throughout.
* `partition`: the service reaches its PostgreSQL server (again the scenario's own) through
  a blackhole proxy (rehearsal/blackhole.py) that freezes every connection for 4 s, as a
  network partition does (packets dropped, nothing refused or reset), then heals for new
  connections only, while a client posts 20 events/s.
* `busy_boot`: a worker respawns while another process holds SQLite's write lock past
  `busy_timeout_s`.

All expect the service to carry on by itself: no 500, nothing lost, the supervisor running.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from hookline.rehearsal.blackhole import BlackholeProxy
from hookline.rehearsal.drill import Drill, Target, drill
from hookline.rehearsal.harness import INGEST_HEADERS, post_events, wait_settled
from hookline.rehearsal.pgserver import start_server
from hookline.rehearsal.scenarios import Result, Scenario, _collect, event_body, wait_for
from hookline.shared.process.lifecycle import TRANSIENT_EXIT

_OUTAGE_S = 3.0


async def postgres_outage(directory: Path) -> Result:
    """Stop PostgreSQL for 3 s under load; ingest answers 503 meanwhile, never 500; every
    event answered 2xx is delivered; the supervisor never stops."""
    # In the temp folder: under root the server's user must reach it (not --out's parents).
    server = await asyncio.to_thread(start_server)
    try:
        db_url = await asyncio.to_thread(server.create_database, "outage")
        settings = {"HOOKLINE_RUNTIME_DIR": str(directory / "run"),
                    "HOOKLINE_PID_FILE": str(directory / "hookline.pid")}
        async with drill(directory, [Target("a")], settings=settings, db_url=db_url) as d:
            answers: list[tuple[float, int]] = []
            stop = asyncio.Event()

            async def client(session: aiohttp.ClientSession) -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    try:
                        async with session.post(f"{d.service.base_url}/v1/events",
                                                data=event_body(f"e{n}"),
                                                headers=INGEST_HEADERS) as resp:
                            await resp.read()
                            answers.append((time.time(), resp.status))
                    except (aiohttp.ClientError, TimeoutError):
                        answers.append((time.time(), 0))
                    await asyncio.sleep(0.02)

            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
                posting = asyncio.create_task(client(s))
                await asyncio.sleep(1.0)
                await asyncio.to_thread(server.halt, "fast")
                halted_at = time.time()
                d.mark("PostgreSQL stopped")
                await asyncio.sleep(_OUTAGE_S)
                await asyncio.to_thread(server.resume)
                back_at = time.time()
                d.mark("PostgreSQL started")
                await asyncio.sleep(2.0)
                stop.set()
                await posting
            counts = await wait_settled(d.store, 30)
            accepted = sum(1 for _, status in answers if status == 202)
            after = sorted(e.received_at for e in d.receiver.effects
                           if e.received_at >= back_at)
            during = Counter(str(status) for at, status in answers if halted_at <= at < back_at)
            running = d.service.proc is not None and d.service.proc.poll() is None
            return await _collect(d, Result(checks={
                "supervisor_kept_running": running,
                "no_500": all(status in (200, 202, 503) for _, status in answers),
                "outage_answered_503": int(during.get("503", 0)) > 0,
                "every_2xx_delivered": counts["done"] == accepted
                and len(d.receiver.effects) == accepted,
                "delivering_after_return": bool(after),
            }, observed={
                "outage_s": round(back_at - halted_at, 2),
                "answers_during_outage": dict(during),
                "answers": dict(Counter(str(status) for _, status in answers)),
                "return_to_first_delivery_s": round(after[0] - back_at, 3) if after else None,
            }))
    finally:
        await asyncio.to_thread(server.stop)


_PARTITION_S = 4.0
_PARTITION_RATE_PER_S = 20.0
PARTITION_SETTINGS = {
    "HOOKLINE_INGEST_COMMIT_TIMEOUT_S": "1", "HOOKLINE_PG_CONNECT_TIMEOUT_S": "1",
    "HOOKLINE_PG_ACQUIRE_TIMEOUT_S": "1", "HOOKLINE_PG_TRANSACTION_TIMEOUT_S": "2",
    "HOOKLINE_PG_STATEMENT_TIMEOUT_S": "2", "HOOKLINE_PG_IDLE_IN_TRANSACTION_TIMEOUT_S": "2",
    "HOOKLINE_PG_LOCK_TIMEOUT_S": "1",
}
"""Every bound on a wait for PostgreSQL shortened (OPERATIONS.md, "PostgreSQL for many
hosts"), so a partition of a few seconds shows all of it."""


async def partition(directory: Path) -> Result:
    """Freeze every connection to PostgreSQL for 4 s under 20 events/s, then heal for new
    connections only: ingest answers 503 within its commit deadline meanwhile, never 500 and
    never a hang; after the heal it answers 202 and delivers again with the same processes;
    every event is delivered once the client has resent those answered 503."""
    server = await asyncio.to_thread(start_server)
    try:
        db_url = await asyncio.to_thread(server.create_database, "partition")
        settings = {"HOOKLINE_RUNTIME_DIR": str(directory / "run"),
                    "HOOKLINE_PID_FILE": str(directory / "hookline.pid"), **PARTITION_SETTINGS}
        with BlackholeProxy.for_url(db_url) as (proxy, proxied_url):
            async with drill(directory, [Target("a")], settings=settings, db_url=db_url,
                             service_db=proxied_url) as d:
                return await _partition_drill(d, proxy)
    finally:
        await asyncio.to_thread(server.stop)


async def _partition_drill(d: Drill, proxy: BlackholeProxy) -> Result:
    answers: list[tuple[float, float, int]] = []  # (sent, answered: unix seconds, status)
    event_ids: list[str] = []
    timeout = aiohttp.ClientTimeout(total=10)  # well past every bound: a hang shows as 0
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def post(event_id: str, first: bool = True) -> int:
            sent = time.time()
            try:
                async with session.post(f"{d.service.base_url}/v1/events",
                                        data=event_body(event_id),
                                        headers=INGEST_HEADERS) as resp:
                    await resp.read()
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError):
                status = 0
            if first:  # the client's resends are counted apart
                answers.append((sent, time.time(), status))
            return status

        async def readyz() -> int:
            try:
                async with session.get(f"{d.service.base_url}/readyz") as resp:
                    return resp.status
            except (aiohttp.ClientError, TimeoutError):
                return 0

        async def flow(stop: asyncio.Event) -> list[asyncio.Task[int]]:
            posts: list[asyncio.Task[int]] = []
            started = time.monotonic()
            while not stop.is_set():  # one task per event: a slow answer holds up no other
                event_ids.append(f"e{len(event_ids)}")
                posts.append(asyncio.create_task(post(event_ids[-1])))
                await asyncio.sleep(max(0.0, started + len(posts) / _PARTITION_RATE_PER_S
                                        - time.monotonic()))
            return posts

        stop = asyncio.Event()
        flowing = asyncio.create_task(flow(stop))
        await asyncio.sleep(1.5)
        await asyncio.to_thread(proxy.freeze)
        frozen_at = time.time()
        d.mark("network to PostgreSQL frozen")
        await asyncio.sleep(_PARTITION_S / 2)
        ready_during = await readyz()
        await asyncio.sleep(frozen_at + _PARTITION_S - time.time())
        proxy.heal()
        healed_at = time.time()
        d.mark("network healed (new connections only)")
        await asyncio.sleep(3.0)
        stop.set()
        statuses = await asyncio.gather(*await flowing)
        ready_after = await readyz()
        # The client's retry: an event answered 503 (or not at all) is sent again, same id.
        unanswered = [event_id for event_id, status in zip(event_ids, statuses, strict=True)
                      if status not in (200, 202)]
        resent = Counter([await post(event_id, first=False) for event_id in unanswered])
    counts = await wait_settled(d.store, 30)
    during = [(sent, answered, status) for sent, answered, status in answers
              if frozen_at <= sent < healed_at]
    first_503 = min((answered for _, answered, status in answers
                     if status == 503 and answered >= frozen_at), default=None)
    first_202 = min((answered for _, answered, status in answers
                     if status == 202 and answered >= healed_at), default=None)
    delivered_after = min((e.received_at for e in d.receiver.effects
                           if e.received_at >= healed_at), default=None)
    running = d.service.proc is not None and d.service.proc.poll() is None
    respawned = [e for e in d.service.log_events() if e.get("event") == "child_exited"]
    return await _collect(d, Result(checks={
        "supervisor_kept_running": running,
        "recovered_without_restart": not respawned,
        "no_500_no_hang": all(status in (200, 202, 503) for _, _, status in answers),
        "partition_answered_503": first_503 is not None,
        "not_ready_during_ready_after": (ready_during, ready_after) == (503, 200),
        "accepting_after_heal": first_202 is not None,
        "delivering_after_heal": delivered_after is not None,
        "every_event_delivered": set(resent) <= {200, 202}
        and counts["done"] == len(event_ids) == len(d.receiver.effects),
    }, observed={
        "partition_s": round(healed_at - frozen_at, 2),
        "freeze_to_first_503_s": _since(frozen_at, first_503),
        "answers_during_partition": dict(Counter(str(s) for _, _, s in during)),
        "slowest_answer_during_partition_s": round(max(
            (answered - sent for sent, answered, _ in during), default=0.0), 2),
        "heal_to_first_202_s": _since(healed_at, first_202),
        "heal_to_first_delivery_s": _since(healed_at, delivered_after),
        "readyz_during_after": [ready_during, ready_after],
        "answers": dict(Counter(str(status) for _, _, status in answers)),
        "resent_after_503": {str(k): v for k, v in resent.items()},
        "receiver_requests": len(d.receiver.requests),
    }))


def _since(start: float, instant: float | None) -> float | None:
    return None if instant is None else round(instant - start, 3)


async def busy_boot(directory: Path) -> Result:
    """A worker respawns into a write lock held past busy_timeout_s: it exits promptly with
    the transient code, the service keeps running, and delivers once the lock is free."""
    async with drill(directory, [Target("a")], workers=1,
                     settings={"HOOKLINE_BUSY_TIMEOUT_S": "0.5"}) as d:
        await wait_for(lambda: _events(d, "worker_started"), 20, "the worker")
        holder = sqlite3.connect(d.service.db, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # SQLite's write lock, held by another process
            os.kill(d.service.children()["worker-1"], signal.SIGKILL)
            d.mark("write lock held; worker SIGKILLed")
            t0 = time.monotonic()
            await wait_for(lambda: _events(d, "child_exited", slot="worker-1",
                                           exit_code=TRANSIENT_EXIT), 20,
                           "the respawned worker to exit with the transient code")
            exited_s = time.monotonic() - t0
            d.mark("worker exited 75")
            running = d.service.proc is not None and d.service.proc.poll() is None
        finally:
            holder.rollback()
            holder.close()
        d.mark("write lock released")
        statuses = await post_events(d.service.base_url,
                                     [event_body(f"e{i}") for i in range(10)])
        counts = await wait_settled(d.store, 30)
        return await _collect(d, Result(checks={
            "worker_exited_transient": True,
            "supervisor_kept_running": running,
            "no_boot_error_stop": not _events(d, "child_boot_failed"),
            "delivered_after_release": counts["done"] == 10 and len(d.receiver.effects) == 10,
        }, observed={"kill_to_transient_exit_s": round(exited_s, 2),
                     "statuses": {str(k): v for k, v in statuses.items()}}))


def _events(d: Any, event: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in d.service.log_events() if e.get("event") == event
            and all(e.get(k) == v for k, v in match.items())]


STORE_SCENARIOS = [
    Scenario("postgres_outage", "PostgreSQL stopped for 3 s under load: ingest answers 503, "
             "never 500; every event answered 2xx is delivered; the supervisor never stops",
             postgres_outage, quick=True),
    Scenario("partition", "every connection to PostgreSQL frozen for 4 s under 20 events/s "
             "(a blackhole: nothing refused or reset), then healed: ingest answers 503 within "
             "its commit deadline, never 500 or a hang, /readyz 503; after the heal 202s and "
             "deliveries resume with the same processes; every event is delivered",
             partition, quick=True),
    Scenario("busy_boot", "a worker respawning into a held SQLite write lock exits 75 at once; "
             "the service keeps running and delivers once the lock is free", busy_boot,
             quick=True, sqlite_only=True),
]

"""Rehearsal scenarios where the database itself goes away (see rehearsal/scenarios.py).

* `postgres_outage`: a PostgreSQL server of the scenario's own (rehearsal/pgserver.py, so an
  operator's server is never stopped) is stopped with `pg_ctl stop -m fast` for 3 s and
  started again while a client posts events throughout.
* `busy_boot`: a worker respawns while another process holds SQLite's write lock past
  `busy_timeout_s`.

Both expect the service to carry on by itself: no 500, nothing lost, the supervisor running.
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

from rehearsal.drill import Target, drill
from rehearsal.harness import INGEST_HEADERS, post_events, wait_settled
from rehearsal.pgserver import start_server
from rehearsal.scenarios import Result, Scenario, _collect, event_body, wait_for
from shared.process.lifecycle import TRANSIENT_EXIT

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
    Scenario("busy_boot", "a worker respawning into a held SQLite write lock exits 75 at once; "
             "the service keeps running and delivers once the lock is free", busy_boot,
             quick=True, sqlite_only=True),
]

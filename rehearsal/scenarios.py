"""The rehearsal scenarios: each breaks something real and checks what must still hold.

A scenario is `async fn(directory) -> Result`; its checks are named booleans, and it passes
when all hold. Every one runs the real service (`hookline serve`: supervisor, ingest and
workers as OS processes) against a real database file and the receiver fixture on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from hookline.rehearsal.drill import Drill, Target, drill
from hookline.rehearsal.harness import (
    INGEST_HEADERS,
    ROOT,
    Service,
    child_env,
    pid_alive,
    post_events,
    wait_settled,
)
from hookline.shared.store import open_store


@dataclass(slots=True)
class Result:
    """What a scenario observed: named checks, figures, and its drill (for the report)."""

    checks: dict[str, bool]
    observed: dict[str, Any]
    timeline: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    receipts: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0  # unix seconds: the origin of the timeline's `t` values


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named scenario, the outcome it expects, and whether `--quick` runs it."""

    name: str
    expected: str
    run: Callable[[Path], Awaitable[Result]]
    quick: bool = False
    sqlite_only: bool = False  # skipped on PostgreSQL (`hookline backup` is SQLite's)


def event_body(event_id: str, event_type: str = "drill.event") -> bytes:
    """A small `POST /v1/events` body."""
    return json.dumps({"id": event_id, "type": event_type, "data": {"n": event_id}}).encode()


async def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> None:
    """Poll an (async or sync) predicate every 20 ms. Raises TimeoutError."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(0.02)


async def _lease_owner_pid(d: Drill) -> int:
    running = await d.store.list_jobs(status="running")
    job = running[0] if running else None
    if job is None or not job.lease_owner:
        raise RuntimeError("no running job")
    return int(job.lease_owner.rsplit(":", 1)[1])


async def _collect(d: Drill, result: Result) -> Result:
    """Attach the drill's timeline, rows and receipts while its store is still open."""
    result.timeline = d.timeline()
    result.started = d.started
    result.jobs = [_as_dict(j) for j in await d.store.list_jobs(limit=100_000)]
    result.attempts = [_as_dict(a) for a in await d.store.list_attempts(limit=100_000)]
    result.receipts = d.receiver.receipts()
    return result


def _as_dict(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}


async def _restart_and_settle(d: Drill, workers: int) -> dict[str, int]:
    """Start a new service on the drill's database, wait until no job is pending or
    running, stop it; returns the job counts by status."""
    restarted = Service(d.service.db, d.service.log_path, workers=workers,
                        settings=d.service.settings)
    await restarted.start()
    d.mark("service restarted")
    try:
        return await wait_settled(d.store, 30)
    finally:
        restarted.stop()


async def worker_killed_mid_send(directory: Path) -> Result:
    """SIGKILL the worker whose request the receiver is holding."""
    async with drill(directory, [Target("held", "slow_first:1.0", max_in_flight=1)]) as d:
        await post_events(d.service.base_url, [event_body("e1")])
        await wait_for(lambda: d.receiver.in_flight("held") == 1, 10, "the request")
        victim = await _lease_owner_pid(d)
        os.kill(victim, signal.SIGKILL)
        d.mark(f"SIGKILL worker pid {victim}")
        await wait_settled(d.store, 20)
        [job] = await d.store.list_jobs()
        attempts = await d.store.list_attempts(job.id)
        events = [e["event"] for e in d.service.log_events()]
        return await _collect(d, Result(checks={
            "job_done": job.status == "done",
            "taken_over_by_another_worker": len(attempts) == 2
            and str(victim) not in attempts[1].worker,
            "lost_attempt_recorded": attempts[0].error == "lease expired (worker lost)",
            "one_receiver_effect": len(d.receiver.effects) == 1,
            "takeover_logged": "job_taken_over" in events,
            "victim_respawned": "child_started" in events and Counter(
                e for e in events if e == "child_started")["child_started"] >= 4,
        }, observed={"attempts": [a.worker for a in attempts], "job_attempts": job.attempts,
                     "receiver_requests": len(d.receiver.requests)}))


async def stale_completion_fenced(directory: Path) -> Result:
    """Freeze the sending worker past its lease; the taker delivers; the thawed worker's
    late finish must change nothing."""
    async with drill(directory, [Target("held", "slow_first:3.0", max_in_flight=1)]) as d:
        await post_events(d.service.base_url, [event_body("e1")])
        await wait_for(lambda: d.receiver.in_flight("held") == 1, 10, "the request")
        victim = await _lease_owner_pid(d)
        os.kill(victim, signal.SIGSTOP)
        d.mark(f"SIGSTOP worker pid {victim}")
        try:
            await wait_settled(d.store, 20)
            d.mark("taker finished the job")
        finally:
            os.kill(victim, signal.SIGCONT)
            d.mark(f"SIGCONT worker pid {victim}")

        def stale_finish_logged() -> bool:
            return any(e.get("event") == "lease_lost" and e.get("during") == "finish"
                       and e.get("pid") == victim for e in d.service.log_events())

        await wait_for(stale_finish_logged, 10, "the stale worker's finish")
        [job] = await d.store.list_jobs()
        attempts = await d.store.list_attempts(job.id)
        return await _collect(d, Result(checks={
            "stale_finish_changed_nothing": stale_finish_logged(),
            "final_state_is_the_takers": job.status == "done" and job.attempts == 2
            and str(victim) not in attempts[-1].worker and attempts[-1].status_code == 200,
            "one_receiver_effect": len(d.receiver.effects) == 1,
        }, observed={"attempts": [(a.worker, a.status_code, a.error) for a in attempts]}))


async def supervisor_killed(directory: Path) -> Result:
    """SIGKILL the supervisor mid-delivery; its children must exit; a restart delivers all."""
    async with drill(directory, [Target("slow", "slow:0.1", max_in_flight=1)]) as d:
        await post_events(d.service.base_url, [event_body(f"e{i}") for i in range(20)])
        children = {s: p for s, p in d.service.children().items() if s != "supervisor"}
        await asyncio.sleep(0.5)
        d.service.signal(signal.SIGKILL)
        d.mark("SIGKILL supervisor")
        t0 = time.monotonic()
        await wait_for(lambda: not any(pid_alive(p) for p in children.values()), 15,
                       "children to exit")
        orphans_gone_s = time.monotonic() - t0
        d.mark("all children gone")
        counts = await _restart_and_settle(d, workers=2)
        return await _collect(d, Result(checks={
            "children_exited": True,
            "every_event_delivered": counts["done"] == 20
            and len(d.receiver.effects) == 20,
        }, observed={"orphans_gone_s": round(orphans_gone_s, 2), "jobs": counts}))


async def ingest_killed_under_load(directory: Path) -> Result:
    """SIGKILL ingest while 16 clients post; clients retry until answered 2xx."""
    targets = [Target("a"), Target("b")]
    async with drill(directory, targets) as d:
        answered: dict[str, int] = {}
        failures = Counter[str]()
        ids = [f"e{i}" for i in range(400)]
        queue = list(ids)

        async def client(session: aiohttp.ClientSession) -> None:
            while queue:
                event_id = queue.pop()
                while True:
                    try:
                        async with session.post(f"{d.service.base_url}/v1/events",
                                                data=event_body(event_id),
                                                headers=INGEST_HEADERS) as resp:
                            await resp.read()
                            if resp.status in (200, 202):
                                answered[event_id] = resp.status
                                break
                            failures[str(resp.status)] += 1
                    except (TimeoutError, aiohttp.ClientError) as exc:
                        failures[type(exc).__name__] += 1
                    await asyncio.sleep(0.05)  # the client's own retry

        async def killer() -> None:
            await wait_for(lambda: len(answered) >= 100, 20, "100 answers")
            pid = d.service.children()["ingest"]
            os.kill(pid, signal.SIGKILL)
            d.mark(f"SIGKILL ingest pid {pid} after {len(answered)} answers")

        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await asyncio.gather(killer(), *(client(session) for _ in range(16)))
        d.mark("all clients answered")
        counts = await wait_settled(d.store, 30)
        stats = await d.store.stats()
        return await _collect(d, Result(checks={
            "every_answered_event_stored_once": stats.events == len(ids) == len(answered),
            "every_event_has_all_its_jobs": sum(counts.values()) == 2 * len(ids),
            "kill_interrupted_clients": sum(failures.values()) > 0,
            "all_delivered": counts["done"] == 2 * len(ids),
        }, observed={"client_failures": dict(failures), "events": stats.events,
                     "duplicates_answered": sum(1 for s in answered.values() if s == 200)}))


async def response_loss(directory: Path) -> Result:
    """The receiver reads each first request, records the effect, and closes unanswered."""
    async with drill(directory, [Target("lossy", "drop_first")]) as d:
        await post_events(d.service.base_url, [event_body(f"e{i}") for i in range(30)])
        counts = await wait_settled(d.store, 30)
        per_job = Counter(a.job_id for a in await d.store.list_attempts())
        return await _collect(d, Result(checks={
            "all_done": counts["done"] == 30,
            "one_effect_per_event": len(d.receiver.effects) == 30,
            "every_event_retried": len(per_job) == 30 and min(per_job.values()) >= 2,
        }, observed={"requests": len(d.receiver.requests), "effects": len(d.receiver.effects)}))


async def sigterm_during_slow_sends(directory: Path) -> Result:
    """SIGTERM while 4 sends outlast the grace period: exit in time, jobs handed back
    uncharged, delivered after a restart."""
    settings = {"HOOKLINE_LEASE_S": "10", "HOOKLINE_ATTEMPT_TIMEOUT_S": "6"}
    async with drill(directory, [Target("slow", "slow:3", max_in_flight=4)], workers=1,
                     settings=settings) as d:
        await post_events(d.service.base_url, [event_body(f"e{i}") for i in range(4)])
        await wait_for(lambda: d.receiver.in_flight("slow") == 4, 10, "4 requests in flight")
        t0 = time.monotonic()
        d.mark("SIGTERM supervisor")
        code = d.service.stop()
        stop_s = time.monotonic() - t0
        d.mark(f"supervisor exited {code}")
        after_stop = await d.store.list_jobs()
        counts = await _restart_and_settle(d, workers=1)
        return await _collect(d, Result(checks={
            "exit_0": code == 0,
            "within_grace_plus_margin": stop_s < 2 + 2 + 3,
            "handed_back_uncharged": all(j.status == "pending" and j.attempts == 0
                                         for j in after_stop),
            "delivered_after_restart": counts["done"] == 4,
        }, observed={"stop_s": round(stop_s, 2),
                     "after_stop": [(j.status, j.attempts) for j in after_stop]}))


async def poison_job(directory: Path) -> Result:
    """An event whose send kills its worker every time (the hooked service's workers,
    rehearsal/hooked_worker.py), among 20 good ones."""
    async with drill(directory, [Target("ok")], crash_event_type="drill.poison") as d:
        await post_events(d.service.base_url, [event_body("poison", "drill.poison")]
                          + [event_body(f"e{i}") for i in range(20)])
        counts = await wait_settled(d.store, 60)
        jobs = await d.store.list_jobs()
        poison = next(j for j in jobs if j.event_type == "drill.poison")
        crashes = sum(1 for e in d.service.log_events() if e.get("event") == "child_exited"
                      and e.get("signal") == "SIGKILL")
        return await _collect(d, Result(checks={
            "poison_dead_worker_lost": poison.status == "dead"
            and "worker lost" in (poison.last_error or ""),
            "charged_an_attempt_per_crash": poison.attempts == 5 and crashes == 5,
            "other_jobs_kept_flowing": counts["done"] == 20,
        }, observed={"poison": (poison.status, poison.attempts, poison.last_error),
                     "worker_crashes": crashes}))


def _hookline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=120,
                          check=False)


async def backup_under_load(directory: Path) -> Result:
    """Back up while clients keep posting; restore into a new folder; serve from it."""
    async with drill(directory, [Target("ok")]) as d:
        stop = asyncio.Event()

        async def load() -> None:
            n = 0
            while not stop.is_set():
                await post_events(d.service.base_url,
                                  [event_body(f"load{n + i}") for i in range(20)], 4)
                n += 20

        loader = asyncio.create_task(load())
        await wait_for(lambda: _events_at_least(d, 100), 20, "100 events")
        before = (await d.store.stats()).events
        d.mark(f"backup starts ({before} events stored)")
        taken = await asyncio.to_thread(_hookline, "--db", str(d.service.db), "backup",
                                        "--out", str(directory / "snapshots"))
        d.mark("backup done")
        stop.set()
        await loader
        [snapshot] = sorted((directory / "snapshots").glob("hookline-*.db"))
        verified = await asyncio.to_thread(_hookline, "backup", "verify", str(snapshot))
        restored = await asyncio.to_thread(_hookline, "restore", str(snapshot), "--into",
                                           str(directory / "restored"))
        d.mark("restored")
        manifest = json.loads(snapshot.with_suffix(".json").read_text())
        restored_db = directory / "restored" / "hookline.db"
        service = Service(restored_db, directory / "restored-service.log", workers=1,
                          settings=d.service.settings)
        await service.start()
        d.mark("serving from the restored copy")
        try:
            statuses = await post_events(service.base_url, [event_body("after-restore")])
            store = open_store(str(restored_db))
            await store.open()
            try:
                restored_events = (await store.stats()).events
            finally:
                await store.close()
        finally:
            service.stop()
        return await _collect(d, Result(checks={
            "backup_ok": taken.returncode == 0, "verify_ok": verified.returncode == 0,
            "restore_ok": restored.returncode == 0,
            "holds_everything_committed_before": manifest["tables"]["events"] >= before,
            "restored_copy_serves": statuses == Counter({202: 1})
            and restored_events == manifest["tables"]["events"] + 1,
        }, observed={"events_before_backup": before,
                     "events_in_snapshot": manifest["tables"]["events"],
                     "backup_stdout": taken.stdout.strip()[-300:]}))


async def _events_at_least(d: Drill, n: int) -> bool:
    return (await d.store.stats()).events >= n


async def backup_schedule(directory: Path) -> Result:
    """A finite schedule: 4 snapshots 0.2 s apart, the newest 2 kept, each verifiable."""
    async with drill(directory, [Target("ok")]) as d:
        await post_events(d.service.base_url, [event_body(f"e{i}") for i in range(10)])
        out = directory / "snapshots"
        run = await asyncio.to_thread(_hookline, "--db", str(d.service.db), "backup", "--out",
                                      str(out), "--every", "0.2", "--keep", "2", "--count", "4")
        kept = sorted(out.glob("hookline-*.db"))
        verified = [await asyncio.to_thread(_hookline, "backup", "verify", str(p))
                    for p in kept]
        return await _collect(d, Result(checks={
            "schedule_ok": run.returncode == 0,
            "two_kept": len(kept) == 2,
            "all_kept_verify": all(v.returncode == 0 for v in verified),
        }, observed={"kept": [p.name for p in kept], "stdout": run.stdout.strip()[-300:]}))


REJECTED_INPUTS: list[tuple[str, bytes, str, int]] = [
    ("empty", b"", "application/json", 400),
    ("not json", b"{nope", "application/json", 400),
    ("array", b"[1, 2]", "application/json", 400),
    ("deeply nested", b'{"id": "x", "type": "t", "data": ' + b"[" * 200 + b"]" * 200 + b"}",
     "application/json", 400),
    ("bad event type", b'{"id": "x1", "type": "a b\\r\\nX-Injected: 1", "data": 1}',
     "application/json", 400),
    ("dotted id", b'{"id": "a.b", "type": "t", "data": 1}', "application/json", 400),
    ("oversized", b'{"id": "big", "type": "t", "data": "' + b"x" * (2 * 1024 * 1024) + b'"}',
     "application/json", 413),
    ("wrong content type", b'{"id": "ct", "type": "t", "data": 1}', "text/plain", 415),
]


async def rejected_inputs(directory: Path) -> Result:
    """Each malformed input gets its 4xx; nothing is stored; the service keeps serving."""
    async with drill(directory, [Target("ok")]) as d:
        observed: dict[str, int] = {}
        async with aiohttp.ClientSession() as session:
            for name, body, content_type, _ in REJECTED_INPUTS:
                async with session.post(f"{d.service.base_url}/v1/events", data=body,
                                        headers={**INGEST_HEADERS,
                                                 "content-type": content_type}) as resp:
                    await resp.read()
                    observed[name] = resp.status
            stored_after_bad = (await d.store.stats()).events
            statuses = await post_events(d.service.base_url, [event_body("good")] * 2)
        return await _collect(d, Result(checks={
            "each_rejected_with_its_4xx": all(observed[n] == want
                                              for n, _, _, want in REJECTED_INPUTS),
            "nothing_stored": stored_after_bad == 0,
            "still_serving_and_deduping": statuses == Counter({202: 1, 200: 1}),
        }, observed={"statuses": observed}))


SCENARIOS = [
    Scenario("worker_killed_mid_send", "lease expires, another worker takes the job over, the "
             "receiver records exactly one effect", worker_killed_mid_send, quick=True),
    Scenario("stale_completion_fenced", "the late finish of a worker whose lease was taken "
             "over changes zero rows; the final state is the taker's", stale_completion_fenced,
             quick=True),
    Scenario("supervisor_killed", "children notice and exit; after a restart every accepted "
             "event is delivered", supervisor_killed),
    Scenario("ingest_killed_under_load", "every event answered 2xx is stored once with all its "
             "jobs; retries after the kill are deduplicated", ingest_killed_under_load),
    Scenario("response_loss", "one receiver effect per event, more than one attempt each",
             response_loss, quick=True),
    Scenario("sigterm_during_slow_sends", "exit 0 within the grace period; interrupted jobs "
             "handed back uncharged and delivered after restart", sigterm_during_slow_sends),
    Scenario("poison_job", "a job that crashes its worker on every send is charged an attempt "
             "per crash and ends dead with 'worker lost'; other jobs keep flowing", poison_job,
             quick=True),
    Scenario("backup_under_load", "a snapshot taken during writes holds everything committed "
             "before it, verifies, restores into a new folder and serves", backup_under_load,
             sqlite_only=True),
    Scenario("backup_schedule", "--every/--keep/--count takes 4 snapshots, keeps 2, all verify",
             backup_schedule, sqlite_only=True),
    Scenario("rejected_inputs", "each bad input gets its 4xx, nothing is stored, the service "
             "keeps serving", rejected_inputs, quick=True),
]

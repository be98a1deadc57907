"""The poison-job quarantine on real processes: `hookline serve` with three workers, a receiver
on 127.0.0.1, and events whose send SIGKILLs the worker (the rehearsal's hooked service,
rehearsal/hooked_serve.py) posted among a steady flow of healthy events.

A poison's first attempt is not known to be poison: it shares its worker with healthy jobs,
and those it kills are taken over like it (charged their lost attempt, sent again). Every
later attempt is a takeover, and a takeover is claimed alone and sent only once nothing else
of its worker is in flight or unwritten: its crash costs no healthy job anything.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

import aiohttp

from hookline.rehearsal.drill import Drill, Target, drill
from hookline.rehearsal.harness import INGEST_HEADERS, wait_settled
from hookline.shared.record_models import Attempt, Job

POISON = "drill.poison"
LEASE_S = 2.0
MAX_ATTEMPTS = 3
POISONS = 2
SETTINGS = {"HOOKLINE_LEASE_S": str(LEASE_S),
            "HOOKLINE_MAX_ATTEMPTS": str(MAX_ATTEMPTS), "HOOKLINE_ATTEMPT_TIMEOUT_S": "1.5",
            "HOOKLINE_POLL_INTERVAL_S": "0.2"}
LOST = ("lease expired (worker lost)", "worker lost")


async def post(session: aiohttp.ClientSession, base_url: str, event_id: str,
               event_type: str = "drill.event") -> str:
    """POST one event; returns its webhook-id."""
    body = json.dumps({"id": event_id, "type": event_type, "data": {"n": event_id}})
    async with session.post(f"{base_url}/v1/events", data=body, headers=INGEST_HEADERS) as resp:
        assert resp.status == 202, await resp.text()
        return str((await resp.json())["message_id"])


async def flow_with_poisons(d: Drill, poisons: int) -> int:
    """Healthy events at about 40/s; after 0.5 s, `poisons` poison events at once; the flow
    goes on until every poison is dead. Returns the number of healthy events posted."""
    accepted = 0
    async with aiohttp.ClientSession() as session:
        async def healthy(n: int) -> None:
            nonlocal accepted
            await post(session, d.service.base_url, f"ok-{n}")
            accepted += 1

        n = 0
        started = time.monotonic()
        posted_poisons = False
        while True:
            await asyncio.gather(healthy(n), healthy(n + 1))
            n += 2
            if not posted_poisons and time.monotonic() - started > 0.5:
                await asyncio.gather(*(post(session, d.service.base_url, f"poison-{p}", POISON)
                                       for p in range(poisons)))
                posted_poisons = True
            if posted_poisons:
                dead = await d.store.list_jobs(status="dead")
                if sum(j.event_type == POISON for j in dead) == poisons:
                    break
            assert time.monotonic() - started < 60, "the poison jobs did not end dead"
            await asyncio.sleep(0.05)
    return accepted


def done_after_s(job: Job) -> float:
    """Seconds from a job's creation (its event accepted) to its end, as stored."""
    assert job.finished_at is not None
    return job.finished_at - job.created_at


def first_crash_collateral(poison_jobs: list[Job], attempts: list[Attempt]) -> set[int]:
    """Healthy jobs whose first attempt was lost with a poison's FIRST attempt (on the same
    worker, before anything knew it was poison): the only healthy jobs a crash may cost."""
    first_crashed = {a.worker for a in attempts
                     if a.job_id in {j.id for j in poison_jobs} and a.attempt == 1}
    poison_ids = {j.id for j in poison_jobs}
    return {a.job_id for a in attempts
            if a.job_id not in poison_ids and a.attempt == 1 and a.worker in first_crashed
            and (a.error or "").startswith(LOST)}


async def test_poison_jobs_among_a_steady_flow_cost_healthy_jobs_nothing(tmp_path: Path):
    """Two poison events at once among ~40 healthy events/s, three workers, lease 2 s,
    max_attempts 3 (one test, not two: a poison's life is three leases). Each poison is
    charged 3 attempts and ends dead "worker lost"; each of its takeovers killed a worker
    that held nothing else (so the two went one at a time); no healthy job is sent twice
    (requests per webhook-id at the receiver), charged more than one attempt, or done later
    than one lease after it was accepted (its stored created_at -> finished_at), except those
    lost with a poison's first attempt (charged that attempt, sent at most twice, done
    within two leases)."""
    async with drill(tmp_path, [Target("ok", "slow:0.05", max_in_flight=30)], workers=3,
                     settings=SETTINGS, crash_event_type=POISON) as d:
        accepted = await flow_with_poisons(d, POISONS)
        counts = await wait_settled(d.store, 30)
        jobs = await d.store.list_jobs(limit=100_000)
        attempts = await d.store.list_attempts(limit=100_000)
        requests = d.receiver.requests
    poison_jobs = [j for j in jobs if j.event_type == POISON]
    healthy = [j for j in jobs if j.event_type != POISON]
    assert len(healthy) == accepted and counts["done"] == len(healthy)
    assert [(j.status, j.attempts) for j in poison_jobs] == [("dead", MAX_ATTEMPTS)] * POISONS
    assert all("worker lost" in (j.last_error or "") for j in poison_jobs)

    # Each takeover of a poison (attempt 2 and later) killed a worker that held nothing else:
    # the only attempt that worker lost is the poison's.
    poison_ids = {j.id for j in poison_jobs}
    for takeover in [a for a in attempts if a.job_id in poison_ids and a.attempt > 1]:
        lost_with_it = [(a.job_id, a.attempt) for a in attempts
                        if a.worker == takeover.worker and (a.error or "").startswith(LOST)]
        assert lost_with_it == [(takeover.job_id, takeover.attempt)], lost_with_it

    sent = Counter(r.webhook_id for r in requests)
    collateral = first_crash_collateral(poison_jobs, attempts)
    hurt = {j.id: (j.attempts, sent[j.message_id], round(done_after_s(j), 3))
            for j in healthy if j.id not in collateral and (
                j.attempts != 1 or sent[j.message_id] != 1 or done_after_s(j) >= LEASE_S)}
    assert hurt == {}, f"healthy jobs (attempts, requests, delay s) hurt by a takeover: {hurt}"
    by_id = {j.id: j for j in healthy}
    assert all(by_id[c].attempts == 2 and sent[by_id[c].message_id] <= 2
               and done_after_s(by_id[c]) < 2 * LEASE_S for c in collateral)

"""Real worker OS processes against one SQLite file and the receiver fixture on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter

from procs import start_worker, stop

from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event


async def settle(store: SqliteStore, timeout_s: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        counts = (await store.stats()).jobs_by_status
        if counts["pending"] == counts["running"] == 0:
            return counts
        await asyncio.sleep(0.1)
    raise AssertionError(f"jobs did not settle: {counts}")


async def test_two_worker_processes_never_run_a_job_twice(tmp_path):
    """Two worker processes racing for 300 jobs: every job is sent exactly once (no claim
    is granted twice), all end done, and each attempt row matches one receiver request."""
    db = str(tmp_path / "race.db")
    secret = generate_secret()
    config = Config(db=db, allow_networks="127.0.0.0/8", lease_s=10, attempt_timeout_s=5,
                    poll_interval_s=0.2, claim_batch=4, worker_concurrency=8)
    slow = parse_behaviour("slow:0.01")  # so one worker's 8 slots cannot take everything
    async with SqliteStore(db) as store, Receiver([Endpoint("ok", secret, slow)]) as receiver:
        for name in ("a", "b", "c"):
            await store.add_destination(name=name, url=receiver.url("ok"), secret=secret,
                                        event_types=["*"], max_in_flight=50)
        workers = [start_worker(config, f"worker-{n}", tmp_path / f"w{n}.log") for n in (1, 2)]
        try:
            for n in (1, 2):
                while "worker_started" not in (tmp_path / f"w{n}.log").read_text():
                    await asyncio.sleep(0.02)
            await store.add_events([new_event(f"e{i}") for i in range(100)])
            counts = await settle(store, 60)
        finally:
            codes = [stop(w) for w in workers]
        attempts = await store.list_attempts()
    assert codes == [0, 0]
    assert counts["done"] == 300
    assert len(attempts) == 300 == len(receiver.requests)
    owners = Counter(a.worker.split("@")[0] for a in attempts)
    assert set(owners) == {"worker-1", "worker-2"}, owners  # both really competed
    # Each (destination, message) was requested once: no job ran twice.
    per_job = Counter(a.job_id for a in attempts)
    assert set(per_job.values()) == {1}


async def test_sigkill_mid_send_is_taken_over_after_lease_expiry(tmp_path):
    """A worker SIGKILLed while its request is in flight: once its lease expires the other
    worker takes the job over (new token, attempt 2), the first attempt is recorded as lost,
    and the receiver, deduping by webhook-id, records one effect."""
    db = str(tmp_path / "kill.db")
    secret = generate_secret()
    config = Config(db=db, allow_networks="127.0.0.0/8", lease_s=1.5, attempt_timeout_s=1.2,
                    poll_interval_s=0.2)
    async with SqliteStore(db) as store, \
            Receiver([Endpoint("slow", secret, parse_behaviour("slow:0.8"))]) as receiver:
        await store.add_destination(name="slow", url=receiver.url("slow"), secret=secret,
                                    event_types=["*"], max_in_flight=1)
        workers = {n: start_worker(config, f"worker-{n}", tmp_path / f"w{n}.log") for n in (1, 2)}
        try:
            await store.add_events([new_event("e1")])
            while receiver.in_flight("slow") == 0:
                await asyncio.sleep(0.01)
            [job] = await store.list_jobs()
            victim_pid = int(job.lease_owner.rsplit(":", 1)[1])
            os.kill(victim_pid, signal.SIGKILL)
            counts = await settle(store, 20)
        finally:
            for w in workers.values():
                if w.pid != victim_pid:
                    assert stop(w) == 0
                else:
                    w.wait()
        [job] = await store.list_jobs()
        attempts = await store.list_attempts(job.id)
    assert counts["done"] == 1 and job.attempts == 2
    assert attempts[0].error == "lease expired (worker lost)"
    assert str(victim_pid) in attempts[0].worker and str(victim_pid) not in attempts[1].worker
    assert attempts[1].status_code == 200
    assert len(receiver.effects) == 1 and len(receiver.requests) == 2
    taker_log = [json.loads(line) for w in (1, 2)
                 for line in (tmp_path / f"w{w}.log").read_text().splitlines()
                 if line.startswith("{")]
    assert any(e["event"] == "job_taken_over" for e in taker_log)

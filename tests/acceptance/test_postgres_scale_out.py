"""Scale-out on PostgreSQL: two `hookline serve` supervisors (as two hosts), one database."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from collections import defaultdict

import aiohttp
from procs import AUTH, pid_alive, start_cli, stop

from hookline.rehearsal.harness import children_of, free_port
from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.signing import generate_secret
from hookline.shared.store.postgres import PostgresStore
from tests.conftest import new_event

# x 2 destinations = 500 jobs, plus the kill drill's one (was 1000): the host is killed as
# soon as they are added, so these jobs are the backlog the survivor delivers, whether the
# dead host's leases (6 s) held every slot of a and b until they expired or not; how many
# there are matters to no assertion, only to how long delivering them takes.
EVENTS = 250
HTTP_EVENTS = 20  # per host, through its ingest: 80 more jobs


async def _wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.1)


async def test_two_supervisors_share_one_postgres(pg_url, tmp_path):
    """Two supervisors with two workers each deliver 500 jobs (plus events posted to each
    host's ingest): every job ends done, no job
    has two attempts running at once, each destination's max_in_flight holds across both
    hosts, both hosts' workers deliver, and SIGKILLing one supervisor with its workers
    mid-send leads to takeover of its leased jobs by the other's workers."""
    url = pg_url
    secret = generate_secret()
    env = {"HOOKLINE_LEASE_S": "6", "HOOKLINE_ATTEMPT_TIMEOUT_S": "5",
           "HOOKLINE_POLL_INTERVAL_S": "0.5", "HOOKLINE_WORKER_CONCURRENCY": "16",
           "HOOKLINE_CLAIM_BATCH": "8", "HOOKLINE_RETRY_BASE_S": "0.2",
           "HOOKLINE_RETRY_CAP_S": "0.5", "HOOKLINE_LOG_LEVEL": "warning"}
    endpoints = [Endpoint("a", secret, parse_behaviour("slow:0.005")),
                 Endpoint("b", secret, parse_behaviour("ok")),
                 Endpoint("k", secret, parse_behaviour("slow_first:30"))]
    async with PostgresStore(url) as store, Receiver(endpoints) as receiver:
        for name, types, limit in (("a", "all", 3), ("b", "all", 5), ("k", "drill", 1)):
            await store.add_destination(name=name, url=receiver.url(name), secret=secret,
                                        event_types=[types], max_in_flight=limit)
        ports = [free_port(), free_port()]
        # Each host has its own runtime folder and pid file, as separate machines would:
        # one runtime folder holds one supervisor.
        hosts = [start_cli(["serve", "--db", url, "--workers", "2", "--listen",
                            f"127.0.0.1:{port}"], tmp_path / f"host{n}.log",
                           {**env, "HOOKLINE_RUNTIME_DIR": str(tmp_path / f"host{n}.run"),
                            "HOOKLINE_PID_FILE": str(tmp_path / f"host{n}.pid")})
                 for n, port in enumerate(ports, 1)]
        try:
            # Each host's ingest accepts events into the shared database (and NOTIFYs).
            async with aiohttp.ClientSession() as http:
                for port in ports:
                    async def ingest_up(port: int = port) -> bool:
                        try:
                            async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
                                return r.status == 200
                        except aiohttp.ClientError:
                            return False
                    await _wait(ingest_up, 30, f"ingest on port {port}")
                    for i in range(HTTP_EVENTS):
                        async with http.post(f"http://127.0.0.1:{port}/v1/events", json={
                                "id": f"h{port}-{i}", "type": "all", "data": {"i": i}},
                                headers=AUTH) as r:
                            assert r.status == 202, await r.text()
            # Work arrives while both hosts run; the drill job is held by its receiver.
            await store.add_events([new_event("drill", "drill")])
            for start in range(0, EVENTS, 250):
                await store.add_events([new_event(f"e{i}", "all")
                                        for i in range(start, start + 250)])

            async def drill_in_flight() -> bool:
                return receiver.in_flight("k") > 0
            await _wait(drill_in_flight, 30, "the drill job to be in flight")
            [drill] = [j for j in await store.list_jobs(limit=10_000)
                       if j.destination == "k"]
            victim_pid = int(drill.lease_owner.rsplit(":", 1)[1])
            victim_host = next(h for h in hosts if victim_pid in children_of(h.pid))
            survivor = next(h for h in hosts if h is not victim_host)
            # Kill the whole host: supervisor first (no respawn), then its children.
            doomed = children_of(victim_host.pid)
            victim_host.send_signal(signal.SIGKILL)
            victim_host.wait()
            for pid in doomed:
                if pid_alive(pid):
                    os.kill(pid, signal.SIGKILL)

            async def settled() -> bool:
                counts = (await store.stats()).jobs_by_status
                return counts["pending"] == counts["running"] == 0
            await _wait(settled, 120, "every job to finish")
            counts = (await store.stats()).jobs_by_status
            survivor_workers = set(children_of(survivor.pid))
            attempts = await store.list_attempts(limit=100_000)
            jobs = await store.list_jobs(limit=100_000)
        finally:
            codes = [stop(h) for h in hosts if h.poll() is None]
    assert codes == [0]
    total = 2 * (EVENTS + 2 * HTTP_EVENTS) + 1
    assert counts == {"pending": 0, "running": 0, "done": total, "dead": 0}
    assert receiver.max_concurrent("a") <= 3 and receiver.max_concurrent("b") <= 5
    # (k is not checked: the killed worker's request is still held open by the receiver when
    # the takeover is sent, as with any lease expiry; its lease no longer counted.)
    # No job ever had two attempts running at once: each attempt started after the
    # previous one of its job ended (or was lost with its worker).
    by_job = defaultdict(list)
    for a in attempts:
        by_job[a.job_id].append(a)
    for job_attempts in by_job.values():
        for earlier, later in itertools.pairwise(job_attempts):
            if earlier.duration_s is not None:
                assert earlier.started_at + earlier.duration_s <= later.started_at + 0.05
    assert len(by_job) == len(jobs)
    assert len(receiver.requests) <= len(attempts)
    # Both hosts' workers delivered.
    pids = {int(a.worker.rsplit(":", 1)[1]) for a in attempts}
    assert len(pids) >= 3, pids
    # The drill job: lost with the killed host, taken over by the surviving host's worker.
    first, second = by_job[drill.id][:2]
    assert first.error == "lease expired (worker lost)"
    assert int(first.worker.rsplit(":", 1)[1]) == victim_pid
    taker = int(second.worker.rsplit(":", 1)[1])
    assert taker in survivor_workers
    assert second.status_code == 200


def test_rehearsal_runs_on_postgres(pg_server, tmp_path):
    """`hookline --db postgresql://… rehearse` runs its drills on fresh databases on that
    server and passes (the stale-completion drill here; all seven pass by hand)."""
    out = tmp_path / "rehearsal"
    proc = start_cli(["--db", pg_server.url(), "rehearse", "--out", str(out),
                      "--only", "stale_completion_fenced"], tmp_path / "rehearse.log")
    assert proc.wait(timeout=120) == 0, (tmp_path / "rehearse.log").read_text()[-3000:]
    log = (tmp_path / "rehearse.log").read_text()
    assert "1 passed, 0 failed" in log
    assert not list(out.rglob("drill.db*"))  # no SQLite file: the drills ran on PostgreSQL

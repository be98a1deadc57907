"""Operator controls on real processes: max_in_flight across 3 worker processes, and the
`hookline` operator commands' output and exit codes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from procs import ROOT, child_env, start_worker, stop

from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.store.wakeup import wake_dir_for
from tests.conftest import new_event


def _poke_every_worker(db: str) -> None:
    """Send a wake-up datagram to every worker listening on `db` (shared/store/wakeup.py)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        for path in wake_dir_for(db).glob("*.sock"):
            with contextlib.suppress(OSError):
                sock.sendto(b"\x00", str(path))


async def test_max_in_flight_one_holds_with_three_worker_processes(tmp_path):
    """Three worker processes share a destination limited to 1 in flight: the receiver
    never sees two concurrent requests, every job is delivered, and the workers competed."""
    db = str(tmp_path / "mif.db")
    secret = generate_secret()
    config = Config(db=db, allow_networks="127.0.0.0/8", lease_s=10, attempt_timeout_s=5,
                    poll_interval_s=0.05, claim_batch=4, worker_concurrency=8)
    slow = parse_behaviour("slow:0.03")  # each request overlaps the others' claim attempts
    async with SqliteStore(db) as store, Receiver([Endpoint("one", secret, slow)]) as receiver:
        await store.add_destination(name="one", url=receiver.url("one"), secret=secret,
                                    event_types=["*"], max_in_flight=1)
        logs = [tmp_path / f"w{n}.log" for n in (1, 2, 3)]
        workers = [start_worker(config, f"worker-{n}", log) for n, log in zip((1, 2, 3), logs,
                                                                             strict=True)]
        try:
            deadline = time.monotonic() + 30
            while not all(log.exists() and "worker_started" in log.read_text() for log in logs):
                assert time.monotonic() < deadline, "workers did not start"
                await asyncio.sleep(0.05)
            # Batches: after each, all three workers are woken at once, so they race for the
            # slot (a worker that just finished would otherwise win every time). On SQLite a
            # commit wakes one worker, which would win every race: this store's commits wake
            # nobody, and the test pokes all three at once instead.
            assert store._notifier is not None
            store._notifier.close()
            store._notifier = None
            for batch in range(8):
                await store.add_events([new_event(f"e{batch}-{i}") for i in range(5)])
                _poke_every_worker(db)
                while (await store.stats()).jobs_by_status["done"] < 5 * (batch + 1):
                    assert time.monotonic() < deadline + 30, "jobs were not delivered"
                    await asyncio.sleep(0.05)
        finally:
            codes = [stop(w) for w in workers]
        attempts = await store.list_attempts()
    assert codes == [0, 0, 0]
    assert receiver.max_concurrent("one") == 1
    assert len(receiver.effects) == 40 == len(receiver.requests) == len(attempts)
    owners = Counter(a.worker.split("@")[0] for a in attempts)
    assert len(owners) >= 2, owners  # more than one process really took part


def hookline(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", "--db", db, *args],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT,
                          timeout=60, check=False)


async def test_operator_cli_outputs_and_exit_codes(tmp_path: Path):
    """pause/resume/dead/replay/job/destinations show/update/purge print JSON on stdout
    with --json (logs go to stderr), exit 0 on success, 1 when something is not found or
    cannot be done, and 2 on bad usage."""
    db = str(tmp_path / "cli.db")
    secret = generate_secret()
    async with SqliteStore(db) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/x", secret=secret,
                                    event_types=["*"], max_in_flight=1)
        await store.add_events([new_event("e1")])
        (claim,) = await store.claim("w", 1, 30.0, 3)
        await store.finish([(claim, Dead(error="HTTP 410"),
                             AttemptResult(started_at=time.time(), duration_s=0.1,
                                           status_code=410))])

    out = hookline(db, "pause", "d", "--reason", "maint", "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == {"paused": "d", "reason": "maint"}
    assert "destination_paused" in out.stderr
    shown = hookline(db, "destinations", "show", "d", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["paused"] is True
    assert secret not in shown.stdout
    assert hookline(db, "resume", "d").returncode == 0
    assert hookline(db, "pause", "nope").returncode == 1

    dead = hookline(db, "dead", "--json")
    assert dead.returncode == 0
    assert [(j["id"], j["last_error"]) for j in json.loads(dead.stdout)] == [
        (claim.job_id, "HTTP 410")]
    dry = hookline(db, "replay", "--all-dead", "--since", "1h", "--dry-run", "--json")
    assert dry.returncode == 0 and json.loads(dry.stdout) == {"count": 1, "dry_run": True}
    assert hookline(db, "replay", "--all-dead", "--since", "yesterday-ish").returncode == 2
    assert hookline(db, "replay").returncode == 2
    assert hookline(db, "replay", "--job", "999").returncode == 1
    done = hookline(db, "replay", "--job", str(claim.job_id), "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"count": 1, "dry_run": False}
    again = hookline(db, "replay", "--job", str(claim.job_id))
    assert again.returncode == 1 and "not dead" in again.stderr

    story = hookline(db, "job", str(claim.job_id), "--json")
    assert story.returncode == 0
    assert json.loads(story.stdout)["replays"] == 1
    assert "HTTP 410" not in hookline(db, "job", str(claim.job_id)).stderr
    assert hookline(db, "job", "12345").returncode == 1

    assert hookline(db, "destinations", "update", "d", "--max-in-flight", "0").returncode == 2
    assert hookline(db, "destinations", "update", "d", "--set", "nope=1").returncode == 2
    assert hookline(db, "destinations", "update", "d", "--max-in-flight", "3").returncode == 0
    assert hookline(db, "purge", "--bodies-older-than", "40d").returncode == 2
    purged = hookline(db, "purge", "--json")
    assert purged.returncode == 0 and json.loads(purged.stdout)["bodies"] == 0
    stats = hookline(db, "stats", "--json")
    assert json.loads(stats.stdout)["jobs_by_destination"] == {"d": {"pending": 1}}
    assert hookline(db, "destinations", "remove", "d").returncode == 0
    assert hookline(db, "destinations", "remove", "d").returncode == 1

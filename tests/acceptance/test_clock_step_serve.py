"""A real `hookline serve` (SQLite) whose host clock is stepped +1 h and then -1 h while jobs
are in flight to a slow receiver and retries are scheduled.

The wall clock is stepped with libfaketime (Debian package `faketime`, installed by `make
test`): every process (the supervisor, its children, the CLI, the receiver) preloads it and
reads its offset from one file the test rewrites; the monotonic clock stays real
(FAKETIME_DONT_FAKE_MONOTONIC), as a real step leaves it. Expected: the supervisor aborts no
child, no job is marked dead "worker lost", no job is sent twice, a retry scheduled before
the step back is not stalled by it, and every process logs `clock_step`.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from procs import AUTH, JSON_AUTH, ROOT, child_env, log_records, start_cli, stop, wait_until

from rehearsal.harness import free_port
from tests.pg import skip_or_fail_in_ci

SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"
HEARTBEAT_TIMEOUT_S = 5.0
SLOW_S = 3.0

# libfaketime 0.9.10 fails clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), i.e. Python's
# time.sleep, with EINVAL when the monotonic clock is left real; sleep with select instead.
SITECUSTOMIZE = """
import select, time
def _sleep(seconds):
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)
time.sleep = _sleep
"""


def libfaketime() -> str:
    """The path of libfaketime.so.1; skips (fails under CI) when it is not installed."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        skip_or_fail_in_ci("libfaketime is not installed (apt-get install faketime; "
                           "`make test` does it as root)")
    return found[0]


class SteppedHost:
    """A receiver and `hookline serve` sharing one fake wall clock the test can step."""

    def __init__(self, tmp: Path) -> None:
        self.offset_file = tmp / "faketime"
        self.step_to("+0")
        shim = tmp / "shim"
        shim.mkdir()
        (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
        base = child_env()
        self.env = {
            **base, "LD_PRELOAD": libfaketime(), "FAKETIME_TIMESTAMP_FILE": str(self.offset_file),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_CACHE_DURATION": "0",
            "FAKETIME_NO_CACHE": "1",
            "PYTHONPATH": str(shim) + os.pathsep + base["PYTHONPATH"],
            "HOOKLINE_DB": str(tmp / "svc.db"),
            "HOOKLINE_HEARTBEAT_TIMEOUT_S": str(HEARTBEAT_TIMEOUT_S),
            "HOOKLINE_LEASE_S": "8", "HOOKLINE_ATTEMPT_TIMEOUT_S": "6",
            "HOOKLINE_RETRY_BASE_S": "4", "HOOKLINE_MAX_ATTEMPTS": "3",
        }
        self.requests_log = tmp / "requests.jsonl"
        rport = free_port()
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "rehearsal.receiver", "--listen", f"127.0.0.1:{rport}",
             "--endpoint", f"slow={SECRET}:slow:{SLOW_S}", "--endpoint", f"flaky={SECRET}:fail:1",
             "--log", str(self.requests_log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env, cwd=ROOT)
        assert self.cli("init").returncode == 0
        for name in ("slow", "flaky"):
            added = self.cli("destinations", "add", name, f"http://127.0.0.1:{rport}/{name}",
                             "--secret", SECRET)
            assert added.returncode == 0, added.stderr
        self.port = free_port()
        self.out = tmp / "serve.out"
        self.proc = start_cli(["serve", "--workers", "2", "--listen", f"127.0.0.1:{self.port}"],
                              self.out, env=self.env)

    def step_to(self, offset: str) -> None:
        """Set every process's wall clock to the real one plus `offset` (e.g. `+1h`)."""
        tmp = self.offset_file.with_suffix(".tmp")
        tmp.write_text(offset + "\n")
        os.replace(tmp, self.offset_file)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `hookline ARGS` on the same database and clock."""
        return subprocess.run([sys.executable, "-m", "supervisor.cli", *args],
                              capture_output=True, text=True, env=self.env, cwd=ROOT, timeout=60,
                              check=False)

    def log(self, event: str, **match: Any) -> list[dict[str, Any]]:
        """The service's log lines with event `event` and the given field values."""
        return log_records(self.out, event, **match)

    def post_events(self, prefix: str, count: int) -> None:
        """Accept `count` events (each fans out to both destinations)."""
        for n in range(count):
            body = json.dumps({"id": f"{prefix}-{n}", "type": "push", "data": {}}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/events",
                                             data=body, headers=JSON_AUTH)
            with urllib.request.urlopen(request, timeout=10) as resp:
                assert resp.status in (200, 202)

    def metrics(self) -> str:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/metrics", headers=AUTH)
        with urllib.request.urlopen(request, timeout=10) as resp:
            return str(resp.read().decode())

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def requests(self) -> list[dict[str, Any]]:
        """The receiver's request records (one per request it answered)."""
        if not self.requests_log.exists():
            return []
        lines = self.requests_log.read_text().splitlines()
        return [r for r in (json.loads(line) for line in lines if line.strip())
                if r["record"] == "request"]

    def jobs(self) -> list[dict[str, Any]]:
        listed = self.cli("jobs", "--json", "--limit", "1000")
        assert listed.returncode == 0, listed.stderr
        return list(json.loads(listed.stdout))

    def close(self) -> None:
        if self.proc.poll() is None:
            stop(self.proc)
        self.receiver.terminate()
        self.receiver.wait(10)


@pytest.fixture
def host(tmp_path: Path) -> Any:
    stepped = SteppedHost(tmp_path)
    yield stepped
    stepped.close()


def test_serve_rides_out_a_forward_and_a_backward_clock_step(host: SteppedHost) -> None:
    """+1 h with slow sends in flight, then -1 h with retries scheduled: nothing is aborted,
    lost, sent twice or stalled."""
    wait_until(host.ready, 30, "/readyz to answer 200")
    host.post_events("a", 6)
    wait_until(lambda: _slow_in_flight(host), 20, "slow sends in flight")
    host.step_to("+1h")
    time.sleep(HEARTBEAT_TIMEOUT_S + 3)  # long enough for a stale heartbeat to be judged
    host.post_events("b", 6)
    # The flaky destination fails each first attempt: wait until its retries are scheduled
    # (about 2-4 s ahead), then step back two hours to one hour behind.
    wait_until(lambda: len(host.log("job_retry_scheduled")) >= 12, 30, "retries scheduled")
    host.step_to("-1h")
    stepped_back_at = time.monotonic()
    all_done = _eventually(lambda: _all_done(host), 60)
    done_after_s = time.monotonic() - stepped_back_at

    kills = host.log("child_hung")
    lost = [j for j in host.jobs() if "worker lost" in str(j.get("last_error"))]
    sends = Counter((r["endpoint"], r["webhook_id"]) for r in host.requests()
                    if r["endpoint"] == "slow")
    print(f"clock-step figures: supervisor kills={len(kills)}, worker-lost jobs={len(lost)}, "
          f"max sends per slow job={max(sends.values(), default=0)}, all done={all_done} "
          f"{done_after_s:.1f} s after the step back")
    assert kills == []
    assert lost == []
    assert len(sends) == 12 and set(sends.values()) == {1}, sends
    # Retries were due 2-4 s after they were scheduled; 60 s is generous, far below the hour.
    assert all_done, "jobs stalled by the step back"
    steps = [(r["process"], r["step_s"]) for r in host.log("clock_step")]
    processes = {p for p, _ in steps}
    assert {"supervisor", "ingest", "worker-1", "worker-2"} <= processes, steps
    assert all(abs(s - 3600) < 5 or abs(s + 7200) < 5 for _, s in steps), steps
    # /metrics counts the supervisor's steps (its snapshot is written every 2 s).
    supervisor_steps = len([p for p, _ in steps if p == "supervisor"])
    assert supervisor_steps == 2, steps
    wait_until(lambda: f"hookline_clock_steps_total {supervisor_steps}.0" in host.metrics(), 10,
               "hookline_clock_steps_total in /metrics")


def _eventually(predicate: Any, timeout_s: float) -> bool:
    """Poll `predicate` every 0.2 s; True once it holds, False after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _slow_in_flight(host: SteppedHost) -> bool:
    return any(j["status"] == "running" for j in host.jobs() if j.get("destination") == "slow")


def _all_done(host: SteppedHost) -> bool:
    jobs = host.jobs()
    return len(jobs) == 24 and all(j["status"] == "done" for j in jobs)

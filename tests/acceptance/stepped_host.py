"""A real `hookline serve` (SQLite) and receiver whose wall clock a test can step.

The wall clock is stepped with libfaketime (Debian package `faketime`, installed by `make
test`): every process (the supervisor, its children, the CLI, the receiver) preloads it and
reads its offset from one file the test rewrites; the monotonic clock stays real
(FAKETIME_DONT_FAKE_MONOTONIC), as a real step leaves it.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from procs import AUTH, JSON_AUTH, ROOT, child_env, log_records, start_cli, stop, wait_until

from hookline.rehearsal.harness import free_port
from tests.pg import skip_or_fail_in_ci

SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"

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
    """A receiver and `hookline serve` sharing one fake wall clock the test can step.

    Args:
        tmp: a folder for the database, logs and the clock's offset file.
        endpoints: receiver endpoint name -> behaviour (`hookline.rehearsal.receiver`); each becomes
            a destination of the same name.
        settings: HOOKLINE_* settings of every hookline process (the CLI's too).
    """

    def __init__(self, tmp: Path, endpoints: Mapping[str, str],
                 settings: Mapping[str, str]) -> None:
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
            "HOOKLINE_DB": str(tmp / "svc.db"), **settings,
        }
        self.requests_log = tmp / "requests.jsonl"
        rport = free_port()
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "hookline.rehearsal.receiver", "--listen", f"127.0.0.1:{rport}",
             *(arg for name, behaviour in endpoints.items()
               for arg in ("--endpoint", f"{name}={SECRET}:{behaviour}")),
             "--log", str(self.requests_log),
             # A real receiver's clock does not step with the sender's. This one shares the
             # fake clock, so a request in flight across a step (signed just before it)
             # would arrive 1-2 h "too old" and be refused (401, permanent): the test would
             # see the step's effect on the receiver, not on hookline.
             "--timestamp-tolerance-s", str(3 * 3600)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env, cwd=ROOT)
        assert self.cli("init").returncode == 0
        for name in endpoints:
            added = self.cli("destinations", "add", name, f"http://127.0.0.1:{rport}/{name}",
                             "--secret", SECRET)
            assert added.returncode == 0, added.stderr
        self.port = free_port()
        self.out = tmp / "serve.out"
        self.proc = self._serve()

    def _serve(self) -> subprocess.Popen[bytes]:
        return start_cli(["serve", "--workers", "2", "--listen", f"127.0.0.1:{self.port}"],
                         self.out, env=self.env)

    def restart(self) -> None:
        """Stop `hookline serve` (SIGTERM, graceful) and start it again; returns once the
        new one answers /readyz."""
        assert stop(self.proc) == 0
        self.proc = self._serve()
        wait_until(self.ready, 30, "/readyz to answer 200 after the restart")

    def step_to(self, offset: str) -> None:
        """Set every process's wall clock to the real one plus `offset` (e.g. `+1h`)."""
        tmp = self.offset_file.with_suffix(".tmp")
        tmp.write_text(offset + "\n")
        os.replace(tmp, self.offset_file)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `hookline ARGS` on the same database and clock."""
        return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                              capture_output=True, text=True, env=self.env, cwd=ROOT, timeout=60,
                              check=False)

    def cli_json(self, *args: str) -> Any:
        """`hookline ARGS --json`: its output (exit code 0)."""
        done = self.cli(*args, "--json")
        assert done.returncode == 0, (args, done.stderr)
        return json.loads(done.stdout)

    def log(self, event: str, **match: Any) -> list[dict[str, Any]]:
        """The service's log lines with event `event` and the given field values."""
        return log_records(self.out, event, **match)

    def post_event(self, event_id: str) -> tuple[int, dict[str, Any]]:
        """POST one event (it fans out to every destination): the status and JSON answer."""
        body = json.dumps({"id": event_id, "type": "push", "data": {}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/events",
                                         data=body, headers=JSON_AUTH)
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def post_events(self, prefix: str, count: int) -> None:
        """Accept `count` events (each fans out to every destination)."""
        for n in range(count):
            status, answer = self.post_event(f"{prefix}-{n}")
            assert status in (200, 202), answer

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
        listed = self.cli_json("jobs", "--limit", "1000")
        return list(listed)

    def close(self) -> None:
        if self.proc.poll() is None:
            stop(self.proc)
        self.receiver.terminate()
        self.receiver.wait(10)


def eventually(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `predicate` every 0.2 s; True once it holds, False after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True

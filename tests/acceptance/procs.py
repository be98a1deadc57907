"""Helpers for tests that run hookline's real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hookline.shared.config import Config

ROOT = Path(__file__).resolve().parents[2]


# Services under test take this one token for both ingest and the admin API, and may deliver
# to loopback (the SSRF guard refuses it by default).
TEST_TOKEN = "acceptance-test-token"
AUTH = {"authorization": f"Bearer {TEST_TOKEN}"}
JSON_AUTH = {"content-type": "application/json", **AUTH}
TEST_SETTINGS = {"HOOKLINE_INGEST_TOKEN": TEST_TOKEN, "HOOKLINE_ADMIN_TOKEN": TEST_TOKEN,
                 "HOOKLINE_ALLOW_NETWORKS": "127.0.0.0/8"}


def child_env() -> dict[str, str]:
    """The environment for a child: this checkout importable, TEST_SETTINGS, and no other
    HOOKLINE_* leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return {**env, **TEST_SETTINGS}


def start_worker(config: Config, slot: str, log_path: Path) -> subprocess.Popen[bytes]:
    """Start `python -m hookline.workers` as a real OS process, logging to `log_path`."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "hookline.workers", "--config-json", config.to_json(), "--slot",
             slot],
            stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT)


def start_cli(args: list[str], log_path: Path, env: dict[str, str] | None = None,
              cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    """Start `hookline ARGS` (the real CLI, as the installed `hookline` script runs it) as a
    process in `cwd`. A service on PostgreSQL gets a runtime folder and pid file of its own
    beside `log_path` unless the test names them (see _own_runtime_paths)."""
    full = {**child_env(), **(env or {})}
    full = {**_own_runtime_paths(args, full, log_path), **full}
    with log_path.open("ab") as log:
        return subprocess.Popen([sys.executable, "-P", "-m", "hookline.supervisor.cli", *args],
                                stdout=log, stderr=subprocess.STDOUT, env=full, cwd=cwd)


def _own_runtime_paths(args: list[str], env: dict[str, str], log_path: Path
                       ) -> dict[str, str]:
    """A server database has no folder, so `hookline serve` on PostgreSQL defaults its runtime
    folder and pid file to ./hookline.run and ./hookline.pid in its working directory (the
    repository, for every test): two tests' services on the two xdist workers would share
    them, and the second is refused ("another hookline serve already runs on runtime folder
    hookline.run"). For such a service, paths beside its log; nothing for a SQLite one
    (its defaults lie beside its own database)."""
    given = args[args.index("--db") + 1] if "--db" in args[:-1] else env.get("HOOKLINE_DB", "")
    if not given.startswith(("postgresql://", "postgres://")):
        return {}
    return {"HOOKLINE_RUNTIME_DIR": f"{log_path}.run", "HOOKLINE_PID_FILE": f"{log_path}.pid"}


def run_cli(*args: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()
            ) -> subprocess.CompletedProcess[str]:
    """Run `hookline ARGS` to completion with child_env() plus `env`; `drop` removes
    variables child_env() sets (e.g. a token, to start without one)."""
    full = {k: v for k, v in {**child_env(), **(env or {})}.items() if k not in drop}
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                          capture_output=True, text=True, env=full, cwd=ROOT, timeout=60,
                          check=False)


def get_json(url: str) -> tuple[int, dict[str, Any]]:
    """GET `url` with the test token: (status, JSON body), or (0, {}) when nothing answers."""
    try:
        request = urllib.request.Request(url, headers=AUTH)
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, {}


def healthy(base: str) -> bool:
    """Whether the service at `base` (`http://127.0.0.1:PORT`) answers /healthz with 200."""
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> int:
    """SIGTERM, wait, SIGKILL if needed; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll `predicate` every 20 ms until true. Raises AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (and is not a zombie we reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def log_records(path: Path, event: str | None = None, **match: Any) -> list[dict[str, Any]]:
    """The JSON log lines in `path` with event `event` (any when None) and the given field
    values; a line still being written is skipped."""
    records = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return [r for r in records if (event is None or r.get("event") == event)
            and all(r.get(k) == v for k, v in match.items())]

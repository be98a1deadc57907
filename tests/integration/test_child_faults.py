"""How a child process ends when its database is away or misconfigured (shared/process/child.py,
shared/faults.py): real `python -m hookline.workers` / `python -m hookline.ingest` processes against
a real PostgreSQL server, a port where nothing listens, and a real SQLite file whose write lock
another connection holds."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hookline.shared.config import Config
from hookline.shared.errors import ConfigError, StoreError, StoreUnavailable
from hookline.shared.faults import is_transient
from hookline.shared.process.lifecycle import BOOT_ERROR_EXIT, TRANSIENT_EXIT, ready_path
from hookline.shared.store import open_store
from hookline.shared.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_child(module: str, config: Config, tmp_path: Path, timeout_s: float = 30
              ) -> tuple[int, list[dict[str, Any]], float]:
    """Run `python -m hookline.MODULE` (`workers` or `ingest`) to its end; (exit code, its
    JSON log lines, seconds taken)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"hookline.{module}", "--config-json",
                           config.to_json(), "--slot",
                           "worker-1" if module == "workers" else "ingest"],
                          capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=timeout_s, check=False)
    took_s = time.monotonic() - started
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, took_s


@pytest.mark.parametrize("module", ["workers", "ingest"])
def test_unreachable_database_at_boot_exits_transient(module: str, tmp_path: Path) -> None:
    """Nothing listens where the database should be: the child exits TRANSIENT_EXIT (the
    supervisor respawns it), never BOOT_ERROR_EXIT (which would stop the service)."""
    config = Config(db=f"postgresql://postgres@127.0.0.1:{closed_port()}/x",
                    listen="127.0.0.1:0", runtime_dir=str(tmp_path / "run"))
    code, lines, _ = run_child(module, config, tmp_path)
    assert code == TRANSIENT_EXIT, lines
    [failed] = [r for r in lines if r["event"] == "boot_failed"]
    assert failed["transient"] is True and "Connection refused" in failed["reason"]


def test_missing_database_is_permanent_and_says_what_to_fix(pg_server: Any,
                                                            tmp_path: Path) -> None:
    """A server without the named database: exit 3, and the reason names the setting."""
    config = Config(db=pg_server.url("no_such_database"), runtime_dir=str(tmp_path / "run"))
    code, lines, _ = run_child("workers", config, tmp_path)
    assert code == BOOT_ERROR_EXIT, lines
    [failed] = [r for r in lines if r["event"] == "boot_failed"]
    assert "no_such_database" in failed["reason"] and "db setting" in failed["reason"]


async def test_postgres_faults_are_classified_once(pg_server: Any) -> None:
    """Unreachable -> StoreUnavailable (transient); missing database -> StoreError
    (permanent); malformed URL -> ConfigError (permanent)."""
    cases = [(f"postgresql://postgres@127.0.0.1:{closed_port()}/x", StoreUnavailable, True),
             (pg_server.url("no_such_database"), StoreError, False),
             ("postgresql://postgres@127.0.0.1:99999/x", ConfigError, False),
             ("postgresql://postgres@127.0.0.1:5432/x?sslmode=bogus", ConfigError, False)]
    for url, kind, transient in cases:
        store = PostgresStore(url, connect_timeout_s=5)
        with pytest.raises(kind) as caught:
            await store.open()
        assert is_transient(caught.value) is transient, (url, caught.value)
        if not transient:
            assert not isinstance(caught.value, StoreUnavailable), url


async def test_sqlite_write_lock_held_at_boot_exits_transient_without_hanging(
        tmp_path: Path) -> None:
    """Another process holds SQLite's write lock past busy_timeout_s while a worker boots:
    it exits TRANSIENT_EXIT soon after the busy timeout (its database thread closed, so the
    process really ends), and leaves no readiness marker behind."""
    db = tmp_path / "w.db"
    config = Config(db=str(db), busy_timeout_s=0.5, runtime_dir=str(tmp_path / "run"))
    async with open_store(str(db)):
        pass  # created and migrated
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(25, holder.interrupt)  # never hold it past the test
    release.start()
    try:
        code, lines, took_s = await asyncio.to_thread(run_child, "workers", config, tmp_path,
                                                      20)
    finally:
        release.cancel()
        holder.rollback()
        holder.close()
    assert code == TRANSIENT_EXIT, lines
    assert [r["event"] for r in lines if r["level"] == "error"] == ["boot_failed"]
    assert not ready_path(config, "worker-1").exists()
    print(f"\nworker boot into a held write lock (busy_timeout_s 0.5): exited "
          f"{code} after {took_s:.2f} s")


EXIT_WITH_A_THREAD = """
import sys, threading, time
from hookline.shared.logs import configure_logging
from hookline.shared.process.child import exit_process
configure_logging("worker-1")
threading.Thread(target=time.sleep, args=(float(sys.argv[1]),), name="sleeper").start()
exit_process(3)
"""


@pytest.mark.parametrize(("sleep_s", "left"), [(0.3, False), (3600.0, True)])
def test_exit_process_waits_for_an_ending_thread_and_not_for_a_stuck_one(
        sleep_s: float, left: bool) -> None:
    """A non-daemon thread that ends within the grace (as aiosqlite's does just after a
    clean close) is waited for and not reported; one that never ends is logged as
    `threads_left` and the process still exits with its code, after the grace."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", EXIT_WITH_A_THREAD, str(sleep_s)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=30,
                          check=False)
    took_s = time.monotonic() - started
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    reported = [e for e in events if e.get("event") == "threads_left"]
    assert done.returncode == 3, done.stderr
    assert bool(reported) is left, events
    if left:
        assert reported[0]["threads"] == ["sleeper"], reported
        assert took_s < 15, f"exit took {took_s:.1f} s with a stuck thread"

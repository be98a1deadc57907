"""The database going away never stops `hookline serve`, and READY=1 tells the truth.

Real processes throughout: `hookline serve` (supervisor, ingest, workers), a receiver process
on 127.0.0.1, a throwaway PostgreSQL server stopped with `pg_ctl stop -m fast` and started
again on the same data, a plain sqlite3 connection holding SQLite's write lock, and a unix
datagram socket standing in for systemd's NOTIFY_SOCKET.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from procs import AUTH, JSON_AUTH, ROOT, child_env, log_records, start_cli, stop, wait_until

from hookline.rehearsal.harness import free_port
from hookline.rehearsal.pgserver import PgServer, PgStartError, PgUnavailable, start_server
from hookline.shared.process.lifecycle import TRANSIENT_EXIT
from tests.pg import skip_or_fail_in_ci

SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"


def hookline(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                          capture_output=True, text=True, env={**child_env(), **env}, cwd=ROOT,
                          timeout=60, check=False)


class Served:
    """A receiver process and `hookline serve` on the database `db`, files under `tmp`."""

    def __init__(self, tmp: Path, db: str, *, workers: int = 2,
                 settings: dict[str, Any] | None = None, env: dict[str, str] | None = None):
        self.tmp = tmp
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.out = tmp / "serve.out"
        self.env = {f"HOOKLINE_{k.upper()}": str(v) for k, v in {
            "db": db, "runtime_dir": tmp / "run", "pid_file": tmp / "hookline.pid",
            "retry_base_s": 0.2, **(settings or {})}.items()}
        self.receiver_port = free_port()
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "hookline.rehearsal.receiver", "--listen",
             f"127.0.0.1:{self.receiver_port}", "--endpoint", f"r={SECRET}:ok"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
        assert hookline("init", env=self.env).returncode == 0
        added = hookline("destinations", "add", "r",
                         f"http://127.0.0.1:{self.receiver_port}/r", "--secret", SECRET,
                         env=self.env)
        assert added.returncode == 0, added.stderr
        self.proc = start_cli(["serve", "--workers", str(workers), "--listen",
                               f"127.0.0.1:{self.port}"], self.out,
                              env={**self.env, **(env or {})})

    def close(self) -> None:
        if self.proc.poll() is None:
            stop(self.proc, timeout_s=30)
        self.receiver.terminate()
        self.receiver.wait(10)

    def log(self, event: str, **match: Any) -> list[dict[str, Any]]:
        return log_records(self.out, event, **match)

    def status(self, path: str) -> int:
        try:
            with urllib.request.urlopen(urllib.request.Request(self.base + path, headers=AUTH),
                                        timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def post(self, event_id: str) -> tuple[int, dict[str, Any]]:
        """POST one event; (status, JSON body); status 0 when no HTTP answer came."""
        body = json.dumps({"id": event_id, "type": "push", "data": {}}).encode()
        request = urllib.request.Request(self.base + "/v1/events", data=body,
                                         headers=JSON_AUTH)
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
        except OSError:
            return 0, {}

    def delivered(self) -> dict[str, float]:
        """webhook-id -> unix time the receiver first processed it."""
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.receiver_port}/_receipts", timeout=5) as resp:
            effects = json.loads(resp.read())["effects"]
        return {e["webhook_id"]: e["received_at"] for e in effects}


class Poster:
    """Posts events from a thread, one every `interval_s`, recording every answer."""

    def __init__(self, served: Served, interval_s: float = 0.02) -> None:
        self.served = served
        self.interval_s = interval_s
        self.answers: list[tuple[float, int, dict[str, Any]]] = []  # (unix time, status, body)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            status, body = self.served.post(f"load-{n}")
            self.answers.append((time.time(), status, body))
            time.sleep(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture
def own_pg_server() -> Any:
    """A PostgreSQL server of this test alone (it is stopped and started mid-test)."""
    try:
        server = start_server()
    except PgUnavailable as exc:
        skip_or_fail_in_ci(f"PostgreSQL tests: {exc}")
    except PgStartError as exc:
        pytest.fail(f"cannot start the test PostgreSQL server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def test_postgres_outage_under_load_loses_nothing_and_never_answers_500(
        own_pg_server: PgServer, tmp_path: Path) -> None:
    """PostgreSQL stopped (`pg_ctl stop -m fast`) for 3 s and started again while events are
    posted throughout: the supervisor keeps running, no request gets 500 (only 202, 200 or
    503 store_unavailable with Retry-After), every event answered 2xx reaches the receiver,
    and the workers log one store_unavailable / store_recovered pair each."""
    server = own_pg_server
    db = server.create_database("outage")
    served = Served(tmp_path, db, workers=2)
    poster: Poster | None = None
    try:
        wait_until(lambda: served.status("/readyz") == 200, 30, "/readyz to answer 200")
        poster = Poster(served)
        # Each wait only has to outlast what it waits for: events flowing before the halt
        # (one posted every 20 ms); during the outage, every worker meeting it (each looks
        # at least every poll_interval_s, 1 s, and the flow wakes them sooner) and ingest
        # answering 503; after it, ingest's first 202 (about 20 ms after the return).
        time.sleep(1.0)
        halted_at = time.time()
        server.halt("fast")
        time.sleep(1.0)
        not_ready = served.status("/readyz")
        time.sleep(2.0)
        server.resume()
        back_at = time.time()
        time.sleep(2.0)
        poster.stop()
        answers = poster.answers
        running = served.proc.poll() is None
        assert running, "the supervisor stopped during the outage"
        accepted = {body["message_id"] for _, status, body in answers if status in (200, 202)}
        wait_until(lambda: accepted <= set(served.delivered()), 60,
                   "every event answered 2xx to be delivered")
        delivered = served.delivered()
    finally:
        if poster is not None:
            poster.stop()
        served.close()
    during = collections.Counter(status for at, status, _ in answers
                                 if halted_at <= at <= back_at)
    after_back = sorted(at for at in delivered.values() if at >= back_at)
    first_202_after = min(at for at, status, _ in answers if at >= back_at and status == 202)
    print(f"\nPostgreSQL outage {back_at - halted_at:.1f} s: answers during it by status "
          f"{dict(during)}; all answers {dict(collections.Counter(s for _, s, _ in answers))}; "
          f"database return -> first 202 {first_202_after - back_at:.2f} s, -> first delivery "
          f"{after_back[0] - back_at:.2f} s")
    assert not_ready == 503, "/readyz must say not ready while the database is away"
    statuses = {status for _, status, _ in answers}
    assert statuses <= {200, 202, 503}, collections.Counter(s for _, s, _ in answers)
    assert during[503] > 0, "the outage was not seen by ingest"
    assert all(body.get("error") == "store_unavailable" for _, status, body in answers
               if status == 503)
    assert after_back, "nothing delivered after the database came back"
    assert not served.log("child_boot_failed")
    for slot in ("worker-1", "worker-2"):
        assert len(served.log("store_unavailable", process=slot)) == 1, slot
        assert len(served.log("store_recovered", process=slot)) == 1, slot


def test_worker_booting_into_a_held_sqlite_write_lock_exits_75_and_recovers(
        tmp_path: Path) -> None:
    """A worker respawning while an outside process holds SQLite's write lock longer than
    busy_timeout_s exits promptly with TRANSIENT_EXIT (no hang, no lingering thread), the
    service keeps running and respawns it, and once the lock is released events flow."""
    db = str(tmp_path / "svc.db")
    served = Served(tmp_path, db, workers=1, settings={"busy_timeout_s": 0.5})
    holder: sqlite3.Connection | None = None
    try:
        wait_until(lambda: served.status("/readyz") == 200 and served.log("worker_started"),
                   30, "/readyz to answer 200 and the worker to run")
        [started] = served.log("child_started", slot="worker-1")
        holder = sqlite3.connect(db, isolation_level=None, timeout=10)
        holder.execute("BEGIN IMMEDIATE")  # SQLite's write lock, held by another process
        os.kill(started["child_pid"], signal.SIGKILL)
        wait_until(lambda: served.log("child_exited", slot="worker-1",
                                      exit_code=TRANSIENT_EXIT), 20,
                   "the respawned worker to exit with the transient code")
        [boot_failed] = served.log("boot_failed", process="worker-1")
        assert boot_failed["transient"] is True, boot_failed
        assert served.proc.poll() is None, "the supervisor stopped"
        holder.rollback()
        holder.close()
        holder = None
        wait_until(lambda: served.status("/readyz") == 200, 60, "a worker back")
        status, body = served.post("after-lock")
        assert status == 202, body
        wait_until(lambda: body["message_id"] in served.delivered(), 30, "the delivery")
        assert served.proc.poll() is None
    finally:
        if holder is not None:
            holder.close()
        served.close()
    assert not served.log("child_boot_failed")
    assert not served.log("threads_left")


def test_ready_is_sent_only_once_ingest_listens_and_workers_opened_the_store(
        tmp_path: Path) -> None:
    """Through a real notify socket: READY=1 arrives after ingest's port accepts connections
    and after every worker has opened the store; STATUS says what it still waits for."""
    path = tmp_path / "n.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(path))
        notify.settimeout(30)
        served = Served(tmp_path, str(tmp_path / "svc.db"), workers=2,
                        env={"NOTIFY_SOCKET": str(path)})
        try:
            messages: list[str] = []
            while "READY=1" not in messages:
                messages += notify.recv(4096).decode().splitlines()
            # Checked at once, before anything else may catch up.
            with socket.create_connection(("127.0.0.1", served.port), timeout=1):
                pass
            workers_started = len(served.log("worker_started"))
        finally:
            served.close()
    assert workers_started == 2
    assert any("waiting for" in m for m in messages if m.startswith("STATUS=")), messages
    assert served.log("supervisor_ready")

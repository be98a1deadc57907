"""One `hookline serve` per database, ready only when it can serve, and a `serve --check` that
refuses what `serve` refuses: the real CLI in subprocesses with a real receiver process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from procs import (
    JSON_AUTH,
    ROOT,
    child_env,
    get_json,
    log_records,
    pid_alive,
    run_cli,
    start_cli,
    stop,
    wait_until,
)

from hookline.rehearsal.harness import free_port

SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"


def hookline(*args: str, env: dict[str, str], drop: tuple[str, ...] = ()
             ) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, drop=drop)


def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    return get_json(f"http://127.0.0.1:{port}{path}")


class Database:
    """A SQLite database under `tmp` with destination `r` at a real receiver process."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.db = tmp / "svc.db"
        self.env = {"HOOKLINE_DB": str(self.db), "HOOKLINE_RETRY_BASE_S": "0.2"}
        self.posted = 0
        rport = free_port()
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "hookline.rehearsal.receiver", "--listen", f"127.0.0.1:{rport}",
             "--endpoint", f"r={SECRET}:ok"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
        assert hookline("init", env=self.env).returncode == 0
        added = hookline("destinations", "add", "r", f"http://127.0.0.1:{rport}/r",
                         "--secret", SECRET, env=self.env)
        assert added.returncode == 0, added.stderr

    def serve(self, port: int, out: Path, env: dict[str, str] | None = None
              ) -> subprocess.Popen[bytes]:
        return start_cli(["serve", "--workers", "1", "--listen", f"127.0.0.1:{port}"], out,
                         env={**self.env, **(env or {})})

    def post_and_wait_delivered(self, port: int, event_id: str) -> None:
        """POST an event to ingest on `port` and wait until its job is done (delivered)."""
        body = json.dumps({"id": event_id, "type": "push", "data": {}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/events", data=body,
                                         headers=JSON_AUTH)
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 202
        self.posted += 1
        wait_until(lambda: self.done_jobs() == self.posted, 20, f"event {event_id} delivered")

    def done_jobs(self) -> int:
        listed = hookline("jobs", "--json", env=self.env)
        assert listed.returncode == 0, listed.stderr
        return sum(1 for job in json.loads(listed.stdout) if job["status"] == "done")

    def close(self) -> None:
        self.receiver.terminate()
        self.receiver.wait(10)


def test_second_serve_is_refused_and_a_kill_9_frees_the_database(tmp_path: Path):
    """A second `serve` on the running service's database, with the same config and with
    another --listen, is refused at once (exit 2, naming the running supervisor's pid and
    address) and leaves the first one's /readyz, pid file, status.json and deliveries as they
    were; after `kill -9` of the first, its children leave by themselves and a new `serve`
    starts at once."""
    data = Database(tmp_path)
    port, other_port = free_port(), free_port()
    pid_path, status_path = Path(f"{data.db}.pid"), Path(f"{data.db}.run") / "status.json"
    first = data.serve(port, tmp_path / "first.out")
    replacement = None
    try:
        wait_until(lambda: get(port, "/readyz")[0] == 200, 20, "the first serve ready")
        data.post_and_wait_delivered(port, "before")
        pid_text = pid_path.read_text()
        assert pid_text.strip() == str(first.pid)

        for listen in (port, other_port):
            refused = hookline("serve", "--workers", "1", "--listen", f"127.0.0.1:{listen}",
                               env=data.env)
            assert refused.returncode == 2, refused.stderr
            assert f"supervisor pid {first.pid}, listening on 127.0.0.1:{port}" \
                in refused.stderr
            assert "child_started" not in refused.stdout + refused.stderr
        assert get(other_port, "/readyz")[0] == 0  # nothing ever listened there

        assert get(port, "/readyz")[0] == 200
        assert pid_path.read_text() == pid_text
        status = json.loads(status_path.read_text())
        assert status["pid"] == first.pid and status["stopping"] is False
        data.post_and_wait_delivered(port, "after-refusals")

        checked = hookline("serve", "--check", "--listen", f"127.0.0.1:{port}", env=data.env)
        assert "lock held" in checked.stderr and f"pid {first.pid}" in checked.stderr

        children = [slot["pid"] for slot in status["slots"].values()]
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        # Same port at once: the new supervisor waits for the old ingest to let go of it.
        replacement = data.serve(port, tmp_path / "replacement.out")
        wait_until(lambda: not any(pid_alive(pid) for pid in children), 20,
                   "the killed supervisor's children to exit by themselves")
        wait_until(lambda: get(port, "/readyz")[0] == 200, 20, "the new serve ready")
        assert pid_path.read_text().strip() == str(replacement.pid)
        data.post_and_wait_delivered(port, "after-kill")
        # Those of the old children still running when it started (maybe none by then).
        for awaited in log_records(tmp_path / "replacement.out", "previous_children_awaited"):
            assert set(awaited["pids"]) <= set(children) and awaited["still_running"] == []
    finally:
        for proc in (first, replacement):
            if proc is not None and proc.poll() is None:
                stop(proc, timeout_s=30)
        data.close()
    assert replacement.returncode == 0
    assert log_records(tmp_path / "replacement.out", "supervisor_ready")


def test_check_beside_two_postgres_hosts_blames_the_running_service_only_for_its_address(
        tmp_path: Path, pg_url: str):
    """Two services on one PostgreSQL database, as two hosts on one machine: A with folder
    x's runtime folder and pid file, B with folder y's. A check from x of B's address fails
    (exit 2): the port is another process's, and the message says where A listens, instead
    of passing it as A's; A's lock is reported in the words of the `serve` it refuses. A
    check from x of A's own address passes, as before a restart."""
    ports = {"a": free_port(), "b": free_port()}
    # Each host's runtime paths are its folder's defaults for PostgreSQL (./hookline.run,
    # ./hookline.pid), spelled out since the test's processes all run in the checkout.
    envs = {name: {"HOOKLINE_DB": pg_url,
                   "HOOKLINE_RUNTIME_DIR": str(tmp_path / folder / "hookline.run"),
                   "HOOKLINE_PID_FILE": str(tmp_path / folder / "hookline.pid")}
            for name, folder in (("a", "x"), ("b", "y"))}
    hosts = {name: start_cli(["serve", "--workers", "1", "--listen", f"127.0.0.1:{port}"],
                             tmp_path / f"{name}.out", env=envs[name])
             for name, port in ports.items()}
    try:
        for name, port in ports.items():
            wait_until(lambda port=port: get(port, "/readyz")[0] == 200, 30, f"{name} ready")
        a_listen, b_listen = (f"127.0.0.1:{ports[name]}" for name in ("a", "b"))
        refused = hookline("serve", "--workers", "1", "--listen", b_listen, env=envs["a"])
        assert refused.returncode == 2, refused.stderr
        [serve_said] = [line.removeprefix("hookline: cannot start: ")
                        for line in refused.stderr.splitlines() if "cannot start" in line]

        checked = hookline("serve", "--check", "--listen", b_listen, env=envs["a"])
        assert checked.returncode == 2, checked.stderr
        assert f"listen: cannot listen on {b_listen}: Address already in use" in checked.stderr
        assert (f"the running service (supervisor pid {hosts['a'].pid} in "
                f"{tmp_path / 'x' / 'hookline.pid'}) listens on {a_listen}, not there"
                in checked.stderr), checked.stderr
        assert "presumably" not in checked.stderr
        assert f"`hookline serve` would be refused now: {serve_said}" in checked.stderr

        own = hookline("serve", "--check", "--listen", a_listen, env=envs["a"])
        assert own.returncode == 0, own.stderr
        assert (f"listen address {a_listen} is in use, presumably by the running service "
                f"(supervisor pid {hosts['a'].pid}" in own.stderr), own.stderr
    finally:
        codes = [stop(host, timeout_s=30) for host in hosts.values()]
    assert codes == [0, 0]


def test_ready_needs_an_ingest_token_or_ingest_closed(tmp_path: Path):
    """Without an ingest token the service runs but is not ready: /readyz 503 naming the
    setting, `supervisor_not_ready` logged and no READY=1 for systemd; with ingest_closed
    it is ready (and with a token, as every other test shows)."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify.sock"))
    notify.settimeout(0.1)
    data = Database(tmp_path)
    try:
        for closed in (False, True):
            port, out = free_port(), tmp_path / f"closed-{closed}.out"
            env = {k: v for k, v in {**child_env(), **data.env}.items()
                   if k != "HOOKLINE_INGEST_TOKEN"}
            env["NOTIFY_SOCKET"] = str(tmp_path / "notify.sock")
            if closed:
                env["HOOKLINE_INGEST_CLOSED"] = "1"
            with out.open("ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "hookline.supervisor.cli", "serve", "--workers", "1",
                     "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT,
                    env=env, cwd=ROOT)
            try:
                wait_until(lambda out=out: log_records(out, "supervisor_not_ready")
                           or log_records(out, "supervisor_ready"), 20, "the children up")
                status, body = get(port, "/readyz")
                messages = _drain(notify)
            finally:
                stop(proc, timeout_s=30)
            if closed:
                assert status == 200, body
                assert body["checks"]["ingest"] == "closed on purpose (ingest_closed)"
                assert "READY=1" in messages
            else:
                assert status == 503, body
                assert body["checks"]["ingest"] == "no ingest_token"
                assert "ingest_token" in body["detail"] and "ingest_closed" in body["detail"]
                [line] = log_records(out, "supervisor_not_ready")
                assert "ingest_token" in line["reason"]
                assert "READY=1" not in messages
                assert any("not ready: no ingest_token" in m for m in messages)
    finally:
        notify.close()
        data.close()


def _drain(sock: socket.socket) -> list[str]:
    messages = []
    try:
        while True:
            messages.append(sock.recv(4096).decode())
    except TimeoutError:
        return messages


def test_missing_folder_is_refused_alike_by_check_init_and_serve(tmp_path: Path):
    """A database in a folder that does not exist: `serve --check`, `init` and `serve` all
    exit 2 saying so, and none of them creates anything."""
    env = {"HOOKLINE_DB": str(tmp_path / "missing" / "h.db")}
    for command in (["serve", "--check"], ["init"], ["serve", "--workers", "1"]):
        done = hookline(*command, env=env)
        assert done.returncode == 2, (command, done.stderr)
        assert f"{tmp_path / 'missing'} does not exist" in done.stderr, (command, done.stderr)
    assert os.listdir(tmp_path) == []


def test_check_refuses_a_malformed_otel_batch_variable_only_while_tracing(tmp_path: Path):
    """With tracing on, every process reads OTEL_BSP_* at start and stops on a malformed one:
    `serve --check` says so first (exit 2, naming the variable); with tracing off the
    variable is not read, and the check passes."""
    env = {"HOOKLINE_DB": str(tmp_path / "h.db"), "HOOKLINE_INGEST_TOKEN": "i" * 32,
           "HOOKLINE_ADMIN_TOKEN": "a" * 32, "HOOKLINE_LISTEN": f"127.0.0.1:{free_port()}",
           "HOOKLINE_RUNTIME_DIR": str(tmp_path / "run"), "OTEL_BSP_MAX_QUEUE_SIZE": "lots"}
    traced = hookline("serve", "--check", env={**env, "HOOKLINE_TRACING": "true"})
    assert traced.returncode == 2, traced.stderr
    assert "OTEL_BSP_MAX_QUEUE_SIZE must be a positive integer, not 'lots'" in traced.stderr
    untraced = hookline("serve", "--check", env={**env, "HOOKLINE_TRACING": "false"})
    assert untraced.returncode == 0, untraced.stderr


def test_serve_says_when_it_creates_a_new_database(tmp_path: Path):
    """Started with a relative `db` in a folder that holds none, `serve` says on stderr that
    it created a new, empty database, with the absolute path and that a relative `db` follows
    the working directory, and logs `database_created`; started again on the same file it
    says nothing of the kind."""
    log = tmp_path / "serve.log"
    env = {"HOOKLINE_INGEST_TOKEN": "i" * 32, "HOOKLINE_ADMIN_TOKEN": "a" * 32}
    args = ["--db", "hookline.db", "serve", "--workers", "1", "--listen", "127.0.0.1:0"]
    said = f"hookline: created a new, empty database {tmp_path / 'hookline.db'} (`db` " \
           f"'hookline.db' is relative: it is read from the working directory)"
    for start in (1, 2):
        proc = start_cli(args, log, env=env, cwd=tmp_path)
        try:
            wait_until(lambda n=start: len(log_records(log, "ingest_listening")) == n, 30,
                       f"ingest listening, start {start}")
        finally:
            assert stop(proc) == 0, log.read_text()[-3000:]
        text = log.read_text()
        assert text.count(said) == 1, text[-3000:]  # the first start only
        created = log_records(log, "database_created")
        assert [r["path"] for r in created] == [str(tmp_path / "hookline.db")]

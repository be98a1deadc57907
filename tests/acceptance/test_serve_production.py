"""`hookline serve` in production shape: the real CLI in a subprocess, with a real
receiver process, signalled, killed, stopped and scaled from outside.

Settings go in through `HOOKLINE_*` variables; the service logs to stdout (a file here) and
to `log_file`, which `hookline logs` then reads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from procs import (
    JSON_AUTH,
    ROOT,
    TEST_TOKEN,
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


def hookline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env)


class Service:
    """A receiver process plus `hookline serve`, on a fresh database under `tmp`."""

    def __init__(self, tmp: Path, behaviour: str, *, workers: int = 2,
                 settings: dict[str, Any] | None = None, env: dict[str, str] | None = None,
                 cwd: Path = ROOT):
        self.tmp = tmp
        self.db = str(tmp / "svc.db")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.out = tmp / "serve.out"
        self.env = {f"HOOKLINE_{k.upper()}": str(v) for k, v in {
            "db": self.db, "log_file": tmp / "hookline.log", "retry_base_s": 0.2,
            **(settings or {})}.items()}
        rport = free_port()
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "hookline.rehearsal.receiver", "--listen", f"127.0.0.1:{rport}",
             "--endpoint", f"r={SECRET}:{behaviour}"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
        assert hookline("init", env=self.env).returncode == 0
        added = hookline("destinations", "add", "r", f"http://127.0.0.1:{rport}/r",
                         "--secret", SECRET, env=self.env)
        assert added.returncode == 0, added.stderr
        self.proc = start_cli(["serve", "--workers", str(workers), "--listen",
                               f"127.0.0.1:{self.port}"], self.out, env={**self.env, **(env or {})},
                               cwd=cwd)

    def close(self) -> None:
        if self.proc.poll() is None:
            stop(self.proc)
        self.receiver.terminate()
        self.receiver.wait(10)

    def log(self, event: str | None = None, **match: Any) -> list[dict[str, Any]]:
        return log_records(self.out, event, **match)

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        return get_json(self.base + path)

    def post_event(self, event_id: str) -> dict[str, Any]:
        body = json.dumps({"id": event_id, "type": "push", "data": {}}).encode()
        request = urllib.request.Request(self.base + "/v1/events", data=body,
                                         headers=JSON_AUTH)
        with urllib.request.urlopen(request, timeout=5) as resp:
            return json.loads(resp.read())

    def jobs(self) -> list[dict[str, Any]]:
        """Every job (`hookline jobs` lists 50 unless told otherwise)."""
        listed = hookline("jobs", "--json", "--limit", "10000", env=self.env)
        assert listed.returncode == 0, listed.stderr
        return json.loads(listed.stdout)

    def ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def workers(self) -> dict[str, int]:
        """Slot -> pid of the live worker children, per the supervisor's status file."""
        try:
            status = json.loads((self.tmp / "svc.db.run" / "status.json").read_text())
        except (OSError, ValueError):
            return {}
        return {slot: v["pid"] for slot, v in status["slots"].items()
                if slot.startswith("worker-")}


def test_sigkilled_worker_is_respawned_and_logs_tell_the_job_story(tmp_path: Path):
    """A worker SIGKILLed mid-attempt is respawned (logged with the OOM hint) and its job is
    taken over by a worker once the lease expires; `hookline logs --job ID` then shows the
    whole story: accepted, claimed, failed and retried, taken over, dead."""
    # Every attempt outlasts its timeout (the receiver holds each request 4 s), and the lease
    # the timeout by 0.5 s: an attempt that timed out is recorded before its lease expires,
    # so only the killed worker's attempt is taken over. The timeout is the test's window to
    # kill the second attempt's worker while it sends: 1 s was too short under a loaded full
    # run (the kill came 2.5 s after the claim, once the attempt had ended; the job then died
    # at the cap with no takeover).
    svc = Service(tmp_path, "slow:4", settings={
        "lease_s": 3.5, "attempt_timeout_s": 3.0, "max_attempts": 3})
    try:
        wait_until(svc.ready, 15, "/readyz to answer 200")
        # Secrets stay out of command lines (every local user can read those) and the log
        # file is private.
        pid = svc.proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert len(children) == 3
        for child in [pid, *map(int, children)]:
            assert TEST_TOKEN.encode() not in Path(f"/proc/{child}/cmdline").read_bytes()
        assert stat.S_IMODE((tmp_path / "hookline.log").stat().st_mode) == 0o600
        accepted = svc.post_event("story-1")
        [job] = svc.jobs()
        job_id = job["id"]
        wait_until(lambda: svc.log("job_claimed", job_id=job_id, attempt=2), 15,
                   "the second attempt")
        [second] = svc.log("job_claimed", job_id=job_id, attempt=2)
        victim = int(second["worker"].rsplit(":", 1)[1])
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: svc.log("child_exited", child_pid=victim), 10, "the kill reaped")
        [exited] = svc.log("child_exited", child_pid=victim)
        assert exited["signal"] == "SIGKILL" and exited["hint"] == "killed: out of memory?"
        wait_until(lambda: len(svc.log("child_started", slot=exited["slot"])) == 2, 10,
                   "the killed worker's slot to be respawned")
        wait_until(lambda: svc.log("job_dead", job_id=job_id), 20, "the job to end dead")
        [taken] = svc.log("job_taken_over", job_id=job_id)
        assert taken["attempt"] == 3 and taken["worker"] != second["worker"]
    finally:
        svc.close()
    story = hookline("logs", "--job", str(job_id), "--json", env=svc.env)
    assert story.returncode == 0, story.stderr
    events = [json.loads(line)["event"] for line in story.stdout.splitlines()]
    # Ingest writes its accept line just after the commit; a worker may claim (and write
    # job_claimed) in between, so only the worker's own lines keep a strict order.
    assert events.count("event_accepted") == 1, events
    worker_story = [e for e in events if e != "event_accepted"]
    assert worker_story[0] == "job_claimed" and worker_story[-1] == "job_dead", events
    for name in ("job_claimed", "attempt_failed", "job_retry_scheduled", "job_taken_over",
                 "job_dead"):
        assert name in events, (name, events)
    assert events.count("job_claimed") == 3
    lines = [json.loads(line) for line in story.stdout.splitlines()]
    assert all(r.get("event_id") == accepted["event_id"] for r in lines)
    human = hookline("logs", str(tmp_path / "hookline.log"), "--job", str(job_id),
                     "--level", "warning", env=svc.env)
    assert "job_dead" in human.stdout and "job_claimed" not in human.stdout
    assert "\x1b[" not in human.stdout  # no colours when not on a terminal


def test_sigterm_during_slow_sends_hands_jobs_back_and_talks_to_systemd(tmp_path: Path):
    """SIGTERM while sends hang: exit 0 within the grace period plus a margin, no job left
    running, the interrupted jobs' attempt counts unchanged; a fake NOTIFY_SOCKET receives
    READY=1, WATCHDOG=1 pings and STOPPING=1 from the real `hookline serve`."""
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.1)
    svc = Service(tmp_path, "slow:30", settings={"graceful_timeout_s": 1.0},
                  env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "600000"})
    messages: list[str] = []

    def drain() -> None:
        try:
            while True:
                messages.append(sock.recv(4096).decode())
        except TimeoutError:
            pass

    try:
        wait_until(svc.ready, 15, "/readyz to answer 200")
        for n in range(3):
            svc.post_event(f"slow-{n}")
        wait_until(lambda: len(svc.log("job_claimed")) == 3, 10, "three sends in flight")
        # A claim counts the attempt it starts; handing back must take that charge off.
        assert {(j["status"], j["attempts"]) for j in svc.jobs()} == {("running", 1)}
        drain()
        assert "READY=1" in messages and "WATCHDOG=1" in messages
        t0 = time.monotonic()
        svc.proc.send_signal(signal.SIGTERM)
        code = svc.proc.wait(15)
        took_s = time.monotonic() - t0
        drain()
    finally:
        svc.close()
        sock.close()
    assert code == 0 and took_s < 1.0 + 6.0, took_s
    assert any(m.startswith("STOPPING=1") for m in messages)
    jobs = svc.jobs()
    assert {j["status"] for j in jobs} == {"pending"}
    assert {j["attempts"] for j in jobs} == {0}
    assert len(svc.log("job_handed_back")) == 3


def test_hung_worker_is_replaced_and_scale_changes_the_worker_count(tmp_path: Path):
    """A worker stopped with SIGSTOP stops heartbeating: it gets SIGABRT then SIGKILL and a new
    one takes its slot; `hookline scale N` (SIGTTIN/SIGTTOU via the pid file) changes the live
    worker count both ways; /readyz reports the workers."""
    svc = Service(tmp_path, "ok", settings={"heartbeat_timeout_s": 2.0})
    try:
        wait_until(svc.ready, 15, "/readyz to answer 200")
        old = svc.workers()["worker-1"]
        os.kill(old, signal.SIGSTOP)
        wait_until(lambda: svc.log("child_hung", child_pid=old), 10, "the hang detected")
        wait_until(lambda: svc.workers().get("worker-1") not in (None, old), 10,
                   "worker-1 replaced")
        wait_until(lambda: not pid_alive(old), 5, "the hung worker gone")
        scaled = hookline("scale", "4", env=svc.env)
        assert scaled.returncode == 0, scaled.stderr
        wait_until(lambda: len(svc.workers()) == 4, 10, "four workers")
        status, body = svc.get("/readyz")
        assert status == 200 and body["checks"]["database"] == "writable"
        scaled = hookline("scale", "1", env=svc.env)
        assert scaled.returncode == 0, scaled.stderr
        wait_until(lambda: list(svc.workers()) == ["worker-1"], 10, "one worker")
        assert hookline("scale", "0", env=svc.env).returncode == 2  # usage: N must be >= 1
    finally:
        svc.close()
    assert svc.proc.returncode == 0
    assert hookline("scale", "2", env=svc.env).returncode == 1  # no supervisor any more


def test_child_that_cannot_boot_stops_the_service(tmp_path: Path):
    """Ingest cannot bind its port (already in use): the service stops with a non-zero exit
    and a clear message instead of respawning it forever."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    db = str(tmp_path / "boot.db")
    try:
        proc = start_cli(["--db", db, "serve", "--listen", f"127.0.0.1:{port}"],
                         tmp_path / "out.log")
        code = proc.wait(20)
    finally:
        busy.close()
    out = (tmp_path / "out.log").read_text()
    assert code == 3
    assert "ingest could not boot" in out and f"cannot listen on 127.0.0.1:{port}" in out


def _post_while_killing(svc: Service, pid: int) -> tuple[list[int], list[int]]:
    """200 events posted from 8 threads, `pid` SIGKILLed after the 61st is handed out:
    (the event ids answered 2xx, the statuses of the HTTP errors answered). A reset or
    refused connection is neither: not accepted, as far as the sender knows."""
    answered: list[int] = []
    refused: list[int] = []

    def post(n: int) -> None:
        try:
            answered.append(svc.post_event(f"under-kill-{n}")["event_id"])
        except urllib.error.HTTPError as exc:
            refused.append(exc.code)
        except OSError:
            pass

    with ThreadPoolExecutor(8) as pool:
        for n in range(200):
            pool.submit(post, n)
            if n == 60:
                os.kill(pid, signal.SIGKILL)
    return answered, refused


def test_two_ingest_processes_share_the_port_and_one_killed_is_respawned(tmp_path: Path):
    """`ingest_processes = 2`: slots `ingest` and `ingest-2` listen on the one port, the
    kernel spreads new connections over both (each accepts events); `ingest-2` SIGKILLed
    while 8 clients post: every event answered 202 is stored (a client may see a reset,
    never a 202 for an event not committed), the other process keeps accepting, the killed
    one is respawned, and every stored event is delivered."""
    svc = Service(tmp_path, "ok", workers=1, settings={
        "ingest_processes": 2, "retention_interval_s": 0.3, "maintenance_interval_s": 0.3,
        "log_level": "debug"})
    try:
        # Every slot listening or claiming (the first ingest alone already answers /readyz).
        wait_until(lambda: svc.log("supervisor_ready"), 15, "every child ready")
        status = json.loads((tmp_path / "svc.db.run" / "status.json").read_text())
        assert {"ingest", "ingest-2", "worker-1"} <= set(status["slots"])
        for n in range(40):  # urllib opens a new connection for each
            svc.post_event(f"spread-{n}")
        accepted_by = {r["process"] for r in svc.log("event_accepted")}
        assert accepted_by == {"ingest", "ingest-2"}
        second = status["slots"]["ingest-2"]["pid"]
        answered, _ = _post_while_killing(svc, second)  # ids answered 202 as the kill lands
        wait_until(lambda: svc.log("child_exited", child_pid=second), 10, "the kill reaped")
        for n in range(20):
            svc.post_event(f"after-kill-{n}")
        wait_until(lambda: len(svc.log("child_started", slot="ingest-2")) == 2, 15,
                   "ingest-2 respawned")
        stored = {job["event_id"] for job in svc.jobs()}
        assert set(answered) <= stored and len(answered) >= 100, len(answered)
        wait_until(lambda: Counter(j["status"] for j in svc.jobs()) == {"done": len(stored)},
                   20, "every event delivered")
        # The supervisor's snapshot (what /v1/admin/processes reads) follows within seconds.
        wait_until(lambda: svc.get("/v1/admin/processes")[1].get("children", {}).get("ingest")
                   == {"wanted": 2, "alive": 2}, 10, "both ingest processes counted alive")
        # Every process checkpoints (its own /healthz view of the WAL); one purges.
        wait_until(lambda: {r["process"] for r in svc.log("wal_checkpoint")}
                   == {"ingest", "ingest-2"}, 10, "a maintenance round in each")
        assert {r["process"] for r in svc.log("retention_purged")} == {"ingest"}
    finally:
        svc.close()
    assert svc.proc.returncode == 0


def test_the_ingest_writer_process_commits_for_every_ingest_process_and_is_respawned(
        tmp_path: Path):
    """`ingest_writer = process`: slot `ingest-writer` commits the batches of both ingest
    processes (each event answered 202 only once stored); SIGKILLed while 8 clients post,
    a client may see a 503 (outcome unknown: its retry is deduplicated), never a 202 for an
    event not committed; it is respawned, ingest accepts again, every stored event is
    delivered, the supervisor counts it as its own kind of process, and /readyz is 503 while
    it is stopped (SIGSTOP)."""
    svc = Service(tmp_path, "ok", workers=1, settings={
        "ingest_processes": 2, "ingest_writer": "process", "log_level": "debug"})
    try:
        wait_until(lambda: svc.log("supervisor_ready"), 15, "every child ready")
        status = json.loads((tmp_path / "svc.db.run" / "status.json").read_text())
        assert {"ingest-writer", "ingest", "ingest-2", "worker-1"} <= set(status["slots"])
        for n in range(40):
            svc.post_event(f"spread-{n}")
        assert {r["process"] for r in svc.log("event_accepted")} == {"ingest", "ingest-2"}
        writer = status["slots"]["ingest-writer"]["pid"]
        answered, refused = _post_while_killing(svc, writer)
        wait_until(lambda: svc.log("child_exited", child_pid=writer), 10, "the kill reaped")
        wait_until(lambda: len(svc.log("child_started", slot="ingest-writer")) == 2, 15,
                   "the writer respawned")
        wait_until(svc.ready, 15, "ingest ready again")
        for n in range(20):
            answered.append(svc.post_event(f"after-kill-{n}")["event_id"])
        # Every request answered: 202, or 503 while the writer was away (ingest lived on).
        assert set(refused) <= {503} and len(answered) + len(refused) == 220, refused
        stored = {job["event_id"] for job in svc.jobs()}
        assert set(answered) <= stored and len(answered) >= 20, len(answered)
        wait_until(lambda: Counter(j["status"] for j in svc.jobs()) == {"done": len(stored)},
                   20, "every event delivered")
        wait_until(lambda: svc.get("/v1/admin/processes")[1].get("children", {}).get(
            "ingest-writer") == {"wanted": 1, "alive": 1}, 10, "the writer counted alive")
        # A stopped writer still accepts connections (the kernel does): readiness asks it.
        respawned = json.loads((tmp_path / "svc.db.run" / "status.json").read_text())[
            "slots"]["ingest-writer"]["pid"]
        os.kill(respawned, signal.SIGSTOP)
        try:
            wait_until(lambda: svc.get("/readyz")[1].get("checks", {}).get(
                "ingest_writer", "").startswith("away"), 10, "not ready: the writer is stopped")
        finally:
            os.kill(respawned, signal.SIGCONT)
        wait_until(svc.ready, 10, "ready again once it answers")
    finally:
        svc.close()
    assert svc.proc.returncode == 0
    assert svc.log("ingest_writer_stopped"), "the writer stopped cleanly"


def test_several_ingest_processes_refuse_a_port_another_process_shares(tmp_path: Path):
    """A port another process listens on with SO_REUSEPORT would let it take a share of the
    events: serve stops before starting anything (exit 3, naming the address)."""
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    out = tmp_path / "serve.out"
    proc = start_cli(["--db", str(tmp_path / "s.db"), "serve", "--ingest-processes", "2",
                      "--listen", f"127.0.0.1:{port}"], out)
    try:
        code = proc.wait(20)
    finally:
        squatter.close()
        if proc.poll() is None:  # it started after all: stop it, then fail
            stop(proc)
    assert code == 3, out.read_text()[-2000:]
    assert f"cannot listen on 127.0.0.1:{port}" in out.read_text()


def test_several_ingest_processes_need_a_fixed_port(tmp_path: Path):
    """Port 0 would give each ingest process a port of its own: serve refuses it (exit 2),
    naming both settings, and `serve --check` reports it."""
    env = {"HOOKLINE_DB": str(tmp_path / "p.db"), "HOOKLINE_INGEST_PROCESSES": "3"}
    for args in (["serve", "--listen", "127.0.0.1:0"],
                 ["serve", "--check", "--listen", "127.0.0.1:0"]):
        done = hookline(*args, env=env)
        assert done.returncode == 2, done.stderr
        assert "ingest_processes = 3 needs a fixed port in listen" in done.stderr

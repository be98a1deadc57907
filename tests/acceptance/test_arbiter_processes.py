"""The arbiter over real OS processes: signalled, killed, scaled, and talking to systemd.

Each test runs the arbiter in its own Python process (a small driver given as `python -c`)
supervising children that are also `python -c` scripts. A child writes `<slot>-<pid>.pid` into
a directory when it is up and `<slot>-<pid>.term` when it receives SIGTERM, so the test sees
respawns and graceful stops from the outside. The arbiter's JSON log lines go to a file.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

# A child: handles SIGTERM (or ignores it, or cannot boot), announces itself, and exits when
# its parent is gone so that a failing test never leaks processes.
CHILD = r"""
import os, signal, sys, time
slot, directory, mode = sys.argv[1:4]
me = os.path.join(directory, f"{slot}-{os.getpid()}")
def on_term(signum, frame):
    open(me + ".term", "w").close()
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "ignore-term" else on_term)
if mode == "boot-error":
    sys.exit(3)
parent = os.getppid()
with open(me + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(me + ".tmp", me + ".pid")
while os.getppid() == parent:
    time.sleep(0.02)
"""

DRIVER = r"""
import json, sys
from hookline.shared.logs import configure_logging
from hookline.supervisor.arbiter import Arbiter
from hookline.supervisor.children import ChildSpec
cfg = json.loads(sys.argv[1])
configure_logging("supervisor")
def spec(slot, mode):
    argv = (sys.executable, "-c", cfg["child"], slot, cfg["dir"], mode)
    return ChildSpec(slot=slot, argv=argv, env=None)
arbiter = Arbiter(
    [spec(slot, mode) for slot, mode in cfg["children"]],
    graceful_timeout_s=cfg["graceful_timeout_s"],
    respawn_base_s=0.1,
    respawn_cap_s=1.0,
    stable_after_s=5.0,
    make_worker_spec=lambda n: spec(f"worker-{n}", "normal"),
)
sys.exit(arbiter.run())
"""


def wait_for(predicate: Callable[[], Any], timeout_s: float = 5.0, what: str = "") -> Any:
    """Poll `predicate` every 20 ms until it returns something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what or predicate}")


def is_alive(pid: int) -> bool:
    """True while `pid` exists (a zombie still counts until its new parent reaps it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Supervised:
    """A running arbiter driver plus helpers to read what it and its children did."""

    def __init__(self, tmp_path: Path, children: list[tuple[str, str]],
                 graceful_timeout_s: float, env: dict[str, str]) -> None:
        self.dir = tmp_path / "children"
        self.dir.mkdir()
        self.log_path = tmp_path / "arbiter.log"
        self.err_path = tmp_path / "arbiter.err"
        self.graceful_timeout_s = graceful_timeout_s
        cfg = {"child": CHILD, "dir": str(self.dir), "children": children,
               "graceful_timeout_s": graceful_timeout_s}
        with open(self.log_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", DRIVER, json.dumps(cfg)],
                stdout=out, stderr=err, env={**os.environ, "PYTHONPATH": str(REPO), **env},
            )

    def events(self, name: str, **match: Any) -> list[dict[str, Any]]:
        """Return the arbiter's log lines with event `name` and the given field values."""
        lines = self.log_path.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        return [r for r in records
                if r.get("event") == name and all(r.get(k) == v for k, v in match.items())]

    def pids(self, slot: str) -> list[int]:
        """Return the pids of every child of `slot` that got up, oldest first."""
        files = sorted(self.dir.glob(f"{slot}-*.pid"), key=lambda p: p.stat().st_mtime_ns)
        return [int(p.read_text()) for p in files]

    def got_term(self, slot: str, pid: int) -> bool:
        """True when child `pid` of `slot` received SIGTERM."""
        return (self.dir / f"{slot}-{pid}.term").exists()

    def started_pids(self) -> list[int]:
        """Return every pid the arbiter logged as started."""
        return [r["child_pid"] for r in self.events("child_started")]

    def wait_up(self, slots: list[str]) -> dict[str, int]:
        """Wait until each slot has a child that got up; return slot -> pid."""
        return {slot: wait_for(lambda s=slot: (self.pids(s) or [None])[-1], what=f"{slot} up")
                for slot in slots}

    def signal(self, signum: signal.Signals) -> None:
        """Send `signum` to the arbiter process."""
        self.proc.send_signal(signum)

    def wait_exit(self, timeout_s: float) -> int:
        """Wait for the arbiter to exit; return its exit code."""
        return self.proc.wait(timeout=timeout_s)

    def cleanup(self) -> None:
        """Kill the arbiter and any child still alive (only after a failed test)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pid in self.started_pids() if self.log_path.exists() else []:
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def supervise(tmp_path: Path) -> Iterator[Callable[..., Supervised]]:
    """Factory: start an arbiter over `children` [(slot, mode)]; everything is killed after."""
    started: list[Supervised] = []

    def start(children: list[tuple[str, str]], graceful_timeout_s: float = 2.0,
              env: dict[str, str] | None = None) -> Supervised:
        sup = Supervised(tmp_path, children, graceful_timeout_s, env or {})
        started.append(sup)
        return sup

    yield start
    for sup in started:
        sup.cleanup()


def assert_all_gone(sup: Supervised) -> None:
    """Every child the arbiter ever started has exited (and been reaped)."""
    pids = sup.started_pids()
    assert pids
    wait_for(lambda: not any(is_alive(pid) for pid in pids), timeout_s=2.0,
             what=f"children {pids} gone")


def test_sigkilled_child_is_respawned_and_logged(supervise: Callable[..., Supervised]) -> None:
    """A child killed by SIGKILL is logged with its signal and an OOM hint, then respawned."""
    sup = supervise([("ingest", "normal"), ("worker-1", "normal")])
    first = sup.wait_up(["ingest", "worker-1"])["worker-1"]

    os.kill(first, signal.SIGKILL)

    second = wait_for(lambda: [p for p in sup.pids("worker-1") if p != first],
                      what="worker-1 respawned")[0]
    assert second != first
    exited = sup.events("child_exited", slot="worker-1", child_pid=first)
    assert exited and exited[0]["signal"] == "SIGKILL"
    assert exited[0]["hint"] == "killed: out of memory?"
    assert sup.events("child_respawn_scheduled", slot="worker-1")
    started = sup.events("child_started", slot="worker-1", child_pid=second)
    assert started and started[0]["pid"] == sup.proc.pid  # `pid` stays the supervisor's own
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(timeout_s=sup.graceful_timeout_s + 2) == 0


def test_sigterm_stops_children_gracefully_and_exits_zero(
    supervise: Callable[..., Supervised],
) -> None:
    """SIGTERM to the arbiter reaches every child; it exits 0 in time, leaving no process."""
    sup = supervise([("ingest", "normal"), ("worker-1", "normal"), ("worker-2", "normal")])
    pids = sup.wait_up(["ingest", "worker-1", "worker-2"])

    sup.signal(signal.SIGTERM)

    assert sup.wait_exit(timeout_s=sup.graceful_timeout_s + 2) == 0
    for slot, pid in pids.items():
        assert sup.got_term(slot, pid), f"{slot} did not get SIGTERM"
        assert not is_alive(pid)
    assert_all_gone(sup)
    assert sup.events("supervisor_stopping") and sup.events("supervisor_stopped")
    assert len(sup.events("child_started")) == 3  # nothing respawned during the stop


def test_child_ignoring_sigterm_is_killed_after_graceful_timeout(
    supervise: Callable[..., Supervised],
) -> None:
    """A child that ignores SIGTERM gets SIGKILL once graceful_timeout_s has passed."""
    sup = supervise([("worker-1", "ignore-term"), ("worker-2", "normal")],
                    graceful_timeout_s=0.5)
    pids = sup.wait_up(["worker-1", "worker-2"])

    began = time.monotonic()
    sup.signal(signal.SIGTERM)

    assert sup.wait_exit(timeout_s=sup.graceful_timeout_s + 2) == 0
    assert time.monotonic() - began >= sup.graceful_timeout_s
    exited = sup.events("child_exited", slot="worker-1", child_pid=pids["worker-1"])
    assert exited and exited[0]["signal"] == "SIGKILL"
    assert "hint" not in exited[0]  # the supervisor's own SIGKILL is not blamed on memory
    assert sup.events("child_exited", slot="worker-2", exit_code=0)
    assert_all_gone(sup)


def test_boot_error_stops_everything_and_exits_three(
    supervise: Callable[..., Supervised],
) -> None:
    """A child exiting with code 3 cannot boot: the others are stopped and run() returns 3."""
    sup = supervise([("ingest", "normal"), ("worker-1", "boot-error")])

    assert sup.wait_exit(timeout_s=sup.graceful_timeout_s + 2) == 3
    stderr = sup.err_path.read_text()
    assert "hookline: worker-1 could not boot (exit 3); see its log above; stopping" in stderr
    assert sup.events("child_boot_failed", slot="worker-1")
    assert not sup.events("child_respawn_scheduled")
    assert_all_gone(sup)


def test_sigttin_adds_a_worker_and_sigttou_retires_it(
    supervise: Callable[..., Supervised],
) -> None:
    """SIGTTIN starts worker-2; SIGTTOU stops it with SIGTERM, no respawn; the last one stays."""
    sup = supervise([("ingest", "normal"), ("worker-1", "normal")])
    sup.wait_up(["ingest", "worker-1"])

    sup.signal(signal.SIGTTIN)
    added = sup.wait_up(["worker-2"])["worker-2"]
    assert sup.events("supervisor_scaled", direction="up", slot="worker-2")

    sup.signal(signal.SIGTTOU)
    wait_for(lambda: sup.events("child_exited", slot="worker-2", child_pid=added),
             what="worker-2 exited")
    assert sup.got_term("worker-2", added)
    assert sup.events("supervisor_scaled", direction="down", slot="worker-2")
    # Respawns here happen after 0.1 s; give one the chance to show up, briefly.
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        assert len(sup.events("child_started", slot="worker-2")) == 1, "worker-2 respawned"
        time.sleep(0.05)

    sup.signal(signal.SIGTTOU)  # the last worker stays
    wait_for(lambda: sup.events("supervisor_scaled", direction="down",
                                refused="at least one worker must remain"),
             what="scale-down refused")
    assert not sup.events("child_exited", slot="worker-1")

    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(timeout_s=sup.graceful_timeout_s + 2) == 0
    assert_all_gone(sup)


def test_notify_socket_receives_ready_then_stopping(
    supervise: Callable[..., Supervised], tmp_path: Path
) -> None:
    """Under systemd (NOTIFY_SOCKET set) the arbiter sends READY=1, later STOPPING=1."""
    path = tmp_path / "n.sock"  # AF_UNIX paths are limited to 108 bytes: keep it short
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(5.0)
        sup = supervise([("worker-1", "normal")], env={"NOTIFY_SOCKET": str(path)})

        def receive_until(wanted: str) -> list[str]:
            messages: list[str] = []
            while wanted not in messages:
                messages += server.recv(4096).decode().splitlines()
            return messages

        before_ready = receive_until("READY=1")
        assert any(m.startswith("STATUS=1 of 1") for m in before_ready)
        sup.wait_up(["worker-1"])
        sup.signal(signal.SIGTERM)
        receive_until("STOPPING=1")
        assert sup.wait_exit(timeout_s=sup.graceful_timeout_s + 2) == 0
    assert_all_gone(sup)

"""Pure pieces of the supervisor: respawn backoff, exit-status decoding, sd_notify, lifecycle."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hookline.shared.process import lifecycle
from hookline.supervisor import sdnotify
from hookline.supervisor.arbiter import Arbiter
from hookline.supervisor.child_exits import describe_exit, respawn_delay_s
from hookline.supervisor.children import ChildSpec


def _status_of(code: str) -> int:
    """Run `code` in a child Python and return its raw waitpid status."""
    proc = subprocess.Popen([sys.executable, "-c", code])
    _, status = os.waitpid(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return status


# ------------------------------------------------------------------ respawn_delay_s

@pytest.mark.parametrize(
    ("failures", "expected_s"),
    [(0, 0.0), (1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (7, 30.0), (1000, 30.0)],
)
def test_respawn_delay_doubles_from_base_up_to_cap(failures: int, expected_s: float) -> None:
    """The delay is base * 2**(failures-1), capped; no failure means no delay."""
    assert respawn_delay_s(failures, base_s=0.5, cap_s=30.0) == expected_s


def test_respawn_delay_never_exceeds_cap_for_huge_counts() -> None:
    """A very long crash loop does not overflow the float computation."""
    assert respawn_delay_s(10**6, base_s=0.5, cap_s=30.0) == 30.0


def test_respawn_delay_rejects_negative_failures() -> None:
    """A negative failure count is a programming error."""
    with pytest.raises(ValueError, match="consecutive_failures"):
        respawn_delay_s(-1, base_s=0.5, cap_s=30.0)


# -------------------------------------------------------------------- describe_exit

def test_describe_exit_normal_exit_gives_exit_code() -> None:
    """A child that called exit(n) is described by its exit code only."""
    assert describe_exit(_status_of("raise SystemExit(3)")) == {"exit_code": 3}
    assert describe_exit(_status_of("pass")) == {"exit_code": 0}


def test_describe_exit_signal_gives_signal_name() -> None:
    """A child killed by SIGTERM is described by the signal's name, with no hint."""
    status = _status_of("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert describe_exit(status) == {"signal": "SIGTERM"}


def test_describe_exit_unexplained_sigkill_hints_at_oom() -> None:
    """A SIGKILL the supervisor did not send is most likely the kernel's OOM killer."""
    status = _status_of("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert describe_exit(status) == {"signal": "SIGKILL", "hint": "killed: out of memory?"}


def test_describe_exit_sigkill_sent_by_supervisor_has_no_hint() -> None:
    """After a graceful-stop timeout the supervisor's own SIGKILL is not blamed on memory."""
    status = _status_of("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert describe_exit(status, killed_by_supervisor=True) == {"signal": "SIGKILL"}


def test_describe_exit_synthetic_statuses() -> None:
    """Statuses built by hand decode the same way (exit 1; signal 9; stopped is opaque)."""
    assert describe_exit(1 << 8) == {"exit_code": 1}
    assert describe_exit(signal.SIGKILL)["signal"] == "SIGKILL"
    stopped = (signal.SIGSTOP << 8) | 0x7F
    assert describe_exit(stopped) == {"status": stopped}


# ------------------------------------------------------------------------ the class

def test_arbiter_rejects_duplicate_slots() -> None:
    """Two specs with the same slot name would make pid -> slot ambiguous."""
    spec = ChildSpec(slot="worker-1", argv=(sys.executable, "-c", "pass"), env=None)
    with pytest.raises(ValueError, match="unique"):
        Arbiter([spec, spec])


# ------------------------------------------------------------------------- sdnotify

def test_notify_without_socket_returns_false(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside systemd notify() is a no-op that says so."""
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sdnotify.notify("READY=1") is False


def test_notify_sends_one_datagram_to_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """A NOTIFY_SOCKET starting with "@" names Linux's abstract namespace."""
    name = f"hookline-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(2.0)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert sdnotify.notify("READY=1\nSTATUS=ok") is True
        assert server.recv(4096) == b"READY=1\nSTATUS=ok"


def test_notify_to_missing_socket_returns_false(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A stale NOTIFY_SOCKET path is reported, not raised."""
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "gone.sock"))
    assert sdnotify.notify("READY=1") is False


@pytest.mark.parametrize(
    ("usec", "pid_offset", "expected_s"),
    [("2000000", 0, 2.0), (None, 0, None), ("junk", 0, None), ("0", 0, None),
     ("2000000", 1, None)],
)
def test_watchdog_interval_reads_usec_for_this_pid(
    monkeypatch: pytest.MonkeyPatch, usec: str | None, pid_offset: int, expected_s: float | None
) -> None:
    """WATCHDOG_USEC applies only when set, positive, and meant for this process."""
    if usec is None:
        monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    else:
        monkeypatch.setenv("WATCHDOG_USEC", usec)
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + pid_offset))
    assert sdnotify.watchdog_interval_s() == expected_s


# ------------------------------------------------------------------------ lifecycle

async def test_watch_parent_sets_stop_when_parent_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A change of getppid() (re-parented to init) means the supervisor died: stop."""
    parents = iter([1000, 1000, 1])
    monkeypatch.setattr(lifecycle.os, "getppid", lambda: next(parents, 1))
    stop = asyncio.Event()
    await asyncio.wait_for(lifecycle.watch_parent(stop, interval_s=0.01), timeout=2.0)
    assert stop.is_set()


async def test_watch_parent_returns_when_stopped_by_someone_else() -> None:
    """The watcher does not outlive a stop requested elsewhere."""
    stop = asyncio.Event()
    task = asyncio.create_task(lifecycle.watch_parent(stop, interval_s=10.0))
    await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(task, timeout=1.0)


async def test_install_stop_signals_sets_event_on_sigterm() -> None:
    """SIGTERM only sets the stop event; the process keeps running."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    lifecycle.install_stop_signals(loop, stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), timeout=2.0)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        loop.remove_signal_handler(signal.SIGINT)


def test_boot_error_exit_is_three() -> None:
    """The reserved "cannot boot" exit code is part of the parent/child contract."""
    assert lifecycle.BOOT_ERROR_EXIT == 3

"""`harness.stop_processes`: real child processes are stopped together, each given its grace
before SIGKILL, and their waits overlap."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from hookline.rehearsal.harness import stop_processes

# Prints a line once its SIGTERM handling is set up, then sleeps.
_CHILD = """
import signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("up", flush=True)
time.sleep(60)
"""


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The children a test starts (_child); killed if still running, pipes closed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _child(started: list[subprocess.Popen[bytes]], mode: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, mode], stdout=subprocess.PIPE)
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    return proc


def test_each_child_gets_its_grace_and_the_waits_overlap(children):
    procs = [_child(children, "ignore"), _child(children, "obey"), _child(children, "ignore")]
    grace_s = 1.0
    started = time.monotonic()
    stop_processes(procs, grace_s)
    took_s = time.monotonic() - started
    assert [p.returncode for p in procs] == [-signal.SIGKILL, -signal.SIGTERM, -signal.SIGKILL]
    # Both SIGTERM-ignoring children waited out one shared grace, not one each (2 s).
    assert grace_s <= took_s < 2 * grace_s - 0.2, took_s


def test_children_already_ended_are_left_alone(children):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    running = _child(children, "obey")
    stop_processes([ended, running], 5.0)
    assert ended.returncode == 0 and running.returncode == -signal.SIGTERM

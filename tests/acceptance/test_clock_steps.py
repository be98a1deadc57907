"""The supervisor's liveness check under wall-clock steps, over real OS processes.

A stepped wall clock is simulated per child: each child stamps its heartbeat file with its own
wall time plus an offset it reads from a file before every beat, so the test can make a
child's heartbeats look an hour ahead of the supervisor's clock, or an hour behind (which is
what the supervisor sees right after its host's clock is stepped forward by an hour), while
the child keeps beating. A live child must never be aborted; a stopped one must still be
found hung within the timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 1.5
HOUR_S = 3600.0

# A child that heartbeats every 0.2 s with mtime = its wall time + the offset in `offset_file`.
CHILD = r"""
import os, sys, time
heartbeat, offset_file = sys.argv[1:3]
parent = os.getppid()
while os.getppid() == parent:
    stamp = time.time() + float(open(offset_file).read())
    os.utime(heartbeat, (stamp, stamp))
    time.sleep(0.2)
"""

DRIVER = r"""
import json, sys
from hookline.shared.logs import configure_logging
from hookline.supervisor.arbiter import Arbiter
from hookline.supervisor.children import ChildSpec
cfg = json.loads(sys.argv[1])
configure_logging("supervisor")
specs = [ChildSpec(slot=slot, argv=(sys.executable, "-c", cfg["child"], beat, cfg["offset"]),
                   heartbeat_file=beat) for slot, beat in cfg["children"]]
sys.exit(Arbiter(specs, heartbeat_timeout_s=cfg["timeout_s"], abort_grace_s=0.5,
                 respawn_base_s=0.1, graceful_timeout_s=2.0).run())
"""


class Liveness:
    """An arbiter driver over two heartbeating children and the knob that skews their clocks."""

    def __init__(self, tmp_path: Path) -> None:
        self.offset_file = tmp_path / "offset"
        self.set_offset(0.0)
        self.log_path = tmp_path / "arbiter.log"
        children = [(slot, str(tmp_path / f"{slot}.heartbeat")) for slot in ("ingest", "worker-1")]
        cfg = {"child": CHILD, "offset": str(self.offset_file), "children": children,
               "timeout_s": TIMEOUT_S}
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(cfg)],
                                         stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONPATH": str(REPO)})

    def set_offset(self, offset_s: float) -> None:
        """Make every child stamp its heartbeats `offset_s` seconds off the wall clock."""
        tmp = self.offset_file.with_suffix(".tmp")
        tmp.write_text(str(offset_s))
        os.replace(tmp, self.offset_file)

    def events(self, name: str, **match: Any) -> list[dict[str, Any]]:
        """The arbiter's log lines with event `name` and the given field values."""
        records = [json.loads(line) for line in self.log_path.read_text().splitlines()
                   if line.startswith("{")]
        return [r for r in records
                if r.get("event") == name and all(r.get(k) == v for k, v in match.items())]

    def pid_of(self, slot: str) -> int:
        """The pid of the first child started in `slot`."""
        wait_for(lambda: self.events("child_started", slot=slot), f"{slot} started")
        return int(self.events("child_started", slot=slot)[0]["child_pid"])

    def stop(self) -> None:
        """Stop the arbiter (and so its children)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(predicate: Any, what: str, timeout_s: float = 15.0) -> Any:
    """Poll `predicate` every 50 ms until truthy; fail after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture
def liveness(tmp_path: Path) -> Iterator[Liveness]:
    """A running arbiter over two heartbeating children; stopped after the test."""
    live = Liveness(tmp_path)
    yield live
    live.stop()


def test_heartbeats_stamped_an_hour_off_never_abort_a_live_child(liveness: Liveness) -> None:
    """Heartbeats an hour behind (the supervisor's clock stepped +1 h) and then an hour ahead
    (stepped -1 h) are still heartbeats: over two timeouts of each, no child is aborted."""
    pids = {slot: liveness.pid_of(slot) for slot in ("ingest", "worker-1")}
    for offset_s in (-HOUR_S, HOUR_S, 0.0, -HOUR_S):
        liveness.set_offset(offset_s)
        time.sleep(2 * TIMEOUT_S)
    assert liveness.events("child_hung") == []
    assert [r["child_pid"] for r in liveness.events("child_started")] == list(pids.values())


@pytest.mark.parametrize("offset_s", [HOUR_S, -HOUR_S])
def test_a_stopped_child_is_found_hung_whatever_its_stamps(liveness: Liveness,
                                                           offset_s: float) -> None:
    """A child that stops beating (SIGSTOP) is aborted within the timeout, whether its last
    stamps were an hour ahead of the supervisor's clock or an hour behind; the other is not."""
    liveness.set_offset(offset_s)
    hung_pid = liveness.pid_of("worker-1")
    time.sleep(2 * TIMEOUT_S)  # beats with the skewed stamps are seen
    stopped_at = time.monotonic()
    os.kill(hung_pid, signal.SIGSTOP)
    wait_for(lambda: liveness.events("child_hung", child_pid=hung_pid), "the hang detected")
    # Detected once the timeout ran out since the last beat (at most 0.2 s before the stop),
    # not at the first look; the upper bound is generous.
    assert TIMEOUT_S - 0.25 <= time.monotonic() - stopped_at < TIMEOUT_S + 10
    wait_for(lambda: len(liveness.events("child_started", slot="worker-1")) == 2, "respawn")
    assert liveness.events("child_hung", slot="ingest") == []

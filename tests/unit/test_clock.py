"""Wall-clock step detection with injected clocks (shared/process/clock.py)."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from hookline.shared.logs import configure_logging
from hookline.shared.process.clock import CLOCK_STEP_THRESHOLD_S, ClockStepDetector, watch_clock


class Clocks:
    """A wall and a monotonic clock the test advances by hand."""

    def __init__(self) -> None:
        self.wall_s = 1_800_000_000.0
        self.mono_s = 1_000.0

    def tick(self, elapsed_s: float, wall_step_s: float = 0.0) -> None:
        """Let `elapsed_s` pass, and step the wall clock by `wall_step_s` on top."""
        self.mono_s += elapsed_s
        self.wall_s += elapsed_s + wall_step_s


@pytest.fixture
def log() -> io.StringIO:
    out = io.StringIO()
    configure_logging("test", stream=out)
    return out


def steps_logged(out: io.StringIO) -> list[float]:
    """The `step_s` of every `clock_step` line logged so far."""
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return [line["step_s"] for line in lines if line["event"] == "clock_step"]


def test_steady_clocks_report_no_step(log: io.StringIO) -> None:
    """Clocks advancing together (even with NTP-like slew and a long pause) are no step."""
    clocks = Clocks()
    detector = ClockStepDetector(wall=lambda: clocks.wall_s, monotonic=lambda: clocks.mono_s)
    for _ in range(100):
        clocks.tick(1.0, wall_step_s=0.0005)  # 500 ppm, the most NTP slews
        assert detector.check() is None
    clocks.tick(600.0)  # the process was suspended for ten minutes
    assert detector.check() is None
    assert steps_logged(log) == []


@pytest.mark.parametrize("step_s", [3600.0, -3600.0, 1.5, -1.5])
def test_a_step_is_logged_once_with_its_signed_size(log: io.StringIO, step_s: float) -> None:
    """A wall step forward or back is reported once, signed, then the detector is quiet."""
    clocks = Clocks()
    detector = ClockStepDetector(wall=lambda: clocks.wall_s, monotonic=lambda: clocks.mono_s)
    clocks.tick(1.0, wall_step_s=step_s)
    assert detector.check() == pytest.approx(step_s)
    clocks.tick(1.0)
    assert detector.check() is None
    assert steps_logged(log) == [pytest.approx(step_s)]


def test_threshold_is_one_second_and_configurable(log: io.StringIO) -> None:
    """At most the threshold is no step; a smaller threshold sees smaller steps."""
    assert CLOCK_STEP_THRESHOLD_S == 1.0
    clocks = Clocks()
    detector = ClockStepDetector(wall=lambda: clocks.wall_s, monotonic=lambda: clocks.mono_s)
    clocks.tick(1.0, wall_step_s=0.9)
    assert detector.check() is None
    fine = ClockStepDetector(0.1, wall=lambda: clocks.wall_s, monotonic=lambda: clocks.mono_s)
    clocks.tick(1.0, wall_step_s=0.2)
    assert fine.check() == pytest.approx(0.2)


async def test_watch_clock_logs_steps_until_stopped(log: io.StringIO) -> None:
    """The children's task checks on its interval and returns once stop is set."""
    clocks = Clocks()
    detector = ClockStepDetector(wall=lambda: clocks.wall_s, monotonic=lambda: clocks.mono_s)
    stop = asyncio.Event()
    task = asyncio.create_task(watch_clock(stop, interval_s=0.01, detector=detector))
    clocks.tick(0.0, wall_step_s=-7200.0)
    for _ in range(500):
        if steps_logged(log):
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert steps_logged(log) == [pytest.approx(-7200.0)]

"""Wall-clock step detection, shared by the supervisor (synchronous) and its children (asyncio).

The wall clock (`time.time()`, CLOCK_REALTIME) can be stepped at any moment: NTP correcting a
large offset, `date -s`, a VM resumed from a snapshot. The monotonic clock (`time.monotonic()`,
CLOCK_MONOTONIC) is never stepped; NTP only slews it, at most 500 ppm. Over one interval both
advance by the same amount up to that slew, so when their advances differ by more than
:data:`CLOCK_STEP_THRESHOLD_S` the wall clock was stepped by about the difference, and
`clock_step` is logged (warning) with `step_s`: the signed size, positive when the wall clock
jumped forward.

Nothing in hookline's timing depends on the wall clock's continuity (liveness and the SQLite
store's leases and backoff run on the monotonic clock); the log line is there so an operator can
tie odd timestamps in logs and the dashboard to the moment the clock moved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from hookline.shared.logs import get_logger
from hookline.shared.process.lifecycle import stopped_within

CLOCK_STEP_THRESHOLD_S = 1.0
"""A difference between wall and monotonic advances beyond this, in seconds, is a step.

Slewing moves the two clocks apart by at most 0.5 ms per second, and a process that was not
scheduled for a while sees both clocks advance alike, so 1 s is never reached without a step.
"""

CLOCK_CHECK_INTERVAL_S = 1.0
"""How often the children's :func:`watch_clock` compares the clocks, in seconds."""


class ClockStepDetector:
    """Compare the advance of a wall clock with that of a monotonic clock between two checks.

    Stateful and synchronous: call :meth:`check` periodically (the supervisor from its loop,
    a child through :func:`watch_clock`). Clocks are injectable for tests.

    Args:
        threshold_s: a difference of advances larger than this, in seconds, is a step.
        wall: wall clock, unix seconds.
        monotonic: monotonic clock, seconds.
    """

    def __init__(self, threshold_s: float = CLOCK_STEP_THRESHOLD_S, *,
                 wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.threshold_s = threshold_s
        self._wall = wall
        self._monotonic = monotonic
        self._last_wall = wall()
        self._last_monotonic = monotonic()

    def check(self) -> float | None:
        """Compare both clocks' advance since the previous check (or construction).

        Returns:
            The step in seconds (signed: positive = the wall clock jumped forward) when the
            advances differ by more than `threshold_s`, and `clock_step` has been logged;
            else None.
        """
        wall, mono = self._wall(), self._monotonic()
        step_s = (wall - self._last_wall) - (mono - self._last_monotonic)
        self._last_wall, self._last_monotonic = wall, mono
        if abs(step_s) <= self.threshold_s:
            return None
        get_logger().warning("clock_step", step_s=round(step_s, 3),
                             wall_now=round(wall, 3), threshold_s=self.threshold_s)
        return step_s


async def watch_clock(stop: asyncio.Event, interval_s: float = CLOCK_CHECK_INTERVAL_S,
                      detector: ClockStepDetector | None = None) -> None:
    """Log `clock_step` whenever the wall clock is stepped, until `stop` is set.

    Runs as a task on a child's event loop, beside
    :func:`hookline.shared.process.lifecycle.watch_parent`.

    Args:
        stop: the process's stop event; the task returns once it is set.
        interval_s: seconds between checks.
        detector: the detector to use (tests inject clocks); a fresh one when None.
    """
    detector = detector or ClockStepDetector()
    while not stop.is_set():
        await stopped_within(stop, interval_s)
        detector.check()

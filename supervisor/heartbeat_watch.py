"""How the supervisor judges a child's heartbeat without trusting the wall clock.

The child touches its heartbeat file from its event loop; the supervisor never compares that
mtime with the wall clock (which NTP or `date -s` can step). It notes, on its own monotonic
clock, when it last saw the mtime change, and the heartbeat's age is the monotonic time since.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(slots=True)
class HeartbeatWatch:
    """One child's heartbeat file as the supervisor has seen it.

    Attributes:
        path: the heartbeat file.
        seen_at: time.monotonic() when its mtime was last seen to change (at first: spawn).
        mtime_ns: that mtime, nanoseconds; None before the first look or while unreadable.
    """

    path: str
    seen_at: float
    mtime_ns: int | None = None

    def age_s(self, now: float) -> float:
        """Monotonic seconds since the mtime was last seen to change, looking at it now.

        Any change counts, forward or backward: a child touching its file after a wall-clock
        step back sets an older mtime, which is still a heartbeat. A missing or unreadable
        file is no heartbeat.

        Args:
            now: time.monotonic() now.
        """
        try:
            mtime_ns: int | None = os.stat(self.path).st_mtime_ns
        except OSError:
            mtime_ns = None
        if mtime_ns is not None and mtime_ns != self.mtime_ns:
            self.mtime_ns = mtime_ns
            self.seen_at = now
        return now - self.seen_at

"""How signals reach the arbiter's loop: queued by the handler, woken by a self-pipe.

A Python signal handler runs between bytecodes of whatever the main thread was doing, so
the handler only queues the signal number; :func:`signal.set_wakeup_fd` makes the C-level
handler write a byte to a pipe, so a signal arriving just before ``select()`` still wakes
the loop (the classic self-pipe race). The loop then takes the queued signals in order.
Main thread only (signal handlers and ``set_wakeup_fd`` require it).
"""

from __future__ import annotations

import collections
import os
import select
import signal
from collections.abc import Iterable
from types import FrameType
from typing import Any


class SignalPipe:
    """The handled signals' queue and the pipe that wakes the loop when one arrives."""

    def __init__(self, signals: Iterable[signal.Signals]) -> None:
        """Prepare; nothing is installed before :meth:`install`.

        Args:
            signals: the signals to handle (queued, then taken by :meth:`pop`).
        """
        self._handled = tuple(signals)
        self._queue: collections.deque[int] = collections.deque()
        self._wake_r = -1
        self._wake_w = -1
        self._old: dict[int, Any] = {}

    def install(self) -> None:
        """Open the pipe and install the handlers (the previous ones are kept for
        :meth:`restore`)."""
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._old = {}
        for signum in self._handled:
            self._old[signum] = signal.signal(signum, self._record)
        # The C-level handler writes a byte to the pipe, so a signal arriving just before
        # select() still wakes it (the classic self-pipe race).
        self._old[-1] = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)

    def restore(self) -> None:
        """Put the previous handlers and wakeup fd back and close the pipe."""
        signal.set_wakeup_fd(self._old.pop(-1))
        for signum, handler in self._old.items():
            signal.signal(signum, handler)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        """The only code run by the signal handler: queue the signal for the main loop."""
        # One pending SIGCHLD is enough: a single reap collects every exited child.
        if signum != signal.SIGCHLD or signum not in self._queue:
            self._queue.append(signum)

    def pop(self) -> int | None:
        """The oldest queued signal number, or None when none is queued."""
        return self._queue.popleft() if self._queue else None

    def clear(self) -> None:
        """Forget every queued signal."""
        self._queue.clear()

    def sleep(self, timeout_s: float) -> None:
        """Sleep up to `timeout_s` seconds, waking early on any handled signal."""
        ready, _, _ = select.select([self._wake_r], [], [], timeout_s)
        if ready:
            try:
                while os.read(self._wake_r, 4096):
                    pass
            except BlockingIOError:
                pass  # drained

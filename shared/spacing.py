"""Commit spacing under a trickle, shared by ingest's group commit (ingest/batcher.py) and a
worker's writer (workers/writer.py): a write that follows the previous one closely waits
until a least interval after it has passed, so that one transaction carries several items
and its fixed cost is paid less often; a batch filled enough is written at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

FILLED_ENOUGH = 16
"""A batch of this many items is written without waiting out the spacing: it spreads a
transaction's fixed cost well enough, and waiting for more would only add latency."""


async def wait_out_spacing(wake: asyncio.Event, remaining_s: Callable[[], float],
                           done: Callable[[], bool]) -> None:
    """Wait until `remaining_s()` (seconds, read again after each wake-up) is no longer
    positive or `done()` is true. Whoever can end the wait early (a batch filling up, a
    stop) sets `wake`; it is cleared before each wait."""
    while not done() and (wait_s := remaining_s()) > 0:
        wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), wait_s)

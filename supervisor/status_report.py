"""What the supervisor tells others about itself: the JSON view kept in its status file (for
``GET /readyz`` and ``hookline scale``) and the one-line ``STATUS=`` it sends systemd.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hookline.supervisor.children import WORKER_SLOT, Child


def status_view(children: Mapping[int, Child], *, unhealthy: frozenset[str], stopping: bool,
                workers_wanted: int) -> dict[str, Any]:
    """The supervisor's view, as its status file holds it.

    Args:
        children: pid -> running child.
        unhealthy: slots whose child is hung (stale heartbeat).
        stopping: whether the service is stopping.
        workers_wanted: how many worker slots are wanted.

    Returns:
        ``{"pid", "stopping", "workers_wanted", "workers_alive", "workers_healthy",
        "slots": {slot: {"pid", "healthy"}}, "updated_at"}`` (unix seconds); a retiring
        child is not healthy.
    """
    slots = {child.slot: {"pid": pid, "healthy": child.slot not in unhealthy
                          and child.retire_by is None}
             for pid, child in children.items()}
    workers = [s for s in slots if WORKER_SLOT.fullmatch(s)]
    return {"pid": os.getpid(), "stopping": stopping,
            "workers_wanted": workers_wanted,
            "workers_alive": len(workers),
            "workers_healthy": sum(1 for s in workers if slots[s]["healthy"]),
            "slots": slots, "updated_at": time.time()}


def status_line(*, running: int, wanted: int, workers_wanted: int,
                waiting_for: Sequence[str] | None, not_ready_reason: str | None) -> str:
    """systemd's ``STATUS=`` text (without the prefix).

    Args:
        running: children running.
        wanted: slots wanted.
        workers_wanted: worker slots wanted.
        waiting_for: initial slots not ready yet; None once every one was.
        not_ready_reason: why the service cannot be ready, or None.

    Returns:
        e.g. ``3 of 3 children running, 2 workers wanted; starting, waiting for ingest``.
    """
    waiting = "" if waiting_for is None else f"; starting, waiting for {', '.join(waiting_for)}"
    if not_ready_reason is not None:
        waiting += f"; not ready: {not_ready_reason}"
    return (f"{running} of {wanted} children running, {workers_wanted} workers wanted"
            f"{waiting}")

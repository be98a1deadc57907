"""The supervisor's own figures for /metrics: children wanted and alive, restarts, heartbeats,
clock steps.

The supervisor serves no HTTP; like every child it leaves a snapshot in the runtime folder
(`supervisor.metrics.json`, shared/process/metrics_file.py) that ingest's /metrics reads. The
arbiter calls :meth:`SupervisorMetrics.restarted` and :meth:`clock_stepped` as things happen
(memory only) and :meth:`write_if_due` from its loop, which writes at most every
:data:`~hookline.shared.process.metrics_file.SNAPSHOT_INTERVAL_S`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hookline.shared.metrics_catalog import (
    CHILD_RESTARTS,
    CHILDREN_ALIVE,
    CHILDREN_WANTED,
    CLOCK_STEPS,
    HEARTBEAT_AGE_SECONDS,
)
from hookline.shared.process.lifecycle import TRANSIENT_EXIT
from hookline.shared.process.metrics_file import SNAPSHOT_INTERVAL_S, ProcessMetrics, SnapshotWriter

SLOT = "supervisor"
_WORKER_SLOT = re.compile(r"worker-[1-9][0-9]*")
_INGEST_SLOT = re.compile(r"ingest(?:-[2-9]|-[1-9][0-9]+)?")


def slot_kind(slot: str) -> str:
    """`worker` for a worker slot, `ingest` for an ingest slot (`ingest`, `ingest-2`, ...),
    else the slot's own name."""
    if _WORKER_SLOT.fullmatch(slot):
        return "worker"
    return "ingest" if _INGEST_SLOT.fullmatch(slot) else slot


def restart_cause(exit_fields: Mapping[str, Any], *, hung: bool) -> str:
    """Why a child the supervisor respawns ended, as one bounded word.

    Args:
        exit_fields: :func:`hookline.supervisor.child_exits.describe_exit` of its status.
        hung: the supervisor killed it for a stale heartbeat.

    Returns:
        `hung`, `signal` (killed by a signal it was not sent by us), `transient` (exit 75: the
        database was away), `exit` (exit 0 while not asked to stop) or `crash` (any other).
    """
    if hung:
        return "hung"
    if "signal" in exit_fields:
        return "signal"
    code = exit_fields.get("exit_code")
    if code == TRANSIENT_EXIT:
        return "transient"
    return "exit" if code == 0 else "crash"


class SupervisorMetrics:
    """What the supervisor counts, and its snapshot file.

    Args:
        folder: the runtime folder; None keeps no snapshot (an arbiter run inside a test).
    """

    def __init__(self, folder: Path | None) -> None:
        self.metrics = ProcessMetrics()
        self.writer = SnapshotWriter(folder, SLOT, self.metrics)
        self._due = 0.0
        # Present from the start (at 0), so increase() sees the first step.
        self.metrics.inc(CLOCK_STEPS, amount=0.0)

    def restarted(self, slot: str, exit_fields: Mapping[str, Any], *, hung: bool) -> None:
        """Count one unexpected exit of `slot` that will be respawned."""
        self.metrics.inc(CHILD_RESTARTS, (slot, restart_cause(exit_fields, hung=hung)))

    def clock_stepped(self) -> None:
        """Count one wall-clock step."""
        self.metrics.inc(CLOCK_STEPS)

    def due(self, now: float) -> bool:
        """Whether a snapshot is due at monotonic time `now`."""
        return now >= self._due

    def write(self, now: float, *, wanted: Iterable[str], alive: Iterable[str],
              heartbeat_ages_s: Mapping[str, float]) -> None:
        """Set the gauges and write the snapshot.

        Args:
            now: time.monotonic() now.
            wanted: the slots the supervisor keeps running.
            alive: the slots with a live process (a retiring one included).
            heartbeat_ages_s: seconds since each watched child last heartbeat.
        """
        self._due = now + SNAPSHOT_INTERVAL_S
        for family, slots in ((CHILDREN_WANTED, list(wanted)), (CHILDREN_ALIVE, list(alive))):
            self.metrics.clear(family)
            counts: dict[str, int] = {"ingest": 0, "worker": 0}
            for slot in slots:
                counts[slot_kind(slot)] = counts.get(slot_kind(slot), 0) + 1
            for kind, n in counts.items():
                self.metrics.set(family, (kind,), n)
        self.metrics.clear(HEARTBEAT_AGE_SECONDS)
        for slot, age_s in heartbeat_ages_s.items():
            self.metrics.set(HEARTBEAT_AGE_SECONDS, (slot,), round(age_s, 3))
        self.writer.write()

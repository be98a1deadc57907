"""The supervisor's children: what a slot runs (:class:`ChildSpec`), the bookkeeping of a
running one (:class:`Child`), how one is started, and how worker slots are named.

Worker slots are named ``worker-<n>`` (n >= 1): scaling up takes the lowest free number,
scaling down retires the highest.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from hookline.shared.process.lifecycle import touch
from hookline.supervisor import sdnotify
from hookline.supervisor.heartbeat_watch import HeartbeatWatch
from hookline.supervisor.readiness import Readiness

WORKER_SLOT = re.compile(r"worker-([1-9][0-9]*)")


def worker_slot(number: int) -> str:
    """The slot of worker `number` (1-based): `worker-N`."""
    return f"worker-{number}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChildSpec:
    """What to run in one slot.

    Attributes:
        slot: stable name of the slot, e.g. ``ingest`` or ``worker-1``; logged on every line.
        argv: full command, e.g.
            ``(sys.executable, "-P", "-m", "hookline.workers", "--slot", "worker-1")``.
        env: variables set on top of the supervisor's environment; None adds nothing.
            systemd's `NOTIFY_SOCKET`/`WATCHDOG_*` are never passed on.
        heartbeat_file: a file the child touches from its event loop; the arbiter touches it
            at spawn and treats the child as hung once its mtime has not changed for
            ``heartbeat_timeout_s`` of monotonic time. None: liveness is not checked.
        ready_file: where the child writes its pid once it serves (supervisor/readiness.py);
            ``READY=1`` waits for it. None: the slot counts as ready once started.
    """

    slot: str
    argv: tuple[str, ...]
    env: Mapping[str, str] | None = None
    heartbeat_file: str | None = None
    ready_file: str | None = None  # the child writes its pid here once it serves


@dataclasses.dataclass(slots=True)
class Child:
    """A running child process (mutable bookkeeping, kept by the arbiter)."""

    slot: str
    popen: subprocess.Popen[bytes]
    started_at: float  # time.monotonic()
    retire_by: float | None = None  # monotonic deadline for SIGKILL once retired by SIGTTOU
    killed_by_supervisor: bool = False
    heartbeat: HeartbeatWatch | None = None  # None: liveness is not checked
    aborted_at: float | None = None  # monotonic time SIGABRT was sent for a stale heartbeat


def start_child(spec: ChildSpec) -> Child:
    """Start the process of `spec`: a fresh heartbeat, a cleared readiness marker, then exec.

    Args:
        spec: the slot to start.

    Returns:
        The running child; its heartbeat baseline is the mtime at spawn.

    Raises:
        OSError: the process could not be started (fork or exec failed).
    """
    if spec.heartbeat_file is not None:
        # A fresh mtime gives the new child heartbeat_timeout_s to boot.
        touch(Path(spec.heartbeat_file))
    if spec.ready_file is not None:
        Readiness.clear(spec.ready_file)
    popen = subprocess.Popen(spec.argv, env=child_env(spec), close_fds=True)
    started_at = time.monotonic()
    child = Child(slot=spec.slot, popen=popen, started_at=started_at)
    if spec.heartbeat_file is not None:
        child.heartbeat = HeartbeatWatch(spec.heartbeat_file, seen_at=started_at)
        child.heartbeat.age_s(started_at)  # the mtime at spawn is the baseline
    return child


def child_env(spec: ChildSpec) -> dict[str, str]:
    """The environment of `spec`'s child: the supervisor's, without systemd's notify and
    watchdog variables, plus `spec.env`."""
    env = dict(os.environ)
    for name in sdnotify.SUPERVISOR_ONLY_ENV:
        env.pop(name, None)
    env.update(spec.env or {})
    return env


def worker_slots(slots: Iterable[str]) -> list[str]:
    """The worker slots among `slots`, lowest number first."""
    numbered = [(int(m.group(1)), slot) for slot in slots
                if (m := WORKER_SLOT.fullmatch(slot))]
    return [slot for _, slot in sorted(numbered)]


def next_worker_number(taken: Iterable[str]) -> int:
    """The lowest n >= 1 whose slot ``worker-<n>`` is not in `taken`."""
    used = set(taken)
    number = 1
    while worker_slot(number) in used:
        number += 1
    return number

"""Keeping a folder of snapshots: listing them, rotating all but the newest K away, and
the periodic schedule of `hookline backup --every`, which never removes a good snapshot
before a newer good one exists.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookline.shared.logs import get_logger
from hookline.shared.store.backup import take_snapshot
from hookline.shared.store.backup_format import SNAPSHOT_NAME, BackupError, Snapshot, fsync_dir


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """What a periodic run did: snapshots taken, failures reported, snapshots rotated away."""

    taken: tuple[Snapshot, ...] = ()
    failures: tuple[str, ...] = ()
    removed: tuple[Path, ...] = field(default=())


def list_snapshots(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Snapshots at final names in `out_dir`, oldest first."""
    found = []
    for entry in Path(out_dir).iterdir():
        match = SNAPSHOT_NAME.match(entry.name)
        if match and entry.is_file():
            found.append(((match.group(1), int(match.group(2) or 0)), entry))
    return [path for _, path in sorted(found)]


def rotate(out_dir: str | os.PathLike[str], keep: int) -> list[Path]:
    """Delete all but the newest `keep` snapshots (and their manifests) in `out_dir`.

    Only files named like snapshots are touched. Returns the deleted snapshot paths.

    Raises:
        BackupError: `keep` is below 1.
    """
    if keep < 1:
        raise BackupError(f"keep must be at least 1, not {keep}")
    snapshots = list_snapshots(out_dir)
    removed = snapshots[:-keep]
    for path in removed:
        for victim in (path.with_suffix(".json"), path):
            with contextlib.suppress(FileNotFoundError):
                victim.unlink()
    if removed:
        fsync_dir(Path(out_dir))
        get_logger().info("backup_rotated", removed=[p.name for p in removed], kept=keep)
    return removed


def run_schedule(db_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 every_s: float, keep: int, count: int | None = None,
                 stop: threading.Event | None = None,
                 on_snapshot: Callable[[Snapshot | BackupError], None] | None = None,
                 **snapshot_kwargs: Any) -> ScheduleResult:
    """Take a snapshot every `every_s` seconds, keeping the newest `keep`.

    A failed snapshot is reported (log event `backup_failed`, `on_snapshot(error)`) and
    does NOT rotate: good snapshots are only ever removed after a new good one exists.

    Args:
        db_path: the live database.
        out_dir: the snapshot folder.
        every_s: interval between the starts of two snapshots, seconds (> 0).
        keep: how many snapshots to keep (>= 1).
        count: stop after this many attempts; None runs until `stop` is set.
        stop: set it to end the schedule after the current snapshot.
        on_snapshot: called after each attempt with the Snapshot or the BackupError.
        **snapshot_kwargs: passed to :func:`take_snapshot`.

    Returns:
        What was taken, what failed and what was rotated away.

    Raises:
        BackupError: `every_s`, `keep` or `count` is out of range.
    """
    if every_s <= 0:
        raise BackupError(f"--every must be above zero, not {every_s}")
    if keep < 1:
        raise BackupError(f"--keep must be at least 1, not {keep}")
    if count is not None and count < 1:
        raise BackupError(f"--count must be at least 1, not {count}")
    stop = stop if stop is not None else threading.Event()
    taken: list[Snapshot] = []
    failures: list[str] = []
    removed: list[Path] = []
    next_start = time.monotonic()
    attempts = 0
    while not stop.is_set() and (count is None or attempts < count):
        attempts += 1
        try:
            snap = take_snapshot(db_path, out_dir, **snapshot_kwargs)
        except BackupError as exc:
            failures.append(str(exc))
            get_logger().error("backup_failed", reason=str(exc), out=str(out_dir))
            if on_snapshot is not None:
                on_snapshot(exc)
        else:
            taken.append(snap)
            removed += rotate(out_dir, keep)
            if on_snapshot is not None:
                on_snapshot(snap)
        if count is not None and attempts >= count:
            break
        next_start += every_s
        stop.wait(max(0.0, next_start - time.monotonic()))
    return ScheduleResult(tuple(taken), tuple(failures), tuple(removed))

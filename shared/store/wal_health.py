"""Is the SQLite `-wal` file growing without bound, and what can be known about why?

The WAL can only be reset once no reader holds a snapshot older than its end: while any
process keeps a read transaction open (an `sqlite3` shell left in `BEGIN`, a long
`hookline backup`), every commit makes the file longer and ingest's periodic checkpoint
(ingest/maintenance.py) reports busy. SQLite cannot say which connection holds the read, so
when the file is past `wal_degraded_bytes` after a checkpoint, :class:`WalHealth` records
what can be known instead: the checkpoint's result (busy, frames in the log, frames copied
back) and every process that has the database or its `-wal`/`-shm` files open (pid and
command line, read from `/proc/*/fd` on Linux; processes whose descriptors cannot be read
are counted, never silently left out). Hookline's own processes appear too: they keep the
files open all the time, so the holder is among the others, or is a hookline process only
if none are listed.

The SQLite store keeps one WalHealth (shared/store/sqlite.py): its maintenance round (run by
ingest, ingest/maintenance.py) assesses it, and :meth:`hookline.shared.store.Store.health` reports
it: `GET /healthz` shows the state (ingest/health.py), `/metrics` the live file size
(`hookline_sqlite_wal_bytes`, ingest/metrics.py). PostgreSQL has no such file: its health
reports none.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookline.shared.logs import get_logger
from hookline.shared.store.health import Gauge, StoreHealth

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class FileHolder:
    """A process that has the database or one of its WAL files open."""

    pid: int
    cmdline: str  # arguments joined by spaces; "" when the process is gone or a kernel thread
    files: tuple[str, ...]  # which of the database's files it holds (absolute paths)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (for logs and /healthz)."""
        return {"pid": self.pid, "cmdline": self.cmdline, "files": list(self.files),
                "this_process": self.pid == os.getpid()}


@dataclass(frozen=True, slots=True)
class HolderScan:
    """Result of :func:`find_holders`: who has the files open, and what could not be read."""

    holders: tuple[FileHolder, ...]
    uninspected_pids: int  # processes whose fd folder could not be read (other users, gone)
    supported: bool = True  # False where there is no /proc (not Linux): nothing is known


def find_holders(paths: list[str]) -> HolderScan:
    """Every process with one of `paths` open, by scanning `/proc/<pid>/fd` symlinks.

    Args:
        paths: files to look for (compared after resolving symlinks).

    Returns:
        The holders in pid order, and how many processes could not be inspected (no
        permission, or exited during the scan). On a system without `/proc/self/fd` the scan
        is unsupported and empty. Never raises for a process's sake.
    """
    if not (PROC / "self" / "fd").is_dir():
        return HolderScan(holders=(), uninspected_pids=0, supported=False)
    wanted = {os.path.realpath(p) for p in paths}
    holders: list[FileHolder] = []
    uninspected = 0
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:  # another user's process, or gone since the listing
            uninspected += 1
            continue
        held = sorted({link for link in links if link in wanted})
        if held:
            holders.append(FileHolder(pid=int(entry.name), cmdline=_cmdline(entry),
                                      files=tuple(held)))
    holders.sort(key=lambda h: h.pid)
    return HolderScan(holders=tuple(holders), uninspected_pids=uninspected)


def _cmdline(proc_dir: Path) -> str:
    try:
        raw = (proc_dir / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


def wal_file_bytes(db_path: str) -> int:
    """Size of the database's `-wal` file in bytes (0 when it does not exist)."""
    try:
        return os.path.getsize(db_path + "-wal")
    except FileNotFoundError:
        return 0


@dataclass(slots=True)
class WalHealth:
    """The WAL's state as of ingest's last checkpoint round, for `/healthz`.

    Args:
        db_path: the SQLite database file.
        limit_bytes: past this size after a checkpoint the WAL is degraded; 0 turns the
            check off (the size is still exported).
    """

    db_path: str
    limit_bytes: int
    degraded: bool = False
    detail: dict[str, Any] = field(default_factory=dict)
    checked_at: float | None = None  # unix seconds of the last assessment

    def over_limit_now(self) -> bool:
        """Whether the file is past the limit right now (a stat, no checkpoint)."""
        return self.limit_bytes > 0 and wal_file_bytes(self.db_path) > self.limit_bytes

    def assess(self, checkpoint: dict[str, int]) -> None:
        """Judge one checkpoint round's result (see
        :meth:`hookline.shared.store.Store.maintenance`).

        Past the limit: degraded, with the checkpoint's result and the processes holding the
        files, logged as the warning `wal_over_limit` (every round while it lasts). Back under
        it: healthy again, logged once as `wal_back_under_limit`.
        """
        log = get_logger()
        wal_bytes = int(checkpoint.get("wal_bytes", wal_file_bytes(self.db_path)))
        self.checked_at = time.time()
        if self.limit_bytes <= 0 or wal_bytes <= self.limit_bytes:
            if self.degraded:
                log.info("wal_back_under_limit", wal_bytes=wal_bytes,
                         limit_bytes=self.limit_bytes)
            self.degraded, self.detail = False, {}
            return
        log_frames = int(checkpoint.get("log_frames", -1))
        done = int(checkpoint.get("checkpointed_frames", -1))
        scan = find_holders([self.db_path, self.db_path + "-wal", self.db_path + "-shm"])
        self.degraded = True
        self.detail = {
            "wal_bytes": wal_bytes, "limit_bytes": self.limit_bytes,
            "reason": ("a read transaction keeps the WAL from being reset; SQLite cannot name "
                       "the reader: it is one of the processes holding the files"),
            "checkpoint": {"busy": bool(checkpoint.get("busy")), "log_frames": log_frames,
                           "checkpointed_frames": done,
                           "frames_not_checkpointed": (log_frames - done
                                                       if min(log_frames, done) >= 0 else None)},
            "holders": [h.as_dict() for h in scan.holders],
            "uninspected_pids": scan.uninspected_pids,
            "holders_known": scan.supported,
        }
        log.warning("wal_over_limit", **self.detail)

    def health(self) -> StoreHealth:
        """The SQLite store's :class:`StoreHealth`: this check, and the WAL gauges."""
        check = self.report()
        detail = None
        if self.degraded:
            detail = (f"the SQLite WAL is {check['wal_bytes_at_check']} bytes after a "
                      f"checkpoint, past wal_degraded_bytes ({self.limit_bytes}): "
                      f"{check['reason']}")
        return StoreHealth(
            backend="sqlite", wal_bytes=check["wal_bytes"], wal_check=check,
            degraded=self.degraded, detail=detail,
            wal_over_limit=0 < self.limit_bytes < check["wal_bytes"],
            gauges=(Gauge("hookline_sqlite_wal_bytes", "Size of the SQLite -wal file now, bytes.",
                          check["wal_bytes"]),
                    Gauge("hookline_sqlite_wal_limit_bytes",
                          "WAL size past which /healthz says degraded (wal_degraded_bytes; "
                          "0 = off), bytes.", self.limit_bytes)))

    def report(self) -> dict[str, Any]:
        """The `wal` check of `/healthz`: size now, limit, and the diagnosis when degraded."""
        out: dict[str, Any] = {"status": "degraded" if self.degraded else "ok",
                               "wal_bytes": wal_file_bytes(self.db_path),
                               "limit_bytes": self.limit_bytes, "checked_at": self.checked_at}
        if self.degraded:
            out.update({k: v for k, v in self.detail.items() if k not in out})
            out["wal_bytes_at_check"] = self.detail["wal_bytes"]
        return out

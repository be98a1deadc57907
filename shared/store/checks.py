"""Storage that cannot keep hookline's promise is refused when it is opened.

An event answered 2xx must survive a crash and be seen by every process of the service, so
the SQLite database must be one plain file on a local filesystem, in WAL mode, and not
damaged. This module holds the checks, each a small function the store (every open) or the
supervisor (once per `hookline serve`) calls:

- :func:`hookline.shared.db_url.sqlite_path` (the one parser of the `db` setting, used before
  these): the database URL names a plain file every process shares (never `:memory:`, a `file:` URI
  or an empty path);
- :func:`check_database_folder`: the database's folder exists, is a folder, is not
  world-writable and (where the file is to be created) is writable by this user;
- :func:`refuse_network_filesystem`: the database's folder is not on a network or FUSE
  filesystem, where WAL's shared-memory index is unsafe, unless the operator opted in;
- :func:`enable_wal`: `PRAGMA journal_mode = WAL` really switched to WAL;
- :func:`quick_check`: `PRAGMA quick_check` finds no damage (time-bounded).

:func:`storage_preflight` runs the folder, filesystem and journal-mode checks without
creating the database (`hookline serve`, `serve --check`), so a check and a start refuse the
same things with the same exception. PostgreSQL needs none of these; `sqlite_path` gives None
for its URLs.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hookline.shared.db_url import StorageRefused, sqlite_path
from hookline.shared.errors import StoreUnavailable
from hookline.shared.faults import sqlite_fault

MOUNTINFO = "/proc/self/mountinfo"
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "ceph", "glusterfs", "lustre",
    "gpfs", "afs", "ncpfs", "coda", "ocfs2", "gfs2", "beegfs", "orangefs", "pvfs2", "davfs",
})
"""Filesystem types (mountinfo's fstype field) shared over a network or between hosts."""


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of /proc/self/mountinfo: where a filesystem is mounted and its type."""

    mount_point: str
    fstype: str
    source: str


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse /proc/self/mountinfo text (proc(5)); malformed lines are skipped."""
    mounts = []
    for line in text.splitlines():
        # ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 3:
            continue
        mounts.append(Mount(mount_point=_unescape(fields[4]), fstype=fields[dash + 1],
                            source=_unescape(fields[dash + 2])))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding absolute `path`: the longest mount point that is a prefix of it (the
    last one listed wins a tie, as it is mounted over the others)."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point.rstrip("/") or "/"
        inside = point == "/" or path == point or path.startswith(point + "/")
        if inside and (best is None or len(point) >= len(best.mount_point.rstrip("/") or "/")):
            best = mount
    return best


def unsafe_filesystem(fstype: str) -> bool:
    """True for a network, cluster or FUSE filesystem type (`fuse`, `fuseblk`, `fuse.sshfs`,
    `nfs4`, ...): SQLite's WAL mode needs shared memory and locks that only a local
    filesystem provides reliably."""
    return fstype in NETWORK_FILESYSTEMS or fstype in ("fuse", "fuseblk") \
        or fstype.startswith("fuse.")


def filesystem_of(db_path: str, mountinfo_text: str | None = None) -> Mount | None:
    """The mount holding the folder of `db_path` (symlinks resolved), from `mountinfo_text`
    or else this process's /proc/self/mountinfo; None where that is unreadable (not Linux)."""
    if mountinfo_text is None:
        try:
            mountinfo_text = Path(MOUNTINFO).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    folder = os.path.realpath(os.path.dirname(os.path.abspath(db_path)))
    return mount_of(folder, parse_mountinfo(mountinfo_text))


def refuse_network_filesystem(db_path: str, *, allowed: bool,
                              mountinfo_text: str | None = None) -> None:
    """Refuse a database whose folder is on a network or FUSE filesystem.

    Args:
        db_path: the SQLite file (it may not exist yet; its folder is what counts).
        allowed: the operator's opt-in (`allow_network_filesystem`); True skips the check.
        mountinfo_text: mountinfo to use instead of /proc/self/mountinfo (tests).

    Raises:
        StorageRefused: the folder is on such a filesystem and `allowed` is False.
    """
    if allowed:
        return
    mount = filesystem_of(db_path, mountinfo_text)
    if mount is not None and unsafe_filesystem(mount.fstype):
        raise StorageRefused(
            f"refusing database {db_path}: its folder is on a {mount.fstype} filesystem "
            f"(mounted at {mount.mount_point} from {mount.source}), a network or FUSE "
            "filesystem where SQLite's WAL shared memory and locks are unsafe; move it to a "
            "local disk, use PostgreSQL, or set allow_network_filesystem = true "
            "(HOOKLINE_ALLOW_NETWORK_FILESYSTEM=1) if this filesystem is known to be safe")


def check_database_folder(db_path: str, *, writable: bool) -> None:
    """Refuse a database whose folder is missing, not a folder, world-writable or (when
    `writable`) not writable by this user.

    Args:
        db_path: the SQLite file (it may not exist yet; its folder is what counts).
        writable: also require that this user can create files in the folder (the database,
            its -wal and -shm files, the write lock); True where the file is to be created.

    Raises:
        StorageRefused: the message names the folder and what to do.
    """
    folder = Path(os.path.abspath(db_path)).parent
    try:
        mode = folder.stat().st_mode
    except FileNotFoundError:
        raise StorageRefused(
            f"refusing database {db_path}: its folder {folder} does not exist (create it, "
            "owned by the service user, or point db at an existing folder)") from None
    except OSError as exc:
        raise StorageRefused(f"refusing database {db_path}: cannot look at its folder "
                             f"{folder}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(mode):
        raise StorageRefused(f"refusing database {db_path}: {folder} is not a folder")
    if mode & stat.S_IWOTH:
        # Anyone could then swap the database, its -wal file or the write lock.
        raise StorageRefused(f"refusing database {db_path}: its folder {folder} is "
                             f"world-writable (chmod o-w {folder}, or pick another folder)")
    if writable and not os.access(folder, os.W_OK | os.X_OK):
        raise StorageRefused(f"refusing database {db_path}: its folder {folder} is not "
                             "writable by this user (run as the service user, or fix the "
                             "folder's owner)")


def storage_preflight(db: str, *, allow_network_filesystem: bool) -> None:
    """What opening the database for the service checks before touching it, also when the
    SQLite file does not exist yet, creating nothing: the folder (:func:`check_database_folder`),
    its filesystem (:func:`refuse_network_filesystem`) and, for a file still to be created,
    that SQLite can put a file there in WAL mode (a scratch file, removed at once).
    Nothing for PostgreSQL (opening it tells).

    Args:
        db: the `db` setting.
        allow_network_filesystem: the operator's opt-in for a network or FUSE folder.

    Raises:
        StorageRefused: the database cannot be kept there; the message says why.
    """
    path = sqlite_path(db)
    if path is None:
        return
    exists = os.path.exists(path)
    check_database_folder(path, writable=not exists)
    refuse_network_filesystem(path, allowed=allow_network_filesystem)
    if not exists:
        _probe_journal_mode(path)


def _probe_journal_mode(db_path: str) -> None:
    """Switch a scratch file beside `db_path` to WAL and remove it (and its -wal, -shm):
    the journal-mode check of a database not created yet. Raises StorageRefused."""
    folder = os.path.dirname(os.path.abspath(db_path))
    try:
        fd, scratch = tempfile.mkstemp(prefix=".hookline-check-", suffix=".db", dir=folder)
    except OSError as exc:
        raise StorageRefused(f"refusing database {db_path}: cannot create a file in "
                             f"{folder}: {exc.strerror or exc}") from exc
    os.close(fd)
    try:
        db = sqlite3.connect(scratch, isolation_level=None)
        try:
            row = db.execute("PRAGMA journal_mode = WAL").fetchone()
        finally:
            db.close()
        check_journal_mode(row[0] if row else None, db_path)
    except sqlite3.Error as exc:
        raise StorageRefused(f"refusing database {db_path}: SQLite cannot use a file in "
                             f"{folder}: {exc}") from exc
    finally:
        for leftover in (scratch, scratch + "-wal", scratch + "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def enable_wal(db: sqlite3.Connection, db_path: str) -> None:
    """Switch `db` to WAL journal mode and verify that it took.

    SQLite answers `PRAGMA journal_mode = WAL` with the mode in force afterwards; it stays
    in the old mode (without an error) where WAL cannot work, e.g. a VFS or filesystem
    without shared memory.

    Raises:
        StorageRefused: the journal mode is not `wal` afterwards.
    """
    row = db.execute("PRAGMA journal_mode = WAL").fetchone()
    check_journal_mode(row[0] if row else None, db_path)


def check_journal_mode(mode: str | None, db_path: str, mountinfo_text: str | None = None) -> None:
    """Refuse unless `mode` (the result of `PRAGMA journal_mode = WAL`) is `wal`; the message
    names the database's filesystem. Raises StorageRefused."""
    if mode is not None and str(mode).lower() == "wal":
        return
    mount = filesystem_of(db_path, mountinfo_text)
    where = (f"its folder is on a {mount.fstype} filesystem mounted at {mount.mount_point}"
             if mount is not None else "its filesystem is unknown")
    raise StorageRefused(
        f"refusing database {db_path}: SQLite could not switch it to WAL journal mode (it "
        f"stayed in {mode!r} mode); {where}. WAL needs a local filesystem with shared "
        "memory (mmap of the -shm file) and POSIX locks: move the database to a local disk")


_PROGRESS_STEPS = 10_000
"""SQLite virtual-machine steps between two looks at quick_check's deadline (well under 1 ms)."""


def quick_check(db_path: str, *, timeout_s: float, busy_timeout_s: float = 5.0) -> bool:
    """Run `PRAGMA quick_check` on an existing database file, for at most `timeout_s` seconds.

    Reads every page once (on a 2-core VM, a 1.09 GB file took 0.9-1.4 s from the page cache
    and 20-24 s from a cold disk), so it runs once per service start, never per process.

    Args:
        db_path: the SQLite file; a missing or empty file passes (nothing to check).
        timeout_s: stop checking after this long, seconds (the check is then incomplete).
        busy_timeout_s: how long to wait for a lock held by another process, seconds.

    Returns:
        True when the check finished clean, False when it was stopped at `timeout_s`.

    Raises:
        StorageRefused: the file is damaged or not a database; the message points at
            `hookline restore`.
        StoreBusy: the database stayed locked past `busy_timeout_s`.
    """
    if not os.path.exists(db_path) or os.path.getsize(db_path) == 0:
        return True
    db = sqlite3.connect(db_path, timeout=busy_timeout_s, check_same_thread=False,
                         isolation_level=None)
    # quick_check is one long statement: SQLite calls the progress handler every
    # _PROGRESS_STEPS virtual-machine steps of it, on this thread, and a true answer stops it.
    deadline = time.monotonic() + timeout_s
    stopped = False

    def past_deadline() -> bool:
        nonlocal stopped
        stopped = time.monotonic() >= deadline
        return stopped

    db.set_progress_handler(past_deadline, _PROGRESS_STEPS)
    try:
        rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(20)")]
    except sqlite3.OperationalError as exc:
        if stopped:
            return False
        fault = sqlite_fault(exc, f"cannot check {db_path}")
        if isinstance(fault, StoreUnavailable):  # busy, read-only, disk trouble: may pass
            raise fault from exc
        raise _damaged(db_path, str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        raise _damaged(db_path, str(exc)) from exc
    finally:
        with contextlib.suppress(sqlite3.Error):
            db.close()
    if rows != ["ok"]:
        raise _damaged(db_path, "; ".join(rows[:3]) + (f" (and {len(rows) - 3} more)"
                                                       if len(rows) > 3 else ""))
    return True


def _damaged(db_path: str, detail: str) -> StorageRefused:
    return StorageRefused(
        f"refusing database {db_path}: PRAGMA quick_check found it damaged ({detail}). Do "
        "not write to it: stop here, restore the newest good snapshot with `hookline "
        f"restore SNAPSHOT --into NEWDIR` (then --db NEWDIR/hookline.db), and keep this file "
        "for inspection")


def _unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (`\\040` is a space)."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        chunk = field[i + 1:i + 4]
        if field[i] == "\\" and len(chunk) == 3 and all(c in "01234567" for c in chunk):
            out.append(chr(int(chunk, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)

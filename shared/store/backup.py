"""Checked online snapshots of a SQLite hookline database: take, verify, restore, rotate.

A snapshot is taken with SQLite's online backup API in ONE step, so it is one consistent
read transaction: in WAL mode writers (ingest, workers) keep committing while it runs, and
every commit made before the backup began is in the copy (commits still in the `-wal` file
included; a file copy would miss them). The copy is then switched to `journal_mode=DELETE`
(one self-contained file, no `-wal`/`-shm` sidecars), checked (`PRAGMA integrity_check`,
schema version), described by a JSON manifest beside it, fsynced, and only then renamed to
its final name `hookline-YYYYmmddTHHMMSSZ.db` (+ `.json`). Until the rename it lives under a
`.tmp-` name, so a killed backup never leaves a file at a final path; stale temporaries of
dead backup processes are removed by the next backup.

Restore copies a verified snapshot into a NEW, empty directory as `hookline.db`; it never
opens the live database. Jobs that were `running` at snapshot time are left as they are:
their leases expire (lease_until was at most `lease_s` after the snapshot) and the normal
takeover path claims them again, marks the unfinished attempt as lost and applies the
attempt cap, exactly as after a crashed worker, which is what a restore is to them.
AUTOINCREMENT keeps new ids above every id in the snapshot (sqlite_sequence is restored).

This module is SQLite-specific and used only by the CLI; it uses the stdlib sqlite3 module
directly (blocking calls: run it in a thread from async code). Files are created 0600: a
snapshot holds destination secrets and is as sensitive as the live database.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.db_url import parse_db_url
from shared.errors import ConfigError, HooklineError
from shared.logs import get_logger
from shared.models import JOB_STATUSES
from shared.process.lifecycle import pid_alive

MANIFEST_FORMAT = 1
SNAPSHOT_NAME = re.compile(r"^hookline-(\d{8}T\d{6}Z)(?:-(\d+))?\.db$")
TEMP_PREFIX = ".tmp-hookline-"
RESTORED_NAME = "hookline.db"
_TEMP_NAME = re.compile(r"^\.tmp-hookline-.*-(\d+)\.(db|json)(-journal|-wal|-shm)?$")


class BackupError(HooklineError):
    """A snapshot could not be taken, verified or restored (the message says why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What a snapshot holds, written as JSON beside it and re-checked by verify.

    Attributes:
        file: the snapshot's file name (no directory).
        sha256: hex SHA-256 of the snapshot file's bytes.
        size_bytes: size of the snapshot file, bytes.
        schema_version: the database's schema version (highest applied migration).
        tables: row count per table (sqlite internals excluded).
        jobs_by_status: job count per status.
        max_event_id: highest event id in the snapshot (0 when there is none).
        created_at: when the snapshot's read transaction began, ISO 8601 UTC.
        created_at_unix: the same instant, unix seconds.
        duration_s: how long taking the snapshot took, seconds.
        source: absolute path of the database it was taken from.
    """

    file: str
    sha256: str
    size_bytes: int
    schema_version: int
    tables: dict[str, int]
    jobs_by_status: dict[str, int]
    max_event_id: int
    created_at: str
    created_at_unix: float
    duration_s: float
    source: str
    format: int = MANIFEST_FORMAT

    def to_json(self) -> str:
        """The manifest as indented JSON text."""
        return json.dumps({name: getattr(self, name) for name in self.__slots__}, indent=2,
                          sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: Path) -> Manifest:
        """Load a manifest file.

        Raises:
            BackupError: the file is missing, not JSON, or lacks a field.
        """
        try:
            data = json.loads(path.read_text())
            return cls(**{name: data[name] for name in cls.__slots__})
        except FileNotFoundError as exc:
            raise BackupError(f"no manifest {path}") from exc
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BackupError(f"unreadable manifest {path}: {exc!r}") from exc


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A checked snapshot at its final path, with its manifest."""

    path: Path
    manifest_path: Path
    manifest: Manifest


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The result of re-checking a snapshot; `ok` when `problems` is empty."""

    path: Path
    problems: tuple[str, ...]
    manifest: Manifest | None

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.problems


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """What a periodic run did: snapshots taken, failures reported, snapshots rotated away."""

    taken: tuple[Snapshot, ...] = ()
    failures: tuple[str, ...] = ()
    removed: tuple[Path, ...] = field(default=())


def backup_source(url: str) -> str:
    """The file `hookline backup` copies: the path of a SQLite database URL (a path, or
    `sqlite:///PATH`).

    Raises:
        BackupError: the URL names another backend (PostgreSQL: use pg_dump or
            pg_basebackup, see OPERATIONS.md).
    """
    try:
        db = parse_db_url(url)
    except ConfigError as exc:
        raise BackupError(str(exc)) from None
    if db.path is None:
        raise BackupError("hookline backup works on SQLite databases only; back up PostgreSQL "
                          "with pg_dump / pg_basebackup (see OPERATIONS.md)")
    return db.path


# -- take ------------------------------------------------------------------------------------

def take_snapshot(db_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                  busy_timeout_s: float = 5.0, pause_before_rename_s: float = 0.0,
                  clock: Callable[[], float] = time.time) -> Snapshot:
    """Take one checked online snapshot of the live database into `out_dir`.

    Blocking (seconds for a big database): call it in a thread from async code.

    Args:
        db_path: the live SQLite database; never created, never written.
        out_dir: folder for snapshots; created (0700) when missing.
        busy_timeout_s: how long opening the source may wait on a lock, seconds.
        pause_before_rename_s: sleep this long after the checks, before the final rename
            (a test hook: lets a test kill the process at the worst moment).
        clock: unix-seconds clock for the snapshot's name and manifest time.

    Returns:
        The snapshot at its final path `out_dir/hookline-YYYYmmddTHHMMSSZ.db` (a `-N`
        suffix when that name is taken), with its manifest beside it.

    Raises:
        BackupError: the source is missing or unreadable, or the copy failed a check; no
            file is left at a final path.
    """
    try:
        return _take_snapshot(Path(db_path), Path(out_dir), busy_timeout_s=busy_timeout_s,
                              pause_before_rename_s=pause_before_rename_s, clock=clock)
    except OSError as exc:
        raise BackupError(f"{exc.strerror or exc}: {exc.filename or out_dir}") from exc


def _take_snapshot(src_path: Path, out: Path, *, busy_timeout_s: float,
                   pause_before_rename_s: float, clock: Callable[[], float]) -> Snapshot:
    if not src_path.is_file():
        raise BackupError(f"no database file at {src_path}")
    if out.exists() and not out.is_dir():
        raise BackupError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    remove_stale_temporaries(out)
    started = time.monotonic()
    created_unix = clock()
    stamp = datetime.fromtimestamp(created_unix, UTC).strftime("%Y%m%dT%H%M%SZ")
    tmp_db = out / f"{TEMP_PREFIX}{stamp}-{os.getpid()}.db"
    tmp_manifest = tmp_db.with_suffix(".json")
    try:
        live_version = _copy_online(src_path, tmp_db, busy_timeout_s)
        facts = _check_copy(tmp_db, expected_version=live_version)
        _fsync_file(tmp_db)
        final_db = _free_final_name(out, stamp)
        manifest = Manifest(
            file=final_db.name, sha256=_sha256(tmp_db), size_bytes=tmp_db.stat().st_size,
            schema_version=facts["schema_version"], tables=facts["tables"],
            jobs_by_status=facts["jobs_by_status"], max_event_id=facts["max_event_id"],
            created_at=datetime.fromtimestamp(created_unix, UTC).isoformat()
            .replace("+00:00", "Z"),
            created_at_unix=created_unix, duration_s=round(time.monotonic() - started, 3),
            source=str(src_path.resolve()))
        _write_private(tmp_manifest, manifest.to_json().encode())
        if pause_before_rename_s > 0:
            time.sleep(pause_before_rename_s)
        # Manifest first: a snapshot at a final name always has its manifest beside it.
        final_manifest = final_db.with_suffix(".json")
        os.replace(tmp_manifest, final_manifest)
        os.replace(tmp_db, final_db)
        _fsync_dir(out)
    except BaseException:
        for leftover in (tmp_db, tmp_manifest):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        raise
    get_logger().info("backup_taken", path=str(final_db), size_bytes=manifest.size_bytes,
                      events=manifest.tables.get("events", 0), duration_s=manifest.duration_s)
    return Snapshot(path=final_db, manifest_path=final_manifest, manifest=manifest)


def _copy_online(src_path: Path, tmp_db: Path, busy_timeout_s: float) -> int:
    """Copy the live database into `tmp_db` in one backup step; returns the live schema
    version read in the same connection. The copy ends in journal_mode=DELETE, mode 0600."""
    _write_private(tmp_db, b"")
    try:
        src = sqlite3.connect(f"{src_path.resolve().as_uri()}?mode=rw", uri=True,
                              timeout=busy_timeout_s, isolation_level=None)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open database {src_path}: {exc}") from exc
    try:
        dst = sqlite3.connect(tmp_db, isolation_level=None)
        try:
            # pages=-1: the whole database in ONE step, i.e. one read transaction: a
            # consistent point in time. (A stepwise backup restarts whenever another
            # process writes, so under steady ingest it might never finish.)
            src.backup(dst, pages=-1)
            mode = dst.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
            if str(mode).lower() != "delete":
                raise BackupError(f"cannot switch the copy to journal_mode=DELETE ({mode})")
        finally:
            dst.close()
        return _schema_version(src)
    except sqlite3.Error as exc:
        raise BackupError(f"online backup of {src_path} failed: {exc}") from exc
    finally:
        src.close()


def _check_copy(path: Path, *, expected_version: int | None) -> dict[str, Any]:
    """Run the checks on a copy; returns its facts for the manifest. Raises BackupError."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open snapshot {path}: {exc}") from exc
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if rows != ["ok"]:
            raise BackupError(f"integrity_check of {path} failed: {'; '.join(rows[:5])}")
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() == "wal":
            raise BackupError(f"{path} is in WAL mode; a snapshot must be self-contained")
        version = _schema_version(conn)
        if expected_version is not None and version != expected_version:
            raise BackupError(f"schema version of the copy ({version}) does not match the "
                              f"database's ({expected_version})")
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        # Table names come from sqlite_master, not from input.
        counts = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]  # noqa: S608
                  for t in tables}
        by_status = {s: 0 for s in JOB_STATUSES}
        if "jobs" in tables:
            by_status.update(dict(conn.execute(
                "SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()))
        max_event_id = 0
        if "events" in tables:
            max_event_id = conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
        return {"schema_version": version, "tables": counts, "jobs_by_status": by_status,
                "max_event_id": max_event_id}
    except sqlite3.Error as exc:
        raise BackupError(f"checking {path} failed: {exc}") from exc
    finally:
        conn.close()


def _schema_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration. Raises BackupError when it is not a hookline database
    or was written by a newer hookline."""
    from shared.store.sqlite import SCHEMA_VERSION  # noqa: PLC0415  (loads the SQL lazily)

    try:
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    except sqlite3.OperationalError as exc:
        raise BackupError(f"not a hookline database (no schema_version table): {exc}") from exc
    if not isinstance(version, int) or version < 1:
        raise BackupError("not a hookline database (no schema version recorded)")
    if version > SCHEMA_VERSION:
        raise BackupError(f"schema version {version} is newer than this hookline "
                          f"({SCHEMA_VERSION}); use the hookline that wrote it")
    return version


def _free_final_name(out: Path, stamp: str) -> Path:
    """`hookline-STAMP.db`, or `hookline-STAMP-N.db` when taken (several in one second)."""
    candidate = out / f"hookline-{stamp}.db"
    n = 1
    while candidate.exists() or candidate.with_suffix(".json").exists():
        candidate = out / f"hookline-{stamp}-{n}.db"
        n += 1
    return candidate


def remove_stale_temporaries(out_dir: Path) -> list[Path]:
    """Delete `.tmp-hookline-*` files (and SQLite sidecars of them) left by backup processes
    that no longer run. Returns the deleted paths."""
    removed = []
    for entry in out_dir.iterdir():
        match = _TEMP_NAME.match(entry.name)
        if match and not pid_alive(int(match.group(1))):
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
                removed.append(entry)
    return removed


# -- verify ----------------------------------------------------------------------------------

def verify_snapshot(path: str | os.PathLike[str], *, require_manifest: bool = True
                    ) -> VerifyReport:
    """Re-check a snapshot: its manifest (hash, size, schema version, row counts), integrity.

    Args:
        path: the snapshot `.db` file; its manifest is the `.json` beside it.
        require_manifest: when False a missing manifest is not a problem (only the
            integrity and schema checks run).

    Returns:
        A report; `report.ok` when every check passed, else `report.problems` says why.
        Never raises for a bad snapshot.
    """
    snap = Path(path)
    problems: list[str] = []
    manifest: Manifest | None = None
    if not snap.is_file():
        return VerifyReport(snap, (f"no snapshot file at {snap}",), None)
    for sidecar in ("-wal", "-journal"):
        if Path(f"{snap}{sidecar}").exists():
            problems.append(f"a {sidecar} file lies beside the snapshot (it was opened for "
                            "writing after it was taken)")
    try:
        manifest = Manifest.read(snap.with_suffix(".json"))
    except BackupError as exc:
        if require_manifest or snap.with_suffix(".json").exists():
            problems.append(str(exc))
    if manifest is not None:
        size = snap.stat().st_size
        if size != manifest.size_bytes:
            problems.append(f"size is {size} bytes, the manifest says {manifest.size_bytes}")
        digest = _sha256(snap)
        if digest != manifest.sha256:
            problems.append(f"sha256 is {digest}, the manifest says {manifest.sha256}")
    try:
        facts = _check_copy(snap, expected_version=None if manifest is None
                            else manifest.schema_version)
    except BackupError as exc:
        problems.append(str(exc))
    else:
        if manifest is not None:
            if facts["tables"] != manifest.tables:
                problems.append(f"row counts {facts['tables']} differ from the manifest's "
                                f"{manifest.tables}")
            if facts["max_event_id"] != manifest.max_event_id:
                problems.append(f"highest event id {facts['max_event_id']} differs from the "
                                f"manifest's {manifest.max_event_id}")
    return VerifyReport(snap, tuple(problems), manifest)


# -- restore ---------------------------------------------------------------------------------

def restore(snapshot: str | os.PathLike[str], into_dir: str | os.PathLike[str], *,
            require_manifest: bool = True) -> Path:
    """Verify a snapshot and write a ready-to-run database `into_dir/hookline.db`.

    The live database is never opened. Running jobs are left running; they are claimed
    again when their leases expire (see the module docstring for why).

    Args:
        snapshot: the snapshot `.db` file.
        into_dir: a directory that does not exist yet, or an empty one.
        require_manifest: False to restore a lone snapshot file without its manifest.

    Returns:
        The restored database file (mode 0600, in the new directory).

    Raises:
        BackupError: the snapshot failed verification, or `into_dir` is a file or is not
            empty.
    """
    try:
        return _restore(Path(snapshot), Path(into_dir), require_manifest=require_manifest)
    except OSError as exc:
        raise BackupError(f"{exc.strerror or exc}: {exc.filename or into_dir}") from exc


def _restore(snapshot: Path, target_dir: Path, *, require_manifest: bool) -> Path:
    if target_dir.exists():
        if not target_dir.is_dir():
            raise BackupError(f"{target_dir} exists and is not a directory")
        if any(target_dir.iterdir()):
            raise BackupError(f"{target_dir} is not empty; restore writes into a new, empty "
                              "directory only")
    report = verify_snapshot(snapshot, require_manifest=require_manifest)
    if not report.ok:
        raise BackupError(f"snapshot {snapshot} failed verification: "
                          + "; ".join(report.problems))
    target_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    final = target_dir / RESTORED_NAME
    tmp = target_dir / f"{TEMP_PREFIX}restore-{os.getpid()}.db"
    try:
        _copy_private(snapshot, tmp)
        if report.manifest is not None and _sha256(tmp) != report.manifest.sha256:
            raise BackupError("the copy's sha256 differs from the manifest (disk error?)")
        os.replace(tmp, final)
        _fsync_dir(target_dir)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    running = 0 if report.manifest is None else report.manifest.jobs_by_status.get("running", 0)
    get_logger().info("restore_done", snapshot=str(snapshot), path=str(final),
                      running_jobs=running)
    return final


# -- rotate and schedule ---------------------------------------------------------------------

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
        _fsync_dir(Path(out_dir))
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


# -- files -----------------------------------------------------------------------------------

def _write_private(path: Path, data: bytes) -> None:
    """Create `path` with mode 0600 (never wider), write `data`, fsync."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_private(src: Path, dst: Path) -> None:
    """Copy `src` to a new file `dst` created with mode 0600, streaming, then fsync."""
    fd = os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
        os.fchmod(out.fileno(), 0o600)
        shutil.copyfileobj(inp, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Make renames in `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

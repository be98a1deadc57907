"""What a hookline snapshot is and how one is checked: its names, its JSON manifest, the
integrity and schema checks a copy must pass, and the private (0600), fsynced file writes.

Taking (shared/store/backup.py), verifying and restoring (shared/store/backup_restore.py) and
rotating (shared/store/backup_schedule.py) snapshots all build on these. SQLite-specific,
stdlib sqlite3, blocking calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.shared.errors import HooklineError
from hookline.shared.models import JOB_STATUSES

MANIFEST_FORMAT = 1
SNAPSHOT_NAME = re.compile(r"^hookline-(\d{8}T\d{6}Z)(?:-(\d+))?\.db$")
TEMP_PREFIX = ".tmp-hookline-"


class BackupError(HooklineError):
    """A snapshot could not be taken, verified or restored (the message says why)."""


class RestoreRefused(BackupError):
    """A restore refused before writing anything: its snapshot failed verification, or the
    folder to restore into is a file or not empty (bad input: the CLI exits 2)."""


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


def check_copy(path: Path, *, expected_version: int | None) -> dict[str, Any]:
    """Run a snapshot's checks on a copy: integrity_check, not in WAL mode, the schema version.

    Args:
        path: the copy (opened read-only).
        expected_version: the schema version it must have (None: any this hookline reads).

    Returns:
        Its facts for the manifest: `schema_version`, `tables` (rows per table),
        `jobs_by_status` and `max_event_id`.

    Raises:
        BackupError: a check failed, or the file is no readable hookline database.
    """
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
        version = schema_version(conn)
        if expected_version is not None and version != expected_version:
            raise BackupError(f"schema version of the copy ({version}) does not match the "
                              f"database's ({expected_version})")
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        # Table names come from sqlite_master, not from input.
        counts = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]  # noqa: S608  (table names from sqlite_master)
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


def schema_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration of the database open on `conn`.

    Raises:
        BackupError: it is not a hookline database, or a newer hookline wrote it.
    """
    from hookline.shared.store.sqlite import SCHEMA_VERSION  # noqa: PLC0415  (loads the SQL lazily)

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


def write_private(path: Path, data: bytes) -> None:
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


def copy_private(src: Path, dst: Path) -> None:
    """Copy `src` to a new file `dst` created with mode 0600, streaming, then fsync."""
    fd = os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
        os.fchmod(out.fileno(), 0o600)
        shutil.copyfileobj(inp, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())


def fsync_file(path: Path) -> None:
    """Flush `path`'s data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make renames in `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of the file's bytes (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

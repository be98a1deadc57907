"""Taking a checked online snapshot of a SQLite hookline database.

A snapshot is taken with SQLite's online backup API in ONE step, so it is one consistent
read transaction: in WAL mode writers (ingest, workers) keep committing while it runs, and
every commit made before the backup began is in the copy (commits still in the `-wal` file
included; a file copy would miss them). The copy is then switched to `journal_mode=DELETE`
(one self-contained file, no `-wal`/`-shm` sidecars), checked (`PRAGMA integrity_check`,
schema version), described by a JSON manifest beside it, fsynced, and only then renamed to
its final name `hookline-YYYYmmddTHHMMSSZ.db` (+ `.json`). Until the rename it lives under a
`.tmp-` name, so a killed backup never leaves a file at a final path; stale temporaries of
dead backup processes are removed by the next backup.

The snapshot's manifest, checks and file writes are in shared/store/backup_format.py;
verify and restore in shared/store/backup_restore.py; rotation and the periodic schedule in
shared/store/backup_schedule.py.

This module is SQLite-specific and used only by the CLI; it uses the stdlib sqlite3 module
directly (blocking calls: run it in a thread from async code). Files are created 0600: a
snapshot holds destination secrets and is as sensitive as the live database.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from hookline.shared.db_url import parse_db_url
from hookline.shared.errors import ConfigError
from hookline.shared.logs import get_logger
from hookline.shared.process.lifecycle import pid_alive
from hookline.shared.store.backup_format import (
    TEMP_PREFIX,
    BackupError,
    Manifest,
    Snapshot,
    check_copy,
    fsync_dir,
    fsync_file,
    schema_version,
    sha256_of,
    write_private,
)

_TEMP_NAME = re.compile(r"^\.tmp-hookline-.*-(\d+)\.(db|json)(-journal|-wal|-shm)?$")


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


def take_snapshot(db_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                  busy_timeout_s: float = 5.0, before_rename: Callable[[], None] | None = None,
                  clock: Callable[[], float] = time.time) -> Snapshot:
    """Take one checked online snapshot of the live database into `out_dir`.

    Blocking (seconds for a big database): call it in a thread from async code.

    Args:
        db_path: the live SQLite database; never created, never written.
        out_dir: folder for snapshots; created (0700) when missing.
        busy_timeout_s: how long opening the source may wait on a lock, seconds.
        before_rename: called once the copy is checked and its manifest written, just before
            the renames that publish them (None in production; a test's way to kill the
            process at the worst moment, tests/acceptance/test_backup.py).
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
                              before_rename=before_rename, clock=clock)
    except OSError as exc:
        raise BackupError(f"{exc.strerror or exc}: {exc.filename or out_dir}") from exc


def _take_snapshot(src_path: Path, out: Path, *, busy_timeout_s: float,
                   before_rename: Callable[[], None] | None,
                   clock: Callable[[], float]) -> Snapshot:
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
        facts = check_copy(tmp_db, expected_version=live_version)
        fsync_file(tmp_db)
        final_db = _free_final_name(out, stamp)
        manifest = Manifest(
            file=final_db.name, sha256=sha256_of(tmp_db), size_bytes=tmp_db.stat().st_size,
            schema_version=facts["schema_version"], tables=facts["tables"],
            jobs_by_status=facts["jobs_by_status"], max_event_id=facts["max_event_id"],
            created_at=datetime.fromtimestamp(created_unix, UTC).isoformat()
            .replace("+00:00", "Z"),
            created_at_unix=created_unix, duration_s=round(time.monotonic() - started, 3),
            source=str(src_path.resolve()))
        write_private(tmp_manifest, manifest.to_json().encode())
        if before_rename is not None:
            before_rename()
        # Manifest first: a snapshot at a final name always has its manifest beside it.
        final_manifest = final_db.with_suffix(".json")
        os.replace(tmp_manifest, final_manifest)
        os.replace(tmp_db, final_db)
        fsync_dir(out)
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
    write_private(tmp_db, b"")
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
        return schema_version(src)
    except sqlite3.Error as exc:
        raise BackupError(f"online backup of {src_path} failed: {exc}") from exc
    finally:
        src.close()


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

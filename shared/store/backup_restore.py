"""Verifying a snapshot and restoring one into a new directory.

Restore copies a verified snapshot into a NEW, empty directory as `hookline.db`; it never
opens the live database. Jobs that were `running` at snapshot time are left as they are:
their leases expire (lease_until was at most `lease_s` after the snapshot) and the normal
takeover path claims them again, marks the unfinished attempt as lost and applies the
attempt cap, exactly as after a crashed worker, which is what a restore is to them.
AUTOINCREMENT keeps new ids above every id in the snapshot (sqlite_sequence is restored).

Blocking calls (stdlib sqlite3): run them in a thread from async code.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.store.backup_format import (
    TEMP_PREFIX,
    BackupError,
    Manifest,
    RestoreRefused,
    check_copy,
    copy_private,
    fsync_dir,
    sha256_of,
)
from hookline.shared.tenant_tokens import SIGNING_KEY_PURPOSE

RESTORED_NAME = "hookline.db"


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
        digest = sha256_of(snap)
        if digest != manifest.sha256:
            problems.append(f"sha256 is {digest}, the manifest says {manifest.sha256}")
    try:
        facts = check_copy(snap, expected_version=None if manifest is None
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


def restore(snapshot: str | os.PathLike[str], into_dir: str | os.PathLike[str], *,
            require_manifest: bool = True) -> Path:
    """Verify a snapshot and write a ready-to-run database `into_dir/hookline.db`.

    The live database is never opened. Running jobs are left running; they are claimed
    again when their leases expire (see the module docstring for why). Every tenant token
    minted before the restore stops working (the copy gets a new signing key: revocations
    made after the snapshot are not in it).

    Args:
        snapshot: the snapshot `.db` file.
        into_dir: a directory that does not exist yet, or an empty one.
        require_manifest: False to restore a lone snapshot file without its manifest.

    Returns:
        The restored database file (mode 0600, in the new directory).

    Raises:
        RestoreRefused: the snapshot failed verification, or `into_dir` is a file or is not
            empty (nothing was written).
        BackupError: the copy could not be written.
    """
    try:
        return _restore(Path(snapshot), Path(into_dir), require_manifest=require_manifest)
    except OSError as exc:
        raise BackupError(f"{exc.strerror or exc}: {exc.filename or into_dir}") from exc


@dataclass(frozen=True, slots=True)
class SigningPreviousSecret:
    """A destination whose previous signing secret, kept by a rotation made before the
    snapshot, signs again in the restored copy until `signs_until` (unix seconds): an
    `expire-previous-secret` made after the snapshot is not in it."""

    tenant: str
    destination: str
    signs_until: float


def previous_secrets_signing(db: str | os.PathLike[str], now: float
                             ) -> tuple[SigningPreviousSecret, ...]:
    """The restored copy's destinations whose previous secret still signs at `now`.

    Only what the snapshot records: destination rows keep no time of their last rotation,
    so rotations made after the snapshot cannot be told from the copy (the log file's
    `secret_rotated` lines can: see OPERATIONS.md, "Backups and restore").

    Args:
        db: the restored database file.
        now: unix seconds; a previous secret whose overlap ended by then signs nothing.

    Returns:
        The destinations (not removed) by tenant and name; empty for a snapshot too old to
        have previous secrets.

    Raises:
        BackupError: the copy cannot be read.
    """
    try:
        with contextlib.closing(sqlite3.connect(f"file:{os.fspath(db)}?mode=ro", uri=True)
                                ) as conn:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(destinations)")}
            if "previous_secret_until" not in columns:  # older than schema 3: no rotations
                return ()
            # Before schema 12 every destination was the default tenant's.
            tenant = "tenant_id" if "tenant_id" in columns else "?"
            found = conn.execute(
                f"SELECT {tenant}, name, previous_secret_until FROM destinations "  # noqa: S608  (a column name from PRAGMA, not input)
                "WHERE deleted_at IS NULL AND previous_secret IS NOT NULL "
                "AND typeof(previous_secret_until) IN ('integer', 'real') "
                "AND previous_secret_until > ? ORDER BY 1, 2",
                (DEFAULT_TENANT, now) if tenant == "?" else (now,)).fetchall()
    except sqlite3.Error as exc:
        raise BackupError(f"cannot read the destinations of {db}: {exc}") from exc
    return tuple(SigningPreviousSecret(t, name, float(until)) for t, name, until in found)


def _forget_token_key(db: Path) -> None:
    """Drop the tenant tokens' signing key from a restored copy: the copy makes a new one on
    first use, so no token minted before the restore opens it. A snapshot predates the
    revocations and disables made after it (a tenant's epoch moved, a leaked link revoked);
    with the old key those tokens would work again, for up to their 24 h.

    Raises:
        BackupError: the copy cannot be written.
    """
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            # A snapshot older than the tokens' keys (schema 13) has none to forget; the
            # service migrates the copy forward when it opens it.
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                            "AND name = 'signing_keys'").fetchone() is not None:
                conn.execute("DELETE FROM signing_keys WHERE purpose = ?",
                             (SIGNING_KEY_PURPOSE,))
    except sqlite3.Error as exc:
        raise BackupError(f"cannot revoke the snapshot's tenant tokens in {db}: {exc}") from exc


def _restore(snapshot: Path, target_dir: Path, *, require_manifest: bool) -> Path:
    if target_dir.exists():
        if not target_dir.is_dir():
            raise RestoreRefused(f"{target_dir} exists and is not a directory")
        if any(target_dir.iterdir()):
            raise RestoreRefused(f"{target_dir} is not empty; restore writes into a new, empty "
                              "directory only")
    report = verify_snapshot(snapshot, require_manifest=require_manifest)
    if not report.ok:
        raise RestoreRefused(f"snapshot {snapshot} failed verification: "
                          + "; ".join(report.problems))
    target_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    final = target_dir / RESTORED_NAME
    tmp = target_dir / f"{TEMP_PREFIX}restore-{os.getpid()}.db"
    try:
        copy_private(snapshot, tmp)
        if report.manifest is not None and sha256_of(tmp) != report.manifest.sha256:
            raise BackupError("the copy's sha256 differs from the manifest (disk error?)")
        _forget_token_key(tmp)
        os.replace(tmp, final)
        fsync_dir(target_dir)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    running = 0 if report.manifest is None else report.manifest.jobs_by_status.get("running", 0)
    get_logger().info("restore_done", snapshot=str(snapshot), path=str(final),
                      running_jobs=running)
    return final

"""`hookline backup`, `hookline backup verify`, `hookline restore`: checked online snapshots.

SQLite only (shared/store/backup*.py); for a PostgreSQL URL these commands refuse and point at
pg_dump / pg_basebackup. Exit codes: 0 ok, 1 a snapshot or restore failed, 2 usage. One
human line per result on stdout; JSON log lines (`backup_taken`, `backup_failed`,
`backup_rotated`, `restore_done`) on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hookline.shared.config import Config
from hookline.shared.logs import configure_logging
from hookline.shared.store.backup import backup_source, take_snapshot
from hookline.shared.store.backup_format import BackupError, Manifest, RestoreRefused, Snapshot
from hookline.shared.store.backup_restore import (
    SigningPreviousSecret,
    previous_secrets_signing,
    restore,
    verify_snapshot,
)
from hookline.shared.store.backup_schedule import list_snapshots, rotate, run_schedule
from hookline.supervisor.cli.common import fail
from hookline.supervisor.cli.human import iso_time, iso_time_ms, show, size
from hookline.supervisor.cli.tenants import named


def register(sub: Any) -> None:
    """Add `backup` (with its `verify` action) and `restore` to the CLI."""
    backup = sub.add_parser(
        "backup", help="take a checked online snapshot of the SQLite database",
        description="Take a checked online snapshot of the live SQLite database into --out "
                    "(the service may keep running). With --every, repeat and keep the "
                    "newest --keep snapshots.")
    backup.add_argument("--out", help="snapshot folder (created 0700 when missing)")
    backup.add_argument("--every", type=float, metavar="SECONDS",
                        help="take a snapshot every SECONDS until stopped (needs --keep)")
    backup.add_argument("--keep", type=int, metavar="K",
                        help="keep the newest K snapshots in --out (older ones are deleted "
                             "only after a new one passed its checks); also without --every")
    backup.add_argument("--count", type=int, metavar="N",
                        help="with --every: stop after N snapshots (for rehearsals)")
    backup.add_argument("--json", action="store_true",
                        help="print the snapshot's manifest as JSON (not with --every)")
    backup.set_defaults(handler=backup_command)
    actions = backup.add_subparsers(dest="action", metavar="ACTION")
    verify = actions.add_parser("verify", parents=[sub.common],
                                help="re-check a snapshot against its manifest")
    verify.add_argument("snapshot", help="the snapshot .db file")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(handler=verify_command)

    rest = sub.add_parser(
        "restore", help="write a verified snapshot into a new, empty directory",
        description="Verify SNAPSHOT and write it as NEWDIR/hookline.db, ready for "
                    "`hookline --db NEWDIR/hookline.db serve`. Never touches the live "
                    "database. Jobs running at snapshot time are claimed again once their "
                    "leases expire. Destination signing secrets are the snapshot's: "
                    "rotations and expiries made after it are undone (it says which to "
                    "check).")
    rest.add_argument("snapshot", help="the snapshot .db file")
    rest.add_argument("--into", required=True, metavar="NEWDIR",
                      help="a directory that does not exist yet, or is empty")
    rest.add_argument("--no-manifest", action="store_true",
                      help="restore a lone snapshot file without its .json manifest "
                           "(integrity and schema are still checked)")
    rest.add_argument("--json", action="store_true")
    rest.set_defaults(handler=restore_command)


def manifest_view(manifest: Manifest) -> dict[str, Any]:
    """A snapshot manifest as JSON data: the fields of its `.json` file (`created_at` ISO
    8601, `created_at_unix` unix seconds, `duration_s` seconds, `size_bytes` bytes)."""
    return {name: getattr(manifest, name) for name in manifest.__slots__}


def _describe(snap: Snapshot) -> str:
    m = snap.manifest
    return (f"snapshot {snap.path} ok: {size(m.size_bytes)}, schema {m.schema_version}, "
            f"{m.tables.get('events', 0)} events, jobs ({show('jobs', m.jobs_by_status)}), "
            f"max event id {m.max_event_id}, taken {iso_time(m.created_at_unix)} in "
            f"{show('duration_s', m.duration_s)}, sha256 {m.sha256[:16]}...")


def backup_command(config: Config, args: argparse.Namespace) -> int:
    """`hookline backup --out DIR [--every S --keep K [--count N]]`."""
    _quiet_logs(config)
    if args.out is None:
        return fail("backup: --out DIR is required (or use `hookline backup verify SNAPSHOT`)",
                    2)
    if args.every is None and args.count is not None:
        return fail("backup: --count goes with --every", 2)
    if args.keep is not None and args.keep < 1:
        return fail(f"backup: --keep must be at least 1, not {args.keep}", 2)
    if args.every is not None and args.json:
        return fail("backup: --json prints one snapshot; it does not go with --every", 2)
    if args.every is not None and args.keep is None:
        return fail("backup: --every needs --keep K (how many snapshots to keep)", 2)
    try:
        db_path = backup_source(config.db)
    except BackupError as exc:
        return fail(f"backup: {exc}", 2)
    if not os.path.isfile(db_path):  # bad input, not a failed snapshot: exit 2
        return fail(f"backup: no database file at {db_path} (--db / HOOKLINE_DB)", 2)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        return fail(f"backup: --out {args.out} exists and is not a directory", 2)
    if args.every is None:
        try:
            snap = take_snapshot(db_path, args.out, busy_timeout_s=config.busy_timeout_s)
        except BackupError as exc:
            return fail(f"backup failed: {exc}")
        removed = None if args.keep is None else rotate(args.out, args.keep)
        if args.json:  # rotated and kept are null without --keep
            print(json.dumps({
                "snapshot": str(snap.path), "manifest": manifest_view(snap.manifest),
                "rotated": None if removed is None else [str(p) for p in removed],
                "kept": None if removed is None else len(list_snapshots(args.out))}))
            return 0
        print(_describe(snap), flush=True)
        if removed is not None:  # one shot with rotation (the systemd timer's way)
            print(f"{len(removed)} rotated away, {len(list_snapshots(args.out))} kept in "
                  f"{args.out}", flush=True)
        return 0

    def report(result: Snapshot | BackupError) -> None:
        if isinstance(result, Snapshot):
            print(_describe(result), flush=True)
        else:
            print(f"hookline: backup failed: {result}", file=sys.stderr, flush=True)

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        result = run_schedule(db_path, args.out, every_s=args.every, keep=args.keep,
                              count=args.count, stop=stop, on_snapshot=report,
                              busy_timeout_s=config.busy_timeout_s)
    except BackupError as exc:
        return fail(f"backup: {exc}", 2)
    kept = list_snapshots(args.out)
    print(f"{len(result.taken)} snapshots taken, {len(result.failures)} failed, "
          f"{len(result.removed)} rotated away, {len(kept)} kept in {args.out}", flush=True)
    return 1 if result.failures else 0


def verify_command(config: Config, args: argparse.Namespace) -> int:
    """`hookline backup verify SNAPSHOT`: 0 when every check passes, else 1."""
    _quiet_logs(config)
    report = verify_snapshot(args.snapshot)
    if args.json:
        print(json.dumps({"snapshot": args.snapshot, "ok": report.ok,
                          "problems": list(report.problems),
                          "manifest": None if report.manifest is None
                          else manifest_view(report.manifest)}))
        return 0 if report.ok else 1
    if not report.ok:
        return fail(f"snapshot {args.snapshot} FAILED: " + "; ".join(report.problems))
    assert report.manifest is not None  # required by verify_snapshot's default
    m = report.manifest
    print(f"snapshot {args.snapshot} ok: sha256 and size match the manifest, integrity_check "
          f"ok, schema {m.schema_version}, {m.tables.get('events', 0)} events, "
          f"taken {iso_time(m.created_at_unix)}")
    return 0


def restore_command(config: Config, args: argparse.Namespace) -> int:
    """`hookline restore SNAPSHOT --into NEWDIR`: 0 restored; 2 refused, nothing written (the
    snapshot failed verification, NEWDIR is a file or not empty); 1 failed writing."""
    _quiet_logs(config)
    try:
        path = restore(args.snapshot, args.into, require_manifest=not args.no_manifest)
    except RestoreRefused as exc:
        return fail(f"restore: {exc}", 2)
    except BackupError as exc:
        return fail(f"restore: {exc}")
    # Ids the old database gave out after the snapshot are given out again: log lines
    # older than the restore may be about lost events under the same ids.
    now = time.time()
    since = iso_time_ms(now)
    taken_at = _snapshot_time(args.snapshot)
    try:
        signing: tuple[SigningPreviousSecret, ...] | None = previous_secrets_signing(path, now)
    except BackupError as exc:
        # The restore succeeded: say what could not be read, and warn without the list.
        print(f"hookline: note: restored into {path}, but could not list the previous "
              f"secrets that sign again: {exc}", file=sys.stderr)
        signing = None
    if args.json:
        print(json.dumps({
            "restored": args.snapshot, "db": str(path), "logs_since": since,
            "secrets_as_of": None if taken_at is None else iso_time_ms(taken_at),
            "previous_secrets_signing": None if signing is None else [
                {"tenant": s.tenant, "destination": s.destination,
                 "signs_until": iso_time(s.signs_until)} for s in signing]}))
        return 0
    print(f"restored {args.snapshot} into {path}; start it with: "
          f"hookline --db {path} serve  (jobs that were running are claimed again when their "
          "leases expire; while the live service still runs, give the copy its own --listen "
          "address and log_file, since the configuration's are the live one's)")
    print(f"ids after the snapshot's are given out again: log lines older than this restore "
          f"may be about lost events; read new stories with `hookline logs --since {since}`")
    print(_secrets_warning(path, taken_at, signing))
    return 0


def _snapshot_time(snapshot: str) -> float | None:
    """When the snapshot was taken (its manifest's time), or None without a manifest."""
    try:
        return Manifest.read(Path(snapshot).with_suffix(".json")).created_at_unix
    except BackupError:
        return None


def _secrets_warning(path: Path, taken_at: float | None,
                     signing: tuple[SigningPreviousSecret, ...] | None) -> str:
    """The restore's note on destination signing secrets: the copy has the snapshot's, so a
    rotation made since signs with the secret its receiver dropped, and an expiry made since
    (a leaked secret retired) is undone. The rows keep no rotation time, so which rotated
    since is in the log file's audit lines, not in the copy."""
    when = ("taken at an unknown time: no manifest" if taken_at is None
            else f"taken {iso_time(taken_at)}")
    # To the millisecond, rounded down: a change made in the snapshot's second after it
    # began is listed (too many is safe; one missed is not).
    since = "" if taken_at is None else f" --since {iso_time_ms(taken_at)}"
    text = (f"destination signing secrets are the snapshot's ({when}): every rotate-secret "
            "and expire-previous-secret made after it is undone. Before starting, find them "
            f"with `hookline logs{since} --json | grep -E "
            "'secret_rotated|previous_secret_expired'`, give each rotated destination its "
            f"receiver's secret again (`hookline --db {path} destinations rotate-secret "
            "NAME [--tenant ID] --secret whsec_... --overlap 0s`; the old database's "
            "`destinations secret NAME` shows it) and expire again what was expired")
    if signing:
        text += ("\nprevious secrets that sign again (expire them if they were expired after "
                 "the snapshot): " + ", ".join(
                     f"{named(s.destination, s.tenant)} until {iso_time(s.signs_until)}"
                     for s in signing))
    return text


def _quiet_logs(config: Config) -> None:
    """JSON log lines to stderr, so stdout carries only the human summary."""
    try:
        configure_logging("backup", config.log_level, stream=sys.stderr)
    except ValueError:
        configure_logging("backup", stream=sys.stderr)

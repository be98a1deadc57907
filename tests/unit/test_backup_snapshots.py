"""shared/store/backup*.py and Store.maintenance on real SQLite files: snapshots, verify, restore,
rotation, and WAL hygiene."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from hookline.ingest.maintenance import run_maintenance
from hookline.shared.store.backup import remove_stale_temporaries, take_snapshot
from hookline.shared.store.backup_format import SNAPSHOT_NAME, BackupError
from hookline.shared.store.backup_restore import restore, verify_snapshot
from hookline.shared.store.backup_schedule import list_snapshots, rotate, run_schedule
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import FakeClock, new_event

pytestmark = pytest.mark.sqlite_only  # snapshots and the -wal file are SQLite's


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _filled(store: SqliteStore, destination_factory, n: int = 20) -> None:
    await destination_factory("a")
    await store.add_events([new_event(f"e{i}") for i in range(n)])


async def test_snapshot_is_self_contained_checked_and_private(store, destination_factory,
                                                              tmp_path: Path):
    """A snapshot lands at its final name with a manifest that matches the file (hash, size,
    counts, highest event id), mode 0600, journal_mode DELETE, no sidecars or temporaries."""
    await _filled(store, destination_factory, 20)
    await store.claim("w1", 3, 30.0, 5)
    out = tmp_path / "snaps"
    snap = await asyncio.to_thread(take_snapshot, store.path, out)

    assert SNAPSHOT_NAME.match(snap.path.name)
    assert sorted(p.name for p in out.iterdir()) == sorted([snap.path.name,
                                                            snap.manifest_path.name])
    assert _mode(snap.path) == 0o600 and _mode(snap.manifest_path) == 0o600
    data = snap.path.read_bytes()
    assert data[18:20] == b"\x01\x01"  # file format 1 = rollback journal, not WAL (2)
    manifest = json.loads(snap.manifest_path.read_text())
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["size_bytes"] == len(data)
    assert manifest["tables"]["events"] == 20 and manifest["tables"]["jobs"] == 20
    assert manifest["jobs_by_status"]["running"] == 3
    assert manifest["jobs_by_status"]["pending"] == 17
    assert manifest["max_event_id"] == 20
    assert manifest["created_at"].endswith("Z") and manifest["created_at_unix"] > 0
    assert verify_snapshot(snap.path).ok


async def test_verify_reports_tampering_and_missing_manifest(store, destination_factory,
                                                             tmp_path: Path):
    """verify fails on a changed byte (hash) and on a missing manifest unless told not to
    require one; a good snapshot passes."""
    await _filled(store, destination_factory)
    snap = take_snapshot(store.path, tmp_path / "snaps")
    lone = tmp_path / "lone" / "copy.db"
    lone.parent.mkdir()
    lone.write_bytes(snap.path.read_bytes())
    assert not verify_snapshot(lone).ok
    assert "no manifest" in verify_snapshot(lone).problems[0]
    assert verify_snapshot(lone, require_manifest=False).ok

    raw = bytearray(snap.path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    snap.path.write_bytes(bytes(raw))
    report = verify_snapshot(snap.path)
    assert not report.ok
    assert any("sha256" in p for p in report.problems)


async def test_take_snapshot_refuses_missing_or_foreign_database(tmp_path: Path):
    """No database file, or a SQLite file that is not a hookline database: BackupError, and
    nothing is left in the output folder."""
    out = tmp_path / "snaps"
    with pytest.raises(BackupError, match="no database file"):
        take_snapshot(tmp_path / "missing.db", out)
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(BackupError, match="not a hookline database"):
        take_snapshot(foreign, out)
    assert list(out.iterdir()) == []


async def test_restore_refuses_non_empty_or_file_target(store, destination_factory,
                                                        tmp_path: Path):
    """restore writes only into a new or empty directory; a file or a non-empty directory is
    refused and left as it was."""
    await _filled(store, destination_factory)
    snap = take_snapshot(store.path, tmp_path / "snaps")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(BackupError, match="not empty"):
        restore(snap.path, busy)
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(BackupError, match="not a directory"):
        restore(snap.path, a_file)
    assert a_file.read_text() == "x"


async def test_restored_database_continues_ids_and_reclaims_running_jobs(
        store, destination_factory, tmp_path: Path, clock: FakeClock):
    """A restored database (from the lone snapshot file) opens, gives new events ids above
    the snapshot's highest, and hands out jobs that were running once their leases expire
    (the unfinished attempt counted, the new claim marked as a takeover)."""
    await _filled(store, destination_factory, 10)
    claimed = await store.claim("w1", 2, 30.0, 5)
    snap = take_snapshot(store.path, tmp_path / "snaps")
    lone = tmp_path / "lone.db"
    lone.write_bytes(snap.path.read_bytes())
    restored = restore(lone, tmp_path / "new" / "dir", require_manifest=False)
    assert restored == tmp_path / "new" / "dir" / "hookline.db"
    assert _mode(restored) == 0o600

    again = SqliteStore(str(restored), clock=clock)
    await again.open()
    try:
        accepted = (await again.add_events([new_event("after-restore")]))[0]
        assert accepted.event_id > snap.manifest.max_event_id
        first = await again.claim("w2", 100, 30.0, 5)
        assert {c.job_id for c in first}.isdisjoint({c.job_id for c in claimed})
        clock.advance(31)
        taken = []  # each expired lease is taken over alone in its claim (the quarantine)
        while second := await again.claim("w2", 100, 30.0, 5):
            assert len(second) == 1 or not any(c.taken_over for c in second)
            taken += [c for c in second if c.taken_over]
        assert {c.job_id for c in claimed} <= {c.job_id for c in taken}
        assert all(c.attempt == 2 for c in taken)
    finally:
        await again.close()


async def test_rotate_keeps_newest_and_leaves_other_files(store, destination_factory,
                                                          tmp_path: Path):
    """rotate deletes the oldest snapshots and their manifests beyond `keep`, and nothing
    that is not named like a snapshot."""
    await _filled(store, destination_factory)
    out = tmp_path / "snaps"
    taken = [take_snapshot(store.path, out) for _ in range(4)]
    (out / "notes.txt").write_text("operator's file")
    removed = rotate(out, 2)
    assert removed == [t.path for t in taken[:2]]
    assert list_snapshots(out) == [t.path for t in taken[2:]]
    assert not taken[0].manifest_path.exists()
    assert (out / "notes.txt").exists()
    with pytest.raises(BackupError):
        rotate(out, 0)


async def test_failed_snapshots_do_not_rotate_good_ones(store, destination_factory,
                                                        tmp_path: Path):
    """A schedule whose snapshots fail reports each failure and removes no good snapshot."""
    await _filled(store, destination_factory)
    out = tmp_path / "snaps"
    good = [take_snapshot(store.path, out) for _ in range(2)]
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    seen: list[object] = []
    result = run_schedule(foreign, out, every_s=0.01, keep=1, count=3, on_snapshot=seen.append)
    assert result.taken == () and len(result.failures) == 3 and result.removed == ()
    assert all(isinstance(s, BackupError) for s in seen)
    assert list_snapshots(out) == [g.path for g in good]
    assert all(verify_snapshot(g.path).ok for g in good)


async def test_wal_shrinks_back_after_a_long_reader_goes_away(tmp_path: Path,
                                                              destination_factory, store):
    """While a reader holds an old snapshot the -wal file grows past a limit and a
    checkpoint reports busy; once the reader is gone the periodic maintenance task (ingest's)
    truncates it back under the limit, and stats() reports the size."""
    limit = 1024 * 1024
    await destination_factory("a")
    reader = sqlite3.connect(store.path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM events").fetchone()  # holds its snapshot
    body = b'{"pad": "' + b"x" * 20_000 + b'"}'
    for batch in range(10):
        await store.add_events([new_event(f"b{batch}-{i}", body=body) for i in range(10)])
    grown = (await store.health()).wal_bytes
    assert grown is not None and grown > limit
    held = await store.maintenance()
    assert held["busy"] == 1 and held["wal_bytes"] > limit

    reader.execute("ROLLBACK")
    reader.close()
    stop = asyncio.Event()
    task = asyncio.create_task(run_maintenance(store, 0.05, stop))
    try:
        for _ in range(200):
            if ((await store.health()).wal_bytes or 0) < limit:
                break
            await asyncio.sleep(0.05)
        assert ((await store.health()).wal_bytes or 0) < limit
    finally:
        stop.set()
        await task
    assert (await store.stats()).events == 100


def test_stale_temporaries_of_dead_backups_are_removed(tmp_path: Path):
    """Temporaries (and their SQLite sidecars) of a backup process that no longer runs are
    deleted; those of a live process and other files are not."""
    dead_pid = 2**22 + 12345  # above the default pid_max: no such process
    stale = [tmp_path / f".tmp-hookline-20250101T000000Z-{dead_pid}{ext}"
             for ext in (".db", ".json", ".db-journal")]
    live = tmp_path / f".tmp-hookline-20250101T000000Z-{os.getpid()}.db"
    other = tmp_path / "hookline-20250101T000000Z.db"
    for path in (*stale, live, other):
        path.write_bytes(b"x")
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])

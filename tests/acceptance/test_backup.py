"""`hookline backup` / `backup verify` / `restore` as real processes, against a database that
other processes keep writing to."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from procs import JSON_AUTH, ROOT, child_env, start_cli, stop, wait_until

from hookline.rehearsal.harness import free_port
from hookline.shared.store.backup_format import TEMP_PREFIX
from hookline.shared.store.backup_restore import verify_snapshot
from hookline.shared.store.backup_schedule import list_snapshots
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

WRITER = """
import asyncio, sys
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.models import NewEvent

async def main(path, name):
    store = SqliteStore(path)
    await store.open()
    n = 0
    try:
        while True:
            await store.add_events([
                NewEvent(source="w", source_event_id=f"{name}-{n + i}", type="push",
                         body=b'{"pad": "' + b"x" * 2000 + b'"}') for i in range(5)])
            n += 5
            await asyncio.sleep(0.002)
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

PAUSED_BACKUP = """
import sys, time
from hookline.shared.store.backup import take_snapshot

# `hookline backup`'s snapshot, stopped for a minute once checked, just before its renames
take_snapshot(sys.argv[1], sys.argv[2], before_rename=lambda: time.sleep(60))
"""


def hookline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                          capture_output=True, text=True, env={**child_env(), **(env or {})},
                          cwd=ROOT, timeout=60)


def count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(db, timeout=5)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def ids(db: Path) -> tuple[set[str], set[int]]:
    """(source_event_id of every event, id of every job) committed in `db`."""
    conn = sqlite3.connect(db, timeout=5)
    try:
        conn.execute("BEGIN")  # one snapshot for both reads
        events = {r[0] for r in conn.execute("SELECT source_event_id FROM events")}
        jobs = {r[0] for r in conn.execute("SELECT id FROM jobs")}
        conn.execute("COMMIT")
        return events, jobs
    finally:
        conn.close()


async def seed(db: Path) -> None:
    """A destination, 30 events, 3 of their jobs running under short leases, all an hour old
    (so a worker on a restored copy reaches them before the writers' newer jobs)."""
    store = SqliteStore(str(db), clock=lambda: time.time() - 3600)
    await store.open()
    try:
        await store.add_destination(name="a", url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "A" * 32, event_types=["*"],
                                    max_in_flight=10)
        await store.add_events([new_event(f"seed-{i}") for i in range(30)])
        assert len(await store.claim("old-worker", 3, 1.0, 5)) == 3
    finally:
        await store.close()


def test_backup_under_concurrent_writers_restores_everything(tmp_path: Path):
    """While two processes keep committing events, `hookline backup` takes a snapshot; it
    verifies, restores alone into a new directory, passes integrity_check, holds every event
    and job committed before the backup started, and `hookline serve` on it accepts new
    events with ids above the snapshot's."""
    live = tmp_path / "live" / "hookline.db"
    live.parent.mkdir()
    asyncio.run(seed(live))
    with (tmp_path / "writers.log").open("ab") as log:
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(live), f"w{n}"],
                                    env=child_env(), cwd=ROOT, stdout=log, stderr=log)
                   for n in (1, 2)]
    service = None
    try:
        wait_until(lambda: count(live, "SELECT COUNT(*) FROM events") > 230, 20,
                   "both writers committing")
        before_events, before_jobs = ids(live)
        backup = hookline("--db", str(live), "backup", "--out", str(tmp_path / "snaps"))
        assert backup.returncode == 0, backup.stderr
        after = count(live, "SELECT COUNT(*) FROM events")
        wait_until(lambda: count(live, "SELECT COUNT(*) FROM events") > after + 50, 20,
                   "writers still committing after the backup")
        assert all(w.poll() is None for w in writers), "a writer died"
    finally:
        for w in writers:
            w.send_signal(signal.SIGTERM)
            w.wait(timeout=10)

    [snap] = list_snapshots(tmp_path / "snaps")
    assert sorted(p.name for p in snap.parent.iterdir()) == [snap.name, snap.stem + ".json"]
    assert hookline("backup", "verify", str(snap)).returncode == 0
    into = tmp_path / "restored"
    restored = hookline("restore", str(snap), "--into", str(into))
    assert restored.returncode == 0, restored.stderr
    db = into / "hookline.db"
    assert sorted(p.name for p in into.iterdir()) == ["hookline.db"]

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    got_events, got_jobs = ids(db)
    assert before_events <= got_events, f"{len(before_events - got_events)} events lost"
    assert before_jobs <= got_jobs, f"{len(before_jobs - got_jobs)} jobs lost"
    assert len(got_events) >= len(before_events) > 230
    assert count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'running'") == 3
    max_event_id = json.loads(snap.with_suffix(".json").read_text())["max_event_id"]
    assert max_event_id == count(db, "SELECT MAX(id) FROM events")

    port = free_port()
    service = start_cli(["--db", str(db), "serve", "--workers", "1", "--listen",
                         f"127.0.0.1:{port}"], tmp_path / "serve.log")
    try:
        wait_until(lambda: _healthy(port), 20, "the service on the restored database")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/events", headers=JSON_AUTH,
            data=json.dumps({"id": "after-restore", "type": "push", "data": {}}).encode())
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 202
            assert json.loads(resp.read())["event_id"] > max_event_id
        # The jobs that were running at snapshot time get claimed again (leases expired).
        wait_until(lambda: count(db, "SELECT COUNT(*) FROM attempts WHERE error LIKE "
                                     "'lease expired%'") == 3, 20,
                   "the restored running jobs to be taken over")
    finally:
        assert stop(service) == 0


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_killed_backup_leaves_no_file_at_the_final_path(tmp_path: Path):
    """SIGKILL during a backup (checked, sleeping just before its rename) leaves no snapshot at
    a final name, the earlier snapshot still verifies, and the next backup (one shot with
    --keep 1) removes the dead one's temporaries and rotates."""
    live = tmp_path / "hookline.db"
    asyncio.run(seed(live))
    out = tmp_path / "snaps"
    assert hookline("--db", str(live), "backup", "--out", str(out)).returncode == 0
    [good] = list_snapshots(out)
    with (tmp_path / "slow.log").open("ab") as log:
        slow = subprocess.Popen([sys.executable, "-c", PAUSED_BACKUP, str(live), str(out)],
                                stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT)
    try:
        # The temporary manifest is written after the checks, just before the pause.
        wait_until(lambda: any(p.name.startswith(TEMP_PREFIX) and p.suffix == ".json"
                               for p in out.iterdir()), 20, "the backup's checked temporaries")
        slow.send_signal(signal.SIGKILL)
        slow.wait(timeout=10)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert list_snapshots(out) == [good]
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("hookline-")) == \
        [good.name, good.stem + ".json"]
    check = hookline("backup", "verify", str(good))
    assert check.returncode == 0, check.stderr

    again = hookline("--db", str(live), "backup", "--out", str(out), "--keep", "1")
    assert again.returncode == 0, again.stderr
    assert not [p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]
    [newest] = list_snapshots(out)
    assert newest != good and verify_snapshot(newest).ok


def test_every_keep_count_takes_n_keeps_k_all_verified(tmp_path: Path):
    """`backup --every 0.2 --keep 2 --count 4` takes 4 checked snapshots, keeps the newest 2,
    and both kept ones verify."""
    live = tmp_path / "hookline.db"
    asyncio.run(seed(live))
    out = tmp_path / "snaps"
    run = hookline("--db", str(live), "backup", "--out", str(out), "--every", "0.2",
                   "--keep", "2", "--count", "4")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count(" ok: ") == 4
    assert "4 snapshots taken, 0 failed, 2 rotated away, 2 kept" in run.stdout
    kept = list_snapshots(out)
    assert len(kept) == 2
    assert all(verify_snapshot(k).ok for k in kept)
    assert len(list(out.iterdir())) == 4  # two snapshots, two manifests


def test_backup_usage_errors_and_postgresql_refusal(tmp_path: Path):
    """Usage mistakes exit 2 with one line; a PostgreSQL URL is refused with a pointer to
    pg_dump; a snapshot that fails verify exits 1; a restore refused before writing anything
    (a snapshot that fails verification, a folder that is not empty) is bad input: exit 2."""
    pg = hookline("--db", "postgresql://u@localhost/db", "backup", "--out", str(tmp_path))
    assert pg.returncode == 2 and "pg_dump" in pg.stderr
    assert hookline("--db", str(tmp_path / "x.db"), "backup").returncode == 2
    assert hookline("--db", str(tmp_path / "x.db"), "backup", "--out", str(tmp_path / "s"),
                    "--every", "1").returncode == 2
    missing = hookline("--db", str(tmp_path / "x.db"), "backup", "--out", str(tmp_path / "s"))
    assert missing.returncode == 2 and "no database file" in missing.stderr
    assert not (tmp_path / "x.db").exists()
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database")
    assert hookline("backup", "verify", str(bad)).returncode == 1
    refused = hookline("restore", str(bad), "--into", str(tmp_path))
    assert refused.returncode == 2 and "not empty" in refused.stderr
    unverified = hookline("restore", str(bad), "--into", str(tmp_path / "new"))
    assert unverified.returncode == 2 and "failed verification" in unverified.stderr
    assert not (tmp_path / "new").exists()

"""Storage that cannot keep the promise is refused by the real `hookline` CLI: an in-memory
database, a damaged file at `serve` start, and a folder on a real FUSE mount (bindfs)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import JSON_AUTH, ROOT, child_env, start_cli, stop

from hookline.rehearsal.harness import free_port
from tests.pg import skip_or_fail_in_ci
from tests.unit.test_storage_checks import damage_middle_pages


def hookline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args], check=False,
                          capture_output=True,
                          text=True, env={**child_env(), **(env or {})}, cwd=ROOT, timeout=60)


def post_event(port: int) -> int | None:
    """POST one event; its HTTP status, or None when nothing answers."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/events",
                                     data=b'{"id": "e1", "type": "push", "data": {}}',
                                     headers=JSON_AUTH)
    try:
        with urllib.request.urlopen(request, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


def serve_until_exit(db: str, tmp_path: Path, env: dict[str, str] | None = None
                     ) -> tuple[int, str, set[int]]:
    """Run `hookline serve` on `db` and wait for it to exit by itself (60 s at most), posting
    events meanwhile; returns (exit code, its output, the statuses it answered)."""
    port = free_port()
    log = tmp_path / "serve.log"
    service = start_cli(["--db", db, "serve", "--workers", "1", "--listen", f"127.0.0.1:{port}"],
                        log, env=env)
    answered: set[int] = set()
    try:
        for _ in range(300):
            if service.poll() is not None:
                break
            status = post_event(port)
            if status is not None:
                answered.add(status)
            with contextlib.suppress(subprocess.TimeoutExpired):
                service.wait(timeout=0.2)
    finally:
        code = service.poll()
        if code is None:
            stop(service)
    assert code is not None, f"serve did not exit; it answered {answered}"
    return code, log.read_text(), answered


@pytest.mark.parametrize("db", [":memory:", "sqlite:///:memory:", "file::memory:",
                                "file:events.db?mode=memory", ""])
def test_destinations_add_refuses_in_memory_database(db: str):
    added = hookline("--db", db, "destinations", "add", "billing", "https://example.com/h")
    assert added.returncode == 2, added
    assert "shown once" not in added.stdout and added.stdout == ""
    assert "use a file path every hookline process shares" in added.stderr
    listed = hookline("destinations", "list", env={"HOOKLINE_DB": db})
    assert listed.returncode == 2 and "postgresql://" in listed.stderr


def test_serve_refuses_in_memory_database(tmp_path: Path):
    code, output, answered = serve_until_exit(":memory:", tmp_path)
    assert code == 2, output
    assert "in-memory database" in output and "use a file path" in output
    assert answered == set()  # nothing listened, so no event was answered 202


def test_serve_refuses_damaged_database_pointing_at_restore(tmp_path: Path):
    db = tmp_path / "hookline.db"
    assert hookline("--db", str(db), "init").returncode == 0
    assert hookline("--db", str(db), "destinations", "add", "a",
                    "http://127.0.0.1:9/a").returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        with conn:
            conn.execute("CREATE TABLE filler (id INTEGER PRIMARY KEY, blob BLOB)")
            conn.executemany("INSERT INTO filler (blob) VALUES (?)",
                             ((os.urandom(1000),) for _ in range(2000)))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damage_middle_pages(db)
    assert hookline("--db", str(db), "destinations", "list").returncode == 0  # still opens

    code, output, answered = serve_until_exit(str(db), tmp_path)
    assert code == 2, output  # refused before anything starts, as serve --check says
    assert "damaged" in output and "hookline restore SNAPSHOT --into NEWDIR" in output
    assert "child_started" not in output and answered == set()
    checked = hookline("--db", str(db), "serve", "--check")
    assert checked.returncode == 2 and "hookline restore" in checked.stderr


@pytest.fixture
def fuse_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder mounted with bindfs (FUSE) over another; unmounted afterwards. Where FUSE
    cannot be used (no /dev/fuse, or mounting is not permitted, e.g. in an unprivileged
    container) the test skips locally and says why; under CI it fails instead, since CI claims
    to test the refusal on a real FUSE mount."""
    if not Path("/dev/fuse").exists():
        skip_or_fail_in_ci("FUSE is unavailable here: no /dev/fuse")
    if shutil.which("bindfs") is None:
        skip_or_fail_in_ci("bindfs is not installed (make test installs it)")
    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir(mode=0o700)
    mounted.mkdir(mode=0o700)
    result = subprocess.run(["bindfs", str(source), str(mounted)], check=False,
                            capture_output=True,
                            text=True, timeout=30)
    if result.returncode != 0:
        skip_or_fail_in_ci("FUSE is unavailable here: bindfs could not mount "
                           f"({result.stderr.strip()})")
    try:
        yield mounted
    finally:
        unmount = shutil.which("fusermount3") or shutil.which("fusermount") or "umount"
        subprocess.run([unmount, "-u", str(mounted)] if "fusermount" in unmount
                       else [unmount, str(mounted)], check=False, timeout=30)


def test_database_on_fuse_mount_refused_unless_opted_in(fuse_folder: Path, tmp_path: Path):
    db = str(fuse_folder / "hookline.db")
    added = hookline("--db", db, "destinations", "add", "a", "https://example.com/h")
    assert added.returncode == 2, added
    assert "fuse filesystem" in added.stderr and "allow_network_filesystem" in added.stderr
    assert added.stdout == "" and not os.path.exists(db)
    code, output, answered = serve_until_exit(db, tmp_path)
    assert code == 2 and "fuse filesystem" in output and answered == set()

    opted_in = {"HOOKLINE_ALLOW_NETWORK_FILESYSTEM": "1"}
    assert hookline("--db", db, "init", env=opted_in).returncode == 0
    added = hookline("--db", db, "destinations", "add", "a", "https://example.com/h",
                     env=opted_in)
    assert added.returncode == 0, added.stderr
    listed = hookline("--db", db, "destinations", "list", env=opted_in)
    assert listed.returncode == 0 and "example.com" in listed.stdout

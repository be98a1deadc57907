"""After an upgrade: a database from an older hookline is migrated by the first process of the
new version that opens it, and says so; but the CLI does not migrate it under a service that
still runs (the older version, until its restart), whose statements could then fail.

Real SQLite files, the real CLI in subprocesses, the service lock held as `hookline serve`
holds it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from procs import ROOT, child_env, wait_until
from test_serve_production import Service

from hookline.shared.process.service_lock import hold_database
from hookline.shared.store.backup_format import schema_version
from hookline.shared.store.sqlite import SCHEMA_VERSION
from tests.unit.test_store_tenant_migration import BEFORE_TENANTS, make_old_database


def schema_version_of(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return schema_version(conn)


def hookline(db: Path, *args: str, log_file: Path | None = None
             ) -> subprocess.CompletedProcess[str]:
    env = child_env() | ({"HOOKLINE_LOG_FILE": str(log_file)} if log_file else {})
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", "--db", str(db),
                           *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=60)


async def test_the_cli_leaves_a_served_old_database_alone_and_init_says_it_migrated(
        tmp_path: Path):
    db = tmp_path / "old.db"
    await make_old_database(str(db))
    fd = os.open(str(db) + ".serve.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as the older, running `hookline serve` holds it
        os.pwrite(fd, json.dumps({"pid": 4242, "listen": "127.0.0.1:8080"}).encode(), 0)
        for command in (["stats"], ["serve", "--check"]):
            refused = hookline(db, *command)
            assert refused.returncode == 1, (command, refused.stderr)
            assert f"has schema {BEFORE_TENANTS}" in refused.stderr
            assert "supervisor pid 4242" in refused.stderr
            assert "restart the service" in refused.stderr
            assert schema_version_of(db) == BEFORE_TENANTS  # untouched
    finally:
        os.close(fd)
    # The service stopped (its restart on the new version migrates; `init` does the same).
    log_file = tmp_path / "hookline.log"
    migrated = hookline(db, "--log-level", "info", "init", log_file=log_file)
    assert migrated.returncode == 0, migrated.stderr
    assert f"migrated forward from schema {BEFORE_TENANTS}" in migrated.stdout
    assert "schema_migrated" in migrated.stderr
    assert "schema_migrated" in log_file.read_text()  # where the service's lines go
    assert schema_version_of(db) == SCHEMA_VERSION
    again = hookline(db, "init")
    assert again.returncode == 0 and "nothing to migrate" in again.stdout, again.stdout
    assert hookline(db, "stats").returncode == 0


def test_the_cli_waits_for_no_copy_and_init_names_what_it_did(tmp_path: Path):
    """While `migrate-store` holds a database, a CLI command says so at once (it would
    otherwise wait for the copy's write lock and fail as "database is locked"); `init` on an
    existing empty file says it created the schema."""
    db = tmp_path / "h.db"
    db.touch()
    created = hookline(db, "init")
    assert created.returncode == 0 and "schema created" in created.stdout, created.stdout
    with hold_database(str(db), "hookline migrate-store"):
        refused = hookline(db, "destinations", "list")
    assert refused.returncode == 1
    assert f"being copied by hookline migrate-store pid {os.getpid()}" in refused.stderr


def test_no_child_starts_on_code_replaced_under_the_service(tmp_path: Path):
    """An upgrade under a running service (here: a migration added to the code it was started
    from), then a worker killed: the supervisor does not start the new code beside the old
    processes, whose database it would migrate under them. It stops the whole service with
    exit 75 (systemd then starts all of it again on the new code), saying what changed, and
    the database keeps its schema. Before, the respawned worker migrated it."""
    code = tmp_path / "code"
    shutil.copytree(ROOT / "hookline", code / "hookline",
                    ignore=shutil.ignore_patterns("__pycache__"))
    svc = Service(tmp_path, "ok", workers=1, env={"PYTHONPATH": str(code)})
    try:
        wait_until(lambda: svc.ready() and "worker-1" in svc.workers(), 30,
                   "the service to be ready")
        migrations = code / "hookline" / "shared" / "store" / "queries" / "sqlite_migrations"
        (migrations / "999_upgrade_trial.sql").write_text(
            "CREATE TABLE upgrade_trial (x INTEGER);\n")
        os.kill(svc.workers()["worker-1"], signal.SIGKILL)
        assert svc.proc.wait(60) == 75
        [changed] = svc.log("code_changed_on_disk")
        assert changed["slot"] == "worker-1" and "sqlite 999" in changed["change"]
        assert f"sqlite {SCHEMA_VERSION}" in changed["change"]
        assert "stopping the service (exit 75)" in svc.out.read_text()
        assert schema_version_of(Path(svc.db)) == SCHEMA_VERSION
    finally:
        svc.close()

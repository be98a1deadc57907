"""The shipped systemd units pass `systemd-analyze verify`, and the service's restart settings
agree with the exit codes hookline uses: a transient fault (75) is restarted, an invalid
configuration (2) or a permanent misconfiguration (3) is not."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

from hookline.shared.config import Config
from hookline.shared.process.lifecycle import (
    BOOT_ERROR_EXIT,
    REFUSED_EXIT,
    TRANSIENT_EXIT,
    pid_file,
    runtime_dir,
)
from tests.pg import skip_or_fail_in_ci

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNITS = ("hookline.service", "hookline-backup.service", "hookline-backup.timer")


def _settings(unit: str) -> dict[str, str]:
    """The unit's `Key=value` lines (last one wins, as in systemd)."""
    values = {}
    for line in (DEPLOY / unit).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def test_units_verify(tmp_path):
    """Each unit verifies, with its /usr/local/bin/hookline pointed at a real executable
    (the units are otherwise installed as shipped)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        skip_or_fail_in_ci("systemd-analyze is missing (Debian package systemd; make test "
                           "installs it)")
    for unit in UNITS:
        text = (DEPLOY / unit).read_text().replace("/usr/local/bin/hookline",
                                                   str(Path(sys.executable)))
        (tmp_path / unit).write_text(text)
    result = subprocess.run([analyze, "verify", *(str(tmp_path / u) for u in UNITS)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if any(unit in line for unit in UNITS)]
    assert problems == [], problems


def test_restart_settings_match_exit_codes():
    service = _settings("hookline.service")
    assert service["Restart"] == "on-failure"  # restarts 75 (and a crash's 1)
    prevented = {int(code) for code in service["RestartPreventExitStatus"].split()}
    assert prevented == {REFUSED_EXIT, BOOT_ERROR_EXIT}
    assert TRANSIENT_EXIT not in prevented
    assert service["Type"] == "notify"  # READY=1 is sent once every slot is ready


def test_exit_codes_are_documented():
    """OPERATIONS.md names every exit code the unit's settings depend on."""
    operations = " ".join((DEPLOY.parent / "OPERATIONS.md").read_text().split())
    for said in (f"| {REFUSED_EXIT} | refused before anything starts",
                 f"| {BOOT_ERROR_EXIT} | a permanent misconfiguration",
                 f"| {TRANSIENT_EXIT} | the database is away",
                 f"RestartPreventExitStatus={REFUSED_EXIT} {BOOT_ERROR_EXIT}"):
        assert said in operations, said


def _directories(unit: str) -> list[Path]:
    """The folders systemd creates for `unit` and leaves writable under ProtectSystem=strict:
    StateDirectory= (under /var/lib), RuntimeDirectory= (/run), LogsDirectory= (/var/log)."""
    settings = _settings(unit)
    roots = {"StateDirectory": "/var/lib", "RuntimeDirectory": "/run",
             "LogsDirectory": "/var/log"}
    return [Path(root) / name for key, root in roots.items()
            for name in settings.get(key, "").split()]


def _inside(path: Path, folders: list[Path]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


def test_every_path_the_service_writes_is_a_folder_systemd_creates():
    """Under ProtectSystem=strict only the unit's own directories are writable: the database,
    runtime folder, pid file and log file the shipped config names all lie in them, for SQLite
    and for PostgreSQL (whose runtime files would otherwise default to the working directory,
    `/`, read-only), and nothing else is made writable."""
    service = _settings("hookline.service")
    assert service["ProtectSystem"] == "strict" and "ReadWritePaths" not in service
    assert service["Environment"] == "HOOKLINE_CONFIG=%d/hookline.toml"
    assert service["LoadCredential"] == "hookline.toml:/etc/hookline/hookline.toml"
    writable = _directories("hookline.service")
    config = Config.load(file=DEPLOY / "hookline.toml")
    for postgres in (False, True):
        db = "postgresql://hookline@db.internal/hookline" if postgres else config.db
        effective = dataclasses.replace(config, db=db)
        written = [runtime_dir(effective) / "status.json", pid_file(effective)]
        if not postgres:
            written.append(Path(db))
        assert config.log_file is not None
        written.append(Path(config.log_file))
        outside = [str(p) for p in written if not _inside(p, writable)]
        assert outside == [], f"not writable under the unit: {outside} ({writable})"


def test_backup_unit_writes_into_folders_it_creates():
    """The backup oneshot's --out folder and the database's folder are StateDirectory=
    entries (created when missing), so ProtectSystem=strict cannot fail it."""
    backup = _settings("hookline-backup.service")
    assert backup["ProtectSystem"] == "strict" and "ReadWritePaths" not in backup
    out = Path(backup["ExecStart"].split("--out ")[1].split()[0])
    writable = _directories("hookline-backup.service")
    db = Path(Config.load(file=DEPLOY / "hookline.toml").db)
    assert out in writable and _inside(db, writable), (out, db, writable)
    assert backup["Environment"] == _settings("hookline.service")["Environment"]

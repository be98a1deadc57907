"""An operator action's audit line names the person as well as the effective user when the
CLI runs under `runuser -u` (or `sudo -u`): `os_user` is who did the work, `invoked_by` who
switched to it."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from procs import ROOT, child_env

OTHER_USER = "postgres"  # exists wherever the tests' PostgreSQL server runs


def cli(db: Path, *args: str, env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (), python: str = sys.executable
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, python, "-P", "-m", "hookline.supervisor.cli", "--db", str(db),
                           *args],
                          capture_output=True, text=True, env={**child_env(), **(env or {})},
                          cwd="/", timeout=60)


def audit_line(stderr: str, event: str) -> dict[str, Any]:
    [line] = [json.loads(raw) for raw in stderr.splitlines()
              if raw.startswith("{") and json.loads(raw)["event"] == event]
    return line


def python_for(user: pwd.struct_passwd) -> tuple[str, dict[str, str]]:
    """An interpreter `user` may run, with the import path to this checkout and its packages.

    This interpreter may live where another user cannot reach (a pyenv under /root); the
    system's own python3 of the same version then runs the same code."""
    reachable = subprocess.run(["runuser", "-u", user.pw_name, "--", "test", "-x",
                                sys.executable]).returncode == 0
    if reachable:
        return sys.executable, {}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = Path("/usr/bin") / version
    assert system.exists(), f"{user.pw_name} cannot run {sys.executable} and there is no {system}"
    site = sysconfig.get_paths()["purelib"]
    # The editable installs' path hooks live in site's .pth files, which a PYTHONPATH entry
    # does not run: the checkout's two import roots are named here.
    client = ROOT / "shared" / "client"
    return str(system), {"PYTHONPATH": os.pathsep.join((str(ROOT), str(client), site))}


@contextlib.contextmanager
def traversable(paths: list[Path]) -> Iterator[None]:
    """Let every user read the folders `paths` (import path entries) and pass through the
    folders above them, for the test's duration.

    A checkout may sit in or under a private folder (`mktemp -d` makes 0700 ones); the other
    user must reach this checkout and its environment's packages to run the CLI, and Python's
    importer lists each import path entry. Above those only the search bit is added (nothing
    there becomes listable); each folder's mode is put back after."""
    changed: dict[Path, int] = {}

    def allow(folder: Path, bits: int) -> None:
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode & bits != bits:
            changed.setdefault(folder, mode)
            folder.chmod(mode | bits)

    for path in paths:
        allow(path, stat.S_IROTH | stat.S_IXOTH)
        for folder in path.parents:
            allow(folder, stat.S_IXOTH)
    try:
        yield
    finally:
        for folder, mode in changed.items():
            folder.chmod(mode)


def test_audit_line_under_runuser_names_the_effective_and_the_invoking_user():
    """Root runs `runuser -u postgres -- hookline pause`: `os_user` postgres, `invoked_by`
    root; SUDO_USER (what sudo sets) is named the same way."""
    assert os.geteuid() == 0, "the acceptance tests run as root (as CI does)"
    other = pwd.getpwnam(OTHER_USER)
    with tempfile.TemporaryDirectory(prefix="hookline-audit-") as folder:
        db = Path(folder) / "audit.db"
        assert cli(db, "init").returncode == 0
        added = cli(db, "destinations", "add", "d", "http://127.0.0.1:9/hook")
        assert added.returncode == 0, added.stderr
        for path in [Path(folder), *Path(folder).iterdir()]:
            os.chown(path, other.pw_uid, other.pw_gid)
        site = Path(sysconfig.get_paths()["purelib"])
        with traversable([ROOT, site, Path(folder)]):
            python, env = python_for(other)
            paused = cli(db, "pause", "d", "--reason", "maintenance", env=env, python=python,
                         prefix=("runuser", "-u", OTHER_USER, "--"))
        assert paused.returncode == 0, paused.stderr
        line = audit_line(paused.stderr, "destination_paused")
        assert line["os_user"] == OTHER_USER and line["invoked_by"] == "root", line
        resumed = cli(db, "resume", "d", env={"SUDO_USER": "alice"})
        assert resumed.returncode == 0, resumed.stderr
        line = audit_line(resumed.stderr, "destination_resumed")
        assert line["os_user"] == "root" and line["invoked_by"] == "alice", line

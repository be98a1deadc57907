"""Mistakes do not pass silently: only `serve` and `hookline init` create a database (every
other command refuses a missing SQLite file with exit 2, naming the path and `init`), a
mistyped HOOKLINE_* variable is warned about with the closest name, and `serve --check`
fails when the service would refuse every request or cannot listen. In-process CLI calls
(`hookline.supervisor.cli.main`) on real files and sockets."""

from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from hookline.shared.config import Config
from hookline.shared.process.service_lock import ServiceLock
from hookline.supervisor.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]

# Commands that only use an existing database (the `with_store` ones).
EXISTING_DB_COMMANDS = [
    ["stats"], ["jobs"], ["destinations", "list"], ["destinations", "show", "x"],
    ["destinations", "add", "x", "https://example.com/h"], ["sources", "list"],
    ["sources", "add", "gh", "--scheme", "github"], ["dead"], ["job", "1"],
    ["pause", "x"], ["resume", "x"], ["replay", "--all-dead", "--since", "1h"],
    ["purge", "--bodies-older-than", "7d"],
]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("HOOKLINE_"):
            monkeypatch.delenv(name)
    yield
    structlog.reset_defaults()  # init pointed the logs at the captured (now closed) stderr


@pytest.mark.parametrize("command", EXISTING_DB_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_missing_database_is_refused_not_created(tmp_path: Path, capsys, command):
    db = tmp_path / "typo.db"
    assert cli_main(["--db", str(db), *command]) == 2
    err = capsys.readouterr().err
    assert f"no database at {db}" in err and f"hookline --db {db} init" in err, err
    assert list(tmp_path.iterdir()) == []  # no file, no -wal, no lock, no wake folder


def test_init_creates_once_then_only_migrates(tmp_path: Path, capsys):
    db = tmp_path / "h.db"
    assert cli_main(["--db", str(db), "init"]) == 0
    assert f"created database {db}" in capsys.readouterr().out
    assert db.stat().st_mode & 0o777 == 0o600
    assert cli_main(["--db", str(db), "destinations", "add", "x", "https://example.com/h"]) == 0
    assert cli_main(["--db", str(db), "init"]) == 0
    assert "already existed" in capsys.readouterr().out
    assert cli_main(["--db", str(db), "destinations", "show", "x"]) == 0  # kept


def test_unknown_environment_variables_are_warned_about(tmp_path: Path, capsys,
                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOOKLINE_HTTPS_ONL", "1")
    monkeypatch.setenv("HOOKLINE_ZZZ", "1")
    monkeypatch.setenv("HOOKLINE_PG_BIN", "/usr/lib/postgresql/15/bin")  # known, not a setting
    monkeypatch.setenv("HOOKLINE_DB", str(tmp_path / "h.db"))
    assert cli_main(["init"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        "hookline: warning: unknown environment variable HOOKLINE_HTTPS_ONL is ignored "
        "(did you mean HOOKLINE_HTTPS_ONLY?)",
        "hookline: warning: unknown environment variable HOOKLINE_ZZZ is ignored "
        "(`hookline --help` lists the settings)"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_check(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch):
    """--check creates nothing; it fails (exit 2) without tokens, with the listen address
    taken (unless the running service's lock file says it listens there), or with a runtime
    folder it cannot write; else 0."""
    db = tmp_path / "h.db"
    listen = f"127.0.0.1:{_free_port()}"
    check = ["--db", str(db), "serve", "--check", "--listen", listen]
    assert cli_main(check) == 2
    err = capsys.readouterr().err
    assert "ingest_token is not set: POST /v1/events would refuse every event" in err
    assert "admin_token is not set" in err and not db.exists()
    assert "does not exist yet" in err
    monkeypatch.setenv("HOOKLINE_ADMIN_TOKEN", "a" * 32)
    monkeypatch.setenv("HOOKLINE_INGEST_TOKEN", "i" * 32)
    assert cli_main(check) == 0 and not db.exists()
    assert cli_main(["--db", str(db), "init"]) == 0
    capsys.readouterr()
    assert cli_main(check) == 0
    # Sentences for a person at a terminal, not serve's JSON log lines.
    err = capsys.readouterr().err
    assert f"database {db}: PRAGMA quick_check ok (" in err and err.endswith("ok\n")
    assert not any(line.startswith("{") for line in err.splitlines()), err
    host, port = listen.rsplit(":", 1)
    with socket.socket() as taken:
        taken.bind((host, int(port)))
        taken.listen()
        assert cli_main(check) == 2
        assert f"listen: cannot listen on {listen}" in capsys.readouterr().err
        # Held by the running service (its pid file names this live process, whose locks
        # record that it listens there): not a failure.
        (tmp_path / "h.db.pid").write_text(f"{os.getpid()}\n")
        with ServiceLock.take(Config(db=str(db), listen=listen)):
            assert cli_main(check) == 0
        assert "presumably by the running service" in capsys.readouterr().err
        (tmp_path / "h.db.pid").unlink()
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv("HOOKLINE_RUNTIME_DIR", str(not_a_folder / "run"))
    assert cli_main(check) == 2
    assert f"runtime_dir: cannot write {not_a_folder / 'run'}" in capsys.readouterr().err


def test_serve_check_exit_codes_follow_the_cli_rule(tmp_path: Path, capsys,
                                                   monkeypatch: pytest.MonkeyPatch):
    """A problem found (here a port an unrelated process holds, which `serve` would meet at
    start) is the CLI's exit 2 for something to change, ending `check failed`; a database it
    cannot reach is a failure at run time, exit 1, ending `check not completed`, the rest
    unchecked."""
    monkeypatch.setenv("HOOKLINE_ADMIN_TOKEN", "a" * 32)
    monkeypatch.setenv("HOOKLINE_INGEST_TOKEN", "i" * 32)
    monkeypatch.setenv("HOOKLINE_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("HOOKLINE_PID_FILE", str(tmp_path / "hookline.pid"))
    db = tmp_path / "h.db"
    assert cli_main(["--db", str(db), "init"]) == 0
    capsys.readouterr()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        assert cli_main(["--db", str(db), "serve", "--check", "--listen", listen]) == 2
        err = capsys.readouterr().err
        assert f"listen: cannot listen on {listen}: Address already in use" in err
        assert err.endswith("check failed\n"), err
        # No server: nothing listens on a port just freed.
        unreachable = f"postgresql://u@127.0.0.1:{_free_port()}/hookline"
        assert cli_main(["--db", unreachable, "serve", "--check", "--listen", listen]) == 1
    err = capsys.readouterr().err
    assert f"cannot connect to {unreachable}" in err and "cannot listen" not in err
    assert err.endswith("check not completed\n"), err


def test_serve_check_of_a_database_that_does_not_exist_is_a_problem_found(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, pg_url: str):
    """A PostgreSQL server that answers but has no such database refuses the settings for
    good: exit 2, `check failed`, as a problem found (not 1, `check not completed`, which
    says to try again)."""
    monkeypatch.setenv("HOOKLINE_ADMIN_TOKEN", "a" * 32)
    monkeypatch.setenv("HOOKLINE_INGEST_TOKEN", "i" * 32)
    monkeypatch.setenv("HOOKLINE_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("HOOKLINE_PID_FILE", str(tmp_path / "hookline.pid"))
    missing = pg_url.rsplit("/", 1)[0] + "/no_such_database"
    assert cli_main(["--db", missing, "serve", "--check", "--listen",
                     f"127.0.0.1:{_free_port()}"]) == 2
    err = capsys.readouterr().err
    assert "no_such_database" in err and err.endswith("check failed\n"), err


def test_an_action_s_audit_line_is_readable_at_a_terminal(tmp_path: Path):
    """At a terminal the CLI's own log lines (here rotation's audit line) read like `hookline
    logs`; piped, and in the log file, they stay JSON lines."""
    db, log = tmp_path / "h.db", tmp_path / "h.log"
    assert cli_main(["--db", str(db), "init"]) == 0
    assert cli_main(["--db", str(db), "destinations", "add", "d1",
                     "https://example.com/hook"]) == 0
    rotate = [sys.executable, "-m", "hookline.supervisor.cli", "--db", str(db), "destinations",
              "rotate-secret", "d1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1",
           "HOOKLINE_LOG_FILE": str(log)}
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(rotate, stdout=subprocess.DEVNULL, stderr=follower, env=env,
                              cwd=tmp_path, timeout=60, check=False)
        os.close(follower)
        shown = b""
        while chunk := _read_pty(leader):
            shown += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0
    [line] = [line for line in shown.decode().splitlines() if "secret_rotated" in line]
    assert re.match(r"\d{4}-\d\d-\d\dT\S+Z info +cli\[\d+\] +secret_rotated +destination=d1 ",
                    line), line
    assert '"event": "secret_rotated"' in log.read_text()
    piped = subprocess.run(rotate, capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=60, check=False)
    assert piped.returncode == 0 and '"event": "secret_rotated"' in piped.stderr, piped


def _read_pty(fd: int) -> bytes:
    """What the terminal shows next; b"" once the writer closed it."""
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: every writer is gone
        return b""


def test_config_show_says_where_unset_runtime_paths_default_to(tmp_path: Path, capsys):
    """Unset `runtime_dir` and `pid_file` are shown as the paths they default to (beside a
    SQLite file; in the working folder for PostgreSQL), which two hosts must not share;
    `--json` keeps the settings as set (null)."""
    db = tmp_path / "h.db"
    assert cli_main(["--db", str(db), "config", "show"]) == 0
    shown = capsys.readouterr().out
    assert re.search(rf"runtime_dir +\(default\) {re.escape(str(db))}\.run\n", shown), shown
    assert re.search(rf"pid_file +\(default\) {re.escape(str(db))}\.pid\n", shown), shown
    assert cli_main(["--db", str(db), "config", "show", "--json"]) == 0
    settings = json.loads(capsys.readouterr().out)
    assert (settings["runtime_dir"], settings["pid_file"]) == (None, None)

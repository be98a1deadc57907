"""Exit codes of the real `hookline` console script: 2 with a one-line message for usage and
validation errors in every command group, 1 for an operation that failed at run time."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from procs import ROOT, child_env


def _hookline_script() -> str:
    """The installed `hookline` entry point (pyproject's [project.scripts]) beside python."""
    beside = Path(sys.executable).parent / "hookline"
    found = str(beside) if beside.exists() else shutil.which("hookline")
    assert found, "the hookline console script is not installed (pip install -e .)"
    return found


def hookline(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_hookline_script(), "--db", str(db), *args], capture_output=True,
                          check=False, text=True, env=child_env(), cwd=ROOT, timeout=60)


USAGE_ERRORS = [
    # (arguments, text the one-line message contains)
    (["destinations", "add", "billing~removed-1", "https://example.com/h"], "name: must not"),
    (["destinations", "add", "b", "https://example.com/h", "--max-in-flight", "0"],
     "max_in_flight: must be an integer from 1"),
    (["destinations", "add", "b", "https://example.com/h", "--header", "X-A"],
     "--header needs 'NAME: VALUE'"),
    (["destinations", "update", "d", "--set", "timeout_s=-1"], "timeout_s: must be a number"),
    (["destinations", "update", "d"], "nothing to change"),
    (["sources", "add", "st", "--scheme", "stripe"], "needs --secret"),
    (["sources", "add", "api", "--scheme", "token", "--secret", "t" * 20], "reserved"),
    (["purge", "--bodies-older-than", "40d"], "bodies_older_than: must be at most"),
    (["dead", "--since", "yesterday-ish"], "not a time"),
    (["replay", "--job", "1", "--destination", "d"], "filter --all-dead"),
    (["logs", "--since", "never"], "--since: not a time"),
    (["logs"], "no log file"),
    (["scale", "0"], "N must be at least 1"),
    (["backup", "--out", "x", "--keep", "0"], "--keep must be at least 1"),
    (["migrate-store", "--from", "postgresql://h/db", "--to", "postgresql://h/db2"],
     "--from must be a SQLite"),
    (["jobs", "--status", "nope"], "invalid choice"),
    (["events", "--status", "nope"], "invalid choice"),
    (["destinations", "add", "meta", "http://169.254.169.254/latest/meta-data"],
     "url: destination address"),
    (["destinations", "update", "d", "--url", "http://169.254.169.254/h"], "url: destination"),
    (["backup", "--out", "snaps"], "no database file"),
    (["migrate-store", "--from", "missing.db", "--to", "postgresql://h/db"],
     "--from: no SQLite database"),
    (["migrate-store", "--from", "sqlite:///var/lib/h.db", "--to", "postgresql://h/db"],
     "an absolute path is sqlite:////PATH, with four slashes"),
    (["resend", "3", "--destination", "d"], "give a JOB_ID or --destination"),
    (["maintenance", "recount-metrics"], "no database at"),
    (["maintenance", "recount-metrics", "--destination", "d"], "unrecognized arguments"),
    (["jobs", "--limit", "-5"], "limit: must be from 1 to 10000"),
    (["jobs", "--limit", "99999999"], "limit: must be from 1 to 10000"),
    (["jobs", "--limit", "0"], "limit: must be from 1 to 10000"),
    (["dead", "--limit", "-1"], "limit: must be from 1 to 10000"),
    (["send", "x.y", "--data-file", "/nonexistent/data.json", "--token", "t"],
     "--data-file: cannot read /nonexistent/data.json"),
    (["destinations", "add", "b", "http://example.com:99999/h"], "url: port must be"),
    # job and event ids past what the store holds, or below 1: not a driver's overflow
    *[(args, "must be from 1 to 9223372036854775807") for args in (
        ["job", "99999999999999999999999"], ["job", "-1"], ["replay", "--job", "-5"],
        ["resend", "-3"], ["retry-now", "99999999999999999999999"],
        ["events", "--before", "0"])],
]

USAGE_ERRORS_ON_A_DATABASE = [
    # (arguments, text the one-line message contains): checked once the store is open
    (["resend", "--destination", "d", "--limit", "0"], "limit: must be from 1"),
    (["resend", "--destination", "d", "--since", "1h", "--until", "2h"],
     "until: must be after since"),
    (["retry-now", "--destination", "d", "--limit", "20000"], "limit: must be from 1"),
    (["event", "x" * 600], "ref: an event reference"),
    (["event", "e1", "--source", "s" * 600], "source: must be a source name"),
    (["events", "--limit", "0"], "limit: must be from 1"),
    (["events", "--since", "1h", "--until", "2h"], "until: must be after since"),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS,
                         ids=[" ".join(a)[:50] for a, _ in USAGE_ERRORS])
def test_usage_and_validation_errors_exit_2_with_one_line(tmp_path: Path, args: list[str],
                                                          message: str):
    """Every command group: a bad flag or value exits 2 with its message, no traceback,
    and nothing is stored."""
    db = tmp_path / "h.db"
    done = hookline(db, *args)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    if "argument" not in done.stderr:  # argparse prints its usage first; ours is one line
        assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS_ON_A_DATABASE,
                         ids=[" ".join(a)[:50] for a, _ in USAGE_ERRORS_ON_A_DATABASE])
def test_validation_errors_on_an_existing_database_exit_2(tmp_path: Path, args: list[str],
                                                          message: str):
    """Selections checked once the store is open (ages are counted on its clock) are bad
    input too: exit 2 with the rule book's one line naming the field."""
    db = tmp_path / "h.db"
    assert hookline(db, "init").returncode == 0
    done = hookline(db, *args)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_runtime_failures_exit_1(tmp_path: Path):
    """Not found, a taken name, an unreachable database, no running supervisor: exit 1."""
    db = tmp_path / "h.db"
    assert hookline(db, "init").returncode == 0
    first = hookline(db, "destinations", "add", "b", "https://example.com/h")
    assert first.returncode == 0, first.stderr
    taken = hookline(db, "destinations", "add", "b", "https://example.com/h")
    assert taken.returncode == 1 and "already exists" in taken.stderr
    missing = hookline(db, "pause", "nope")
    assert missing.returncode == 1 and "nope" in missing.stderr
    no_source = hookline(db, "sources", "remove", "gh")
    assert no_source.returncode == 1 and "no source named 'gh'" in no_source.stderr
    no_job = hookline(db, "job", "14")  # an event's number, say: the message says so
    assert no_job.returncode == 1 and no_job.stderr.strip() == (
        "hookline: no job with id 14 (job and event numbers differ: `hookline event 14` "
        "shows event 14 and its jobs)")
    no_supervisor = hookline(db, "scale", "2")
    assert no_supervisor.returncode == 1 and "no running supervisor" in no_supervisor.stderr
    unreachable = subprocess.run(
        [_hookline_script(), "--db", "postgresql://postgres@127.0.0.1:1/x", "stats"],
        capture_output=True, check=False, text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert unreachable.returncode == 1 and "cannot connect" in unreachable.stderr
    for failed in (taken, missing, no_source, no_job, no_supervisor, unreachable):
        assert "Traceback" not in failed.stderr

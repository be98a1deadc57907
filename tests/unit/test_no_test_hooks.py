"""Production code carries no test hooks: no test-only Config field or `HOOKLINE_*` variable,
no event-type crash in the worker, no pause in `hookline backup`. The rehearsal's poison job
runs its own hooked entry points (rehearsal/hooked_serve.py, rehearsal/hooked_worker.py);
tests/acceptance/test_poison_quarantine.py and the rehearsal's `poison_job` exercise them.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from hookline.shared.config import OTHER_ENV_NAMES, Config
from hookline.supervisor.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("supervisor", "ingest", "workers", "shared")
# What the hooks were called, and what a new one would likely be called.
HOOK_MARKERS = ("test_crash", "TEST_CRASH", "HOOKLINE_TEST_", "TEST_BACKUP", "TEST HOOK",
                "pause_before_rename", "drill_crash", "CrashingSender")
SELF_KILL = "os.kill(os.getpid()"


def _production_sources() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
            for folder in PRODUCTION for path in sorted((ROOT / folder).rglob("*.py"))}


def test_config_has_no_test_only_field_or_variable() -> None:
    fields = {f.name: f.metadata["doc"] for f in dataclasses.fields(Config)}
    assert [name for name in fields if name.startswith("test_")] == []
    assert [name for name, doc in fields.items()
            if "test hook" in doc.lower() or "rehears" in doc.lower()] == []
    assert [name for name in OTHER_ENV_NAMES if "TEST" in name] == []
    help_text = build_parser().format_help()
    assert "TEST" not in help_text.replace("HOOKLINE_", ""), "a test setting in --help"


def test_production_modules_name_no_hook() -> None:
    sources = _production_sources()
    assert len(sources) > 100, "the production modules were not found"
    found = [f"{path}: {marker}" for path, text in sources.items()
             for marker in HOOK_MARKERS if marker in text]
    assert found == [], "test hooks belong to rehearsal/ or tests/:\n" + "\n".join(found)


def test_no_worker_kills_itself() -> None:
    sources = _production_sources()
    assert [path for path, text in sources.items()
            if path.startswith("workers/") and (SELF_KILL in text or "SIGKILL" in text)] == []


def test_the_hooked_worker_refuses_to_start_without_its_event_type(tmp_path: Path) -> None:
    """Started without the variable rehearsal/hooked_serve.py sets, the hooked worker exits 3
    (misconfigured: a respawn would not help) before opening anything, instead of running as
    a plain worker and letting a poison drill pass without a crash."""
    config = Config(db=str(tmp_path / "never-opened.db"))
    run = subprocess.run([sys.executable, "-P", "-m", "hookline.rehearsal.hooked_worker",
                          "--config-json", config.to_json(), "--slot", "worker-1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert run.returncode == 3, run.stderr
    assert "REHEARSAL_CRASH_EVENT_TYPE is not set" in run.stdout + run.stderr
    assert not (tmp_path / "never-opened.db").exists()


def test_the_hooked_service_runs_serve_only() -> None:
    run = subprocess.run([sys.executable, "-P", "-m", "hookline.rehearsal.hooked_serve",
                          "--crash-event-type", "drill.poison", "jobs"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert run.returncode == 2, run.stderr
    assert "runs `serve` only" in run.stderr


DRILLS = ("rehearse", "demo", "receiver", "bench", "bench-table")


def test_help_lists_what_operators_use_first_and_the_drills_last() -> None:
    """`hookline --help`: serve first, then the operators' commands, then the drills, each
    marked as one; every drill is still there."""
    [commands] = [a for a in build_parser()._subparsers._group_actions
                  if a.dest == "command"]
    names = [c.dest for c in commands._choices_actions]
    helps = {c.dest: c.help or "" for c in commands._choices_actions}
    assert names[0] == "serve"
    assert names[-len(DRILLS):] == list(DRILLS), names
    assert all(helps[n].startswith("drill: ") for n in DRILLS)
    assert not [n for n in names[:-len(DRILLS)] if helps[n].startswith("drill")]

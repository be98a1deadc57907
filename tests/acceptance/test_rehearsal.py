"""`hookline rehearse --quick` on real processes: every quick scenario it runs passes and the
evidence files are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from procs import ROOT, child_env

from hookline.rehearsal.scenarios import SCENARIOS

# The quick subset less the scenarios a dedicated test already covers on a real service:
# - poison_job (12 s of the 25): tests/acceptance/test_poison_quarantine.py, whose poisons
#   also end dead "worker lost", charged an attempt per crash, among healthy jobs that flow;
# and the store scenarios (rehearsal/store_scenarios.py):
# - postgres_outage: tests/acceptance/test_store_faults.py
#   test_postgres_outage_under_load_loses_nothing_and_never_answers_500;
# - partition: tests/integration/test_postgres_partition.py
#   test_ingest_answers_503_during_a_partition_and_commits_again_after_the_heal, and
#   tests/acceptance/test_postgres_partition_two_hosts.py;
# - busy_boot: tests/acceptance/test_store_faults.py
#   test_worker_booting_into_a_held_sqlite_write_lock_exits_75_and_recovers.
COVERED_ELSEWHERE = {"poison_job"}
QUICK = [s.name for s in SCENARIOS if s.quick and s.name not in COVERED_ELSEWHERE]


def test_quick_rehearsal_passes_and_writes_its_report(tmp_path: Path):
    """The quick subset's process scenarios (worker killed mid-send, stale completion fenced,
    response loss, rejected inputs) pass; completion.json, CSVs and the HTML report exist."""
    out = tmp_path / "rehearsal"
    assert set(QUICK) >= {"worker_killed_mid_send", "stale_completion_fenced", "response_loss",
                          "rejected_inputs"}
    assert {s.name for s in SCENARIOS if s.quick} >= COVERED_ELSEWHERE
    only = [arg for name in QUICK for arg in ("--only", name)]
    result = subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", "rehearse", "--quick",
                             *only, "--out", str(out)], capture_output=True, text=True,
                            env=child_env(), cwd=ROOT, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    completion = json.loads((out / "completion.json").read_text())
    assert sorted(c["name"] for c in completion) == sorted(QUICK)
    assert all(c["passed"] for c in completion)
    report = (out / "operations-report.html").read_text()
    assert "stale_completion_fenced" in report and "<svg" in report
    for name in ("jobs.csv", "attempts.csv", "receipts.json"):
        assert (out / name).stat().st_size > 0

"""`hookline rehearse --quick` on real processes: every quick scenario passes and the
evidence files are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from procs import ROOT, child_env


def test_quick_rehearsal_passes_and_writes_its_report(tmp_path: Path):
    """The quick subset (worker killed mid-send, stale completion fenced, response loss,
    poison job quarantined, rejected inputs, PostgreSQL outage, network partition to
    PostgreSQL, busy boot) passes;
    completion.json, CSVs and the HTML report exist."""
    out = tmp_path / "rehearsal"
    result = subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", "rehearse", "--quick",
                             "--out", str(out)], capture_output=True, text=True,
                            env=child_env(), cwd=ROOT, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    completion = json.loads((out / "completion.json").read_text())
    assert {c["name"] for c in completion} >= {"worker_killed_mid_send",
                                                "stale_completion_fenced", "poison_job",
                                                "postgres_outage", "partition",
                                                "busy_boot"}
    assert all(c["passed"] for c in completion)
    report = (out / "operations-report.html").read_text()
    assert "stale_completion_fenced" in report and "<svg" in report
    for name in ("jobs.csv", "attempts.csv", "receipts.json"):
        assert (out / name).stat().st_size > 0

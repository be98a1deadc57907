"""Running Prometheus' `promtool` (Debian's `prometheus` package; `make test` installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.pg import skip_or_fail_in_ci

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
GRAFANA_DASHBOARD = ROOT / "deploy" / "grafana" / "hookline.json"


def promtool(*args: str, stdin: str | None = None, cwd: Path = PROMETHEUS_DIR
             ) -> subprocess.CompletedProcess[str]:
    """Run `promtool ARGS` and return what it did. Skips the test when promtool is not
    installed, and fails it when CI is set (CI must not pass by skipping these checks)."""
    path = shutil.which("promtool")
    if path is None:
        skip_or_fail_in_ci("promtool is not installed (Debian: apt-get install prometheus)")
        raise AssertionError("unreachable")
    return subprocess.run([path, *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)

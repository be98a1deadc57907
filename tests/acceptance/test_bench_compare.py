"""`hookline bench --compare` end to end with tiny numbers: the real CLI starts hookline,
a throwaway redis-server with two Celery workers, two Huey consumers, their front doors,
a receiver per system and the load generator; figures read back from compare.json."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

from procs import ROOT, child_env, start_cli

from hookline.rehearsal.harness import pid_alive
from tests.pg import skip_or_fail_in_ci

EVENTS = 200  # x 3 destinations = 600 deliveries per system


def test_bench_compare_delivers_everything_everywhere_and_reports_the_ratios(tmp_path):
    """Each of hookline, Celery and Huey accepts the 200 events and delivers each to the 3
    endpoints, verified; every ratio is present and positive; nothing is left running."""
    missing = [name for name in ("celery", "huey", "redis", "requests")
               if importlib.util.find_spec(name) is None]
    if missing:
        skip_or_fail_in_ci(f"bench --compare: the bench extra is missing ({missing})")
    if shutil.which("redis-server") is None:
        skip_or_fail_in_ci("bench --compare: redis-server is not installed")
    out, log_path = tmp_path / "bench", tmp_path / "compare.log"
    proc = start_cli(["bench", "--compare", "--events", str(EVENTS), "--out", str(out)],
                     log_path)
    assert proc.wait(timeout=110) == 0, log_path.read_text()[-3000:]
    result = json.loads((out / "compare.json").read_text())
    report = log_path.read_text()
    assert list(result["systems"]) == ["hookline", "celery", "huey"]
    assert result["options"]["receiver"] == "lean"
    for name, fig in result["systems"].items():
        assert fig["accepted"] == EVENTS, name
        assert fig["delivered"] == fig["expected"] == 3 * EVENTS, name
        assert fig["complete"] and fig["unverified_requests"] == 0, name
        assert fig["events_per_s"] > 0 and fig["deliveries_per_s"] > 0, name
        # A delivery may reach the receiver before the 2xx reaches the load generator, which
        # counts as 0 ms: a fast peer's median can be 0, never its tail.
        assert 0 <= fig["latency_ms"]["p50"] <= fig["latency_ms"]["p99"], name
        assert fig["latency_ms"]["p99"] > 0, name
        assert fig["cpu_s_per_1000_deliveries"] > 0, name
    assert "redis-server" in result["systems"]["celery"]["cpu_s"]
    for peer in ("celery", "huey"):
        ratios = result["ratios"][peer]
        assert set(ratios) == {"events_per_s", "deliveries_per_s", "latency_p50_ms",
                               "latency_p99_ms", "cpu_s_per_1000_deliveries"}
        # None only where a median latency was 0 (see above): no ratio of a zero is made up.
        assert all(value is not None and value > 0 for key, value in ratios.items()
                   if key != "latency_p50_ms"), ratios
        medians = (result["systems"][peer]["latency_ms"]["p50"],
                   result["systems"]["hookline"]["latency_ms"]["p50"])
        assert (ratios["latency_p50_ms"] is None) == (0 in medians), ratios
        assert f"hookline vs {peer}" in report
    pids = [pid for fig in result["systems"].values() for pid in fig["pids"].values()]
    assert pids and not [pid for pid in pids if pid_alive(pid)]


def test_bench_compare_without_redis_server_names_the_install_command(tmp_path):
    """With no redis-server on PATH, `--compare` exits 2 with the apt-get command (or the
    pip one, first, when the bench extra is missing too), no traceback, and starts
    nothing."""
    log_path = tmp_path / "compare.log"
    proc = start_cli(["bench", "--compare", "--events", "10", "--out", str(tmp_path / "out")],
                     log_path, env={"PATH": str(tmp_path)})
    assert proc.wait(timeout=30) == 2
    text = log_path.read_text()
    assert "apt-get install redis-server" in text or "pip install 'hookline[bench]'" in text
    assert "Traceback" not in text
    assert not (tmp_path / "out").exists()


def test_bench_compare_without_the_bench_extra_says_how_to_install_it(tmp_path):
    """With the peers' packages not importable (as in an install without the bench extra:
    `None` in sys.modules is how Python marks a module it must not import), `bench --compare`
    starts nothing, names the missing packages and the install command, and exits 2."""
    script = ("import sys\n"
              "for name in ('celery', 'huey', 'redis'):\n"
              "    sys.modules[name] = None\n"
              "from hookline.supervisor.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    run = subprocess.run([sys.executable, "-P", "-c", script, "--db", str(tmp_path / "x.db"),
                          "bench", "--compare", "--out", str(tmp_path / "bench")],
                         capture_output=True, text=True, env=child_env(), cwd=ROOT,
                         timeout=60, check=False)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "missing: celery, huey, redis" in run.stderr
    assert "pip install 'hookline[bench]'" in run.stderr
    assert not (tmp_path / "bench").exists()

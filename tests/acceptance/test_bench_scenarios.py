"""`hookline bench --scenario backlog|outage` end to end with tiny sizes: the real CLI,
receiver, service and load generator processes, figures read back from scenario-NAME.json.
Pass/fail of the targets is not asserted (a busy machine moves latencies); the figures and
the invariants are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from procs import start_cli

BACKLOG_JOBS = 8_000  # enough for the plans, both claim timings and RSS samples; cheap to deliver


def run_scenario(args: list[str], tmp_path: Path, env: dict[str, str] | None = None
                 ) -> tuple[dict[str, Any], str]:
    """Run `hookline bench --scenario ARGS --out ...`; returns the JSON and the printout."""
    out, log_path = tmp_path / "bench", tmp_path / "bench.log"
    proc = start_cli(["bench", "--scenario", *args, "--out", str(out)], log_path, env=env)
    assert proc.wait(timeout=110) == 0, log_path.read_text()[-3000:]
    name = args[0]
    return json.loads((out / f"scenario-{name}.json").read_text()), log_path.read_text()


def test_backlog_scenario_plans_claims_and_worker_memory(tmp_path):
    """With 20,000 pending jobs written straight into the store's schema: every claim-path
    query plan uses an index, claims are timed on the backlog and on a small one, and the
    service delivers every job while each worker's RSS is sampled."""
    result, report = run_scenario(["backlog", "--backlog-jobs", str(BACKLOG_JOBS),
                                   "--deliver-s", "60"], tmp_path)
    plans = result["query_plans"]
    assert "jobs_due" in " ".join(plans["due_jobs"]["plan"])
    assert "jobs_leased" in " ".join(plans["destination_slots"]["plan"])
    assert "PRIMARY KEY" in " ".join(plans["claim_job"]["plan"])
    assert result["checks"]["plans_use_indexes"] is True
    # An ordered destination's head: the first entry of jobs_ordered, nothing sorted.
    assert "jobs_ordered" in " ".join(plans["ordered_head"]["plan"])
    assert plans["ordered_head"]["problems"] == []
    for label in ("small", "backlog"):
        claim = result["claim_ms"][label]
        assert 0 < claim["p50_ms"] <= claim["p99_ms"]
        assert claim["jobs_per_claim"] == result["policy"]["claim_batch"]
        assert result["claim_ms_d1_ordered"][label]["p50_ms"] > 0
    delivery = result["delivery"]
    assert delivery["all_delivered"] and delivery["delivered"] == BACKLOG_JOBS
    assert delivery["deliveries_per_s"] > 0
    for worker in ("worker-1", "worker-2"):
        rss = delivery["rss_mib"][worker]
        assert 0 < rss["start"] <= rss["max"] and rss["end"] > 0 and "growth_last_third" in rss
    assert set(result["checks"]) == {"plans_use_indexes", "claim_p50_within_2x",
                                     "ordered_claim_p50_within_2x", "worker_rss_under_80_mib",
                                     "worker_rss_not_growing"}
    assert "claim ms" in report and report.rstrip().endswith(("PASS", "FAIL"))


def test_outage_scenario_latency_windows_and_drain(tmp_path):
    """d3 answers 503 for 3 s under steady load, then recovers: d1/d2 latency is reported
    before, during and after with ratios to the baseline, d3's backlog drains, and every job
    ends delivered. Retries start at 1 s here (HOOKLINE_RETRY_BASE_S) so the backoff of a
    3 s outage ends within seconds (a job's first retries come 0.5-1 s and 1-2 s after its
    first attempt: a job that fails early in the outage is tried at least twice); the
    documented runs use the defaults."""
    result, report = run_scenario(
        ["outage", "--baseline-s", "2", "--outage-s", "3", "--rate", "100"], tmp_path,
        env={"HOOKLINE_RETRY_BASE_S": "1"})
    assert result["checks"]["every_job_delivered"] is True
    assert result["jobs_by_status"] == {"done": 3 * result["events_accepted"]}
    assert result["checks"]["d3_drained"] is True and result["d3"]["drain_s"] is not None
    for window in ("before", "during", "after"):
        for name in ("d1", "d2", "d1+d2"):
            figures = result["latency_ms"][window][name]
            assert figures["n"] > 0 and 0 < figures["p50"] <= figures["p99"]
    for window in ("during", "after"):
        assert result["ratio_to_baseline"][window]["d1+d2"]["p99"] > 0
    d3 = result["d3"]
    assert d3["at_recovery"]["unfinished"] > 0 and d3["at_recovery"]["failure_streak"] > 0
    assert 0 <= d3["at_recovery"]["late_retries"] <= d3["at_recovery"]["unfinished"]
    assert d3["auto_paused"] is False  # the breaker needs a 300 s failure run by default
    assert d3["max_attempts_of_a_job"] >= 2
    assert result["policy"]["retry_base_s"] == 1.0 and result["timeline"]
    assert "ratio to baseline" in report and report.rstrip().endswith(("PASS", "FAIL"))

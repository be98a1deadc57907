"""`hookline bench --scenario everyday --quick` end to end: the real CLI, services, receivers,
load generator and Huey's consumer, figures read back from scenario-everyday.json. The
targets' pass or fail is not asserted (a busy machine moves every figure); the structure is,
that each ratio is the steady figure over the same round's flat-out one, and that every run
delivered every job."""

from __future__ import annotations

import json

from procs import start_cli


def test_everyday_scenario_reports_steady_costs_against_flat_out_and_huey(tmp_path):
    """One round: flat out, then 1 s at 200 events/s, then hookline and Huey at 200 events/s;
    each run's CPU per event and per delivery, the service's cores, the ratios and the
    checks named by the issue's targets."""
    out, log_path = tmp_path / "bench", tmp_path / "bench.log"
    proc = start_cli(["bench", "--scenario", "everyday", "--quick", "--load", "python",
                      "--phase-s", "1", "--out", str(out)], log_path)
    assert proc.wait(timeout=170) == 0, log_path.read_text()[-3000:]
    result = json.loads((out / "scenario-everyday.json").read_text())
    report = log_path.read_text()
    [one_round] = result["rounds"]
    flat, steady = one_round["flat_out"], one_round["steady"]["200"]
    assert flat["events"] == 1_000 and flat["deliveries"] == 3_000  # --quick's flat-out size
    assert flat["service_cores"] is None  # flat out has no steady load to divide by
    assert steady["events"] == 200 and steady["deliveries"] == 600
    for run in (flat, steady):
        assert run["ingest_cpu_ms_per_event"] > 0 and run["workers_cpu_ms_per_delivery"] > 0
    assert steady["service_cores"] > 0
    assert 0 < steady["latency_ms"]["p50"] <= steady["latency_ms"]["p99"]
    assert steady["vs_flat_out"] == {
        "ingest_cpu": round(steady["ingest_cpu_ms_per_event"]
                            / flat["ingest_cpu_ms_per_event"], 3),
        "workers_cpu": round(steady["workers_cpu_ms_per_delivery"]
                             / flat["workers_cpu_ms_per_delivery"], 3)}
    huey = one_round["huey"]
    assert huey["complete"] is True, huey
    assert huey["huey_cpu_ratio"] == round(huey["huey_cpu_s_per_1000_deliveries"]
                                           / huey["hookline_cpu_s_per_1000_deliveries"], 2)
    medians = result["medians"]
    assert medians["steady"]["200"]["ingest_cpu_vs_flat_out"] == steady["vs_flat_out"][
        "ingest_cpu"]
    assert medians["huey_cpu_ratio"] == huey["huey_cpu_ratio"]
    assert set(result["checks"]) == {
        "ingest_cpu_at_200_within_1.5x_flat_out", "workers_cpu_at_200_within_1.5x_flat_out",
        "service_below_0.3_cores", "p99_at_most_22_ms", "huey_cpu_per_delivery_at_least_4x"}
    assert result["pass"] == all(result["checks"].values())
    assert report.rstrip().endswith(("PASS", "FAIL"))
    assert "200 events/s: ingest" in report and "Huey at 200 events/s" in report

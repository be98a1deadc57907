"""`hookline bench --scenario everyday --quick` end to end: the real CLI, services, receivers,
load generator and Huey's consumer, figures read back from scenario-everyday.json and checked
against each run's own bench.json. The targets' pass or fail is not asserted (a busy machine
moves every figure); the arithmetic, the structure and that every run delivered every job
are. The checks' limits are tests/unit/test_everyday_checks.py's."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

from procs import start_cli

from hookline.rehearsal import bench_table
from hookline.rehearsal.bench_sections import format_figure
from hookline.rehearsal.everyday_reach import durable_reach, reach
from hookline.rehearsal.machine_probe import cold_read_text
from tests.pg import skip_or_fail_in_ci

BENCH_DATA = Path(__file__).parents[1] / "unit" / "data" / "bench"


def _bench_json(folder: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((folder / "bench.json").read_text())
    return result


def test_everyday_scenario_reports_steady_costs_against_flat_out_and_huey(tmp_path):
    """One round: 1,000 events flat out (the Python generator), then 1 s at 200 events/s,
    then hookline and Huey at 200 events/s. Each run's CPU per event and per delivery and
    the service's cores are what its bench.json gives; the ratios, medians and checks follow
    from them; README's table renders the result."""
    missing = [name for name in ("huey", "redis") if importlib.util.find_spec(name) is None]
    if missing or shutil.which("redis-server") is None:
        skip_or_fail_in_ci(f"the everyday scenario's Huey run: missing {missing or 'redis'}")
    out, log_path = tmp_path / "bench", tmp_path / "bench.log"
    proc = start_cli(["bench", "--scenario", "everyday", "--quick", "--load", "python",
                      "--phase-s", "1", "--out", str(out)], log_path)
    assert proc.wait(timeout=170) == 0, log_path.read_text()[-3000:]
    result = json.loads((out / "scenario-everyday.json").read_text())
    report = log_path.read_text()
    [one_round] = result["rounds"]
    flat, steady = one_round["flat_out"], one_round["steady"]["200"]
    assert (flat["events"], flat["deliveries"]) == (1_000, 3_000)
    assert (steady["events"], steady["deliveries"]) == (200, 600)
    for name, figures in (("flat-out", flat), ("rate-200", steady)):
        run = _bench_json(out / "everyday" / "round-1" / name)
        per_1000, delivered = run["cpu_s_per_1000_deliveries"], run["delivery"]["delivered"]
        assert run["delivery"]["jobs_by_status"] == {"done": delivered}
        assert "ceiling" not in run and "sender_ceiling" not in run  # left out here
        ingest_s = per_1000["ingest"] * delivered / 1000
        assert abs(figures["ingest_cpu_ms_per_event"]
                   - ingest_s * 1000 / run["ingest"]["accepted"]) < 0.002
        workers_s = sum(v for k, v in per_1000.items() if k.startswith("worker"))
        assert figures["workers_cpu_ms_per_delivery"] == round(workers_s, 3)
        assert figures["recorded_latency_ms"] == run["delivery"]["recorded_latency_ms"]
        assert figures["sent_latency_ms"] == run["delivery"].get("sent_latency_ms")
    # At the rate, from the sender's POST too (flat out the bench asks for no send times:
    # the events wait for the destinations to be resumed).
    assert flat["sent_latency_ms"] is None
    assert steady["sent_latency_ms"]["p99"] > steady["latency_ms"]["p99"]
    run = _bench_json(out / "everyday" / "round-1" / "rate-200")
    per_1000, delivered = run["cpu_s_per_1000_deliveries"], run["delivery"]["delivered"]
    service_s = sum(v for k, v in per_1000.items() if k != "receiver") * delivered / 1000
    assert abs(steady["service_cores"] - service_s / run["ingest"]["elapsed_s"]) < 0.01
    assert flat["service_cores"] is None  # flat out, delivery outlasts the load
    assert steady["vs_flat_out"] == {
        "ingest_cpu": round(steady["ingest_cpu_ms_per_event"]
                            / flat["ingest_cpu_ms_per_event"], 3),
        "workers_cpu": round(steady["workers_cpu_ms_per_delivery"]
                             / flat["workers_cpu_ms_per_delivery"], 3)}
    # The floor: the bare server got the same load (1,000 posts flat out, 200 at the rate),
    # the paced bare client sent one request per event to each of 3 endpoints.
    assert flat["floor"]["server_requests"] == 1_000 and flat["floor"]["client_requests"] > 0
    floor = steady["floor"]
    assert (floor["server_requests"], floor["client_requests"]) == (200, 600)
    for side in ("server", "client"):
        assert flat["floor"][f"{side}_cpu_ms_per_request"] > 0
        assert floor["vs_flat_out"][side] == round(floor[f"{side}_cpu_ms_per_request"]
                                                   / flat["floor"][f"{side}_cpu_ms_per_request"],
                                                   3)
    assert floor["vs_hookline_flat_out"] == {
        "server": round(floor["server_cpu_ms_per_request"] / flat["ingest_cpu_ms_per_event"], 3),
        "client": round(floor["client_cpu_ms_per_request"]
                        / flat["workers_cpu_ms_per_delivery"], 3)}
    assert floor["service_cores"] == round(200 * (floor["server_cpu_ms_per_request"]
                                                  + 3 * floor["client_cpu_ms_per_request"])
                                           / 1000, 3)
    bounded = {name for name in result["checks"] if "_flat_out" in name or "cores" in name}
    assert set(result["out_of_reach"]) == bounded
    assert result["out_of_reach"]["ingest_cpu_at_200_within_1.5x_flat_out"] == (
        floor["vs_hookline_flat_out"]["server"] > 1.5)
    assert result["out_of_reach"]["workers_cpu_at_200_within_1.5x_flat_out"] == (
        floor["vs_hookline_flat_out"]["client"] > 1.5)
    assert result["out_of_reach"]["service_below_0.3_cores"] == (floor["service_cores"] >= 0.3)
    # With the bookkeeping at hookline's flat-out cost (rehearsal/everyday_reach.py): every
    # target of the run has its least figure, and is out of reach at least where the bare
    # HTTP alone puts it.
    assert result["reach"] == reach(result)
    assert set(result["reach"]["least"]) == bounded | {"huey_cpu_per_delivery_at_least_4x"}
    assert all(result["reach"]["out_of_reach"][name]
               for name, out in result["out_of_reach"].items() if out)
    assert "bare aiohttp at 200 events/s" in report
    # The least durable service (rehearsal/everyday_floor.py, durable_floor; its own test:
    # tests/acceptance/test_durable_floor.py) under the same loads, and its bounds: its cost
    # at the rate over hookline's flat-out cost, its cores at the target rate.
    durable_flat, durable = flat["durable"], steady["durable"]
    assert durable_flat["events"] == 1_000 and durable["events"] == 200
    assert durable_flat["cores"] is None and 0 < durable["cores"] < 2
    assert result["durable_reach"] == durable_reach(result)
    assert result["durable_reach"]["least"]["workers_cpu_at_200_within_1.5x_flat_out"] == round(
        durable["deliverer_cpu_ms_per_delivery"] / flat["workers_cpu_ms_per_delivery"], 3)
    assert result["durable_reach"]["least"]["service_below_0.3_cores"] == durable["cores"]
    # With what hookline costs flat out above the floor, at that cost: (F + H - Ff) / H.
    floor_at_rate, floor_flat = (run["deliverer_cpu_ms_per_delivery"]
                                 for run in (durable, durable_flat))
    hookline_flat = flat["workers_cpu_ms_per_delivery"]
    assert result["durable_reach"]["with_own_work"]["least"].get(
        "workers_cpu_at_200_within_1.5x_flat_out") == (
        round((floor_at_rate + hookline_flat - floor_flat) / hookline_flat, 3)
        if hookline_flat >= floor_flat else None)
    assert "least durable service at 200 events/s" in report
    huey = one_round["huey"]
    assert huey["complete"] is True, huey
    assert huey["huey_cpu_ratio"] == round(huey["huey_cpu_s_per_1000_deliveries"]
                                           / huey["hookline_cpu_s_per_1000_deliveries"], 2)
    medians = result["medians"]
    assert medians["steady"]["200"]["ingest_cpu_vs_flat_out"] == steady["vs_flat_out"][
        "ingest_cpu"]
    assert medians["huey_cpu_ratio"] == huey["huey_cpu_ratio"]
    assert medians["steady"]["200"]["floor_server_vs_flat_out"] == floor["vs_flat_out"]["server"]
    assert len(result["checks"]) == 5 and result["pass"] == all(result["checks"].values())
    assert "200 events/s: ingest" in report and "Huey at 200 events/s" in report
    assert report.rstrip().endswith(("PASS", "FAIL"))
    block = bench_table.render_block(BENCH_DATA / "flat.json", BENCH_DATA / "steady.json",
                                     everyday_path=out / "scenario-everyday.json")
    assert f"| 200 events/s | {steady['ingest_cpu_ms_per_event']:.3g} ms (" in block
    # sent->delivered p99 beside accept->delivered, and the machine's cost of a sleep.
    sent_p99 = medians["steady"]["200"]["sent_latency_p99_ms"]
    assert sent_p99 == steady["sent_latency_ms"]["p99"]
    assert f" | {format_figure(sent_p99)} ms | " in block
    # The machine's cost of waking: the median over the round's two runs' own probes.
    probes = [_bench_json(out / "everyday" / "round-1" / name)["machine"]["cold_read_us"]
              for name in ("flat-out", "rate-200")]
    assert medians["cold_read_us"]["runs"] == 2
    assert medians["cold_read_us"]["after_sleep_us"] == round(
        (probes[0]["after_sleep_us"] + probes[1]["after_sleep_us"]) / 2, 3)
    cold = cold_read_text({"cold_read_us": medians["cold_read_us"]})
    assert cold is not None and f"the median of the rounds' 2 runs, {cold}" in block
    assert cold_read_text(result["machine"]) in report  # the scenario's own probe

"""`hookline bench --scenario fairness|destinations|tenants|ingest --quick` end to end: the
real CLI, service, receiver, load generator and wrk processes, figures read back from
scenario-NAME.json: each scenario on one backend (to keep the suite short; every scenario
runs the same code on either backend, and tests/unit/test_tenant_fairness.py checks the fair
claim itself on both). Speed is never asserted (a busy machine moves every figure): the
structure is, and that every job that should be delivered was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from procs import start_cli

# Half of --quick's phases (fairness 4 s; destinations, tenants, ingest 2 s): each phase still
# publishes and measures; the figures are reported, not held to a target.
PHASE_S = {"fairness": "2", "destinations": "1", "tenants": "1", "ingest": "1"}
# Settings of the scenario's service. Fairness: tenant a's hanging destinations still hold
# their attempts when the service is stopped after the phases, and the stop waits
# graceful_timeout_s (10 s by default) for them; 1 s here. Only the stop uses it: no figure
# or check of the scenario depends on it.
SETTINGS = {"fairness": {"HOOKLINE_GRACEFUL_TIMEOUT_S": "1"}}


def run_quick(name: str, backend: str, tmp_path: Path, server_url: str | None = None
              ) -> tuple[dict[str, Any], str]:
    """Run `hookline [--db SERVER_URL] bench --scenario NAME --quick --phase-s PHASE_S[NAME]
    --backend BACKEND` with SETTINGS[NAME]; the JSON and printout. With a server URL the
    scenario makes its databases there instead of starting a throwaway server."""
    out, log_path = tmp_path / "bench", tmp_path / "bench.log"
    db = ["--db", server_url] if server_url else []
    proc = start_cli([*db, "bench", "--scenario", name, "--quick", "--phase-s", PHASE_S[name],
                      "--backend", backend, "--out", str(out)], log_path,
                     env=SETTINGS.get(name))
    assert proc.wait(timeout=170) == 0, log_path.read_text()[-3000:]
    return json.loads((out / f"scenario-{name}.json").read_text()), log_path.read_text()


def need_wrk() -> None:
    """These scenarios load ingest with wrk, which `make test` installs: never skipped."""
    assert shutil.which("wrk") is not None, "wrk is missing: `make test` installs it " \
        "(apt-get install wrk)"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_fairness_scenario_reports_b_alone_and_with_a(backend, tmp_path):
    """Tenant a: a small backlog over 20 healthy and 20 hanging destinations; tenant b
    publishes alone, then with a: both phases' latencies, their ratio, and every b job
    delivered."""
    result, report = run_quick("fairness", backend, tmp_path)
    assert result["a"]["backlog_jobs"] >= 2_000
    assert result["a"]["destinations"] == {"healthy": 20, "hanging": 20}
    assert result["a"]["delivered_while_b_published"] > 0
    for phase in ("alone", "with_a"):
        figures = result["b_latency_ms"][phase]
        assert figures["n"] > 0 and 0 < figures["p50"] <= figures["p99"] <= figures["max"]
    assert result["b_p99_ratio_with_a_to_alone"] > 0
    assert result["checks"]["every_b_job_delivered"] is True
    assert set(result["b"]["jobs_by_status"]) == {"done"}
    assert result["policy"]["tenant_slot_share"] == 0.5
    assert "b p99 with a / alone" in report and report.rstrip().endswith(("PASS", "FAIL"))


@pytest.mark.parametrize("backend", ["sqlite"])
def test_destinations_scenario_reports_ingest_and_metrics_per_size(backend, tmp_path):
    """10 then 100 paused destinations, each event matching exactly one: ingest events/s
    and one /metrics scrape per size."""
    need_wrk()
    result, report = run_quick("destinations", backend, tmp_path)
    assert set(result["ingest"]) == {"10", "100"}
    for figures in result["ingest"].values():
        assert figures["events_per_s"] > 0 and figures["accepted"] > 0
        assert figures["jobs_per_event"] == 1.0 and figures["non_2xx"] == 0
        assert figures["metrics"]["seconds"] > 0 and figures["metrics"]["lines"] > 0
        assert figures["ingest_cpu_us_per_event"] > 0
    assert result["ingest_ratio_largest_to_smallest"] > 0 and result["cpu_per_event_ratio"] > 0
    assert result["checks"]["every_event_has_one_job"] is True
    assert "100 destinations: ingest" in report


@pytest.mark.parametrize("backend", ["postgres"])
def test_tenants_scenario_reports_ingest_ratio_and_claims(backend, pg_server, tmp_path):
    """One tenant with 3 destinations, then 20 tenants x 3: ingest of both, their ratio,
    and claims timed with one tenant live, a tenth of the tenants and every tenant live. On
    the session's server (a throwaway server of the bench's own costs seconds to make and
    remove; tests/acceptance/test_bench.py covers that path)."""
    need_wrk()
    result, report = run_quick("tenants", backend, tmp_path, pg_server.url())
    for label in ("single_tenant", "tenants"):
        figures = result["ingest"][label]
        assert figures["events_per_s"] > 0 and figures["jobs_per_event"] == 1.0
        assert figures["server_cpu_us_per_event"] > 0  # PostgreSQL's processes for it
        claims = result["claim_ms"][label]
        assert 0 < claims["p50_ms"] <= claims["p99_ms"] and claims["jobs_per_claim"] > 0
    assert result["ingest_ratio"] > 0 and result["cpu_per_event_ratio"] > 0
    # like for like: claims of the single tenant's size with every tenant live
    same = result["claim_ms"]["tenants_same_jobs"]
    assert same["jobs_per_claim"] == result["claim_ms"]["single_tenant"]["jobs_per_claim"]
    assert result["claim_ms"]["p50_ratio"] > 0
    # and with a tenth of the tenants live: the same claims, ten times fewer tenants
    tenth = result["claim_ms"]["tenth_of_tenants_same_jobs"]
    assert tenth["jobs_per_claim"] == same["jobs_per_claim"]
    assert result["claim_ms"]["p50_ratio_tenfold_tenants"] > 0
    assert "ingest tenants / single tenant" in report and "a tenth of them" in report


def test_ingest_scenario_measures_every_design_against_the_bare_server(tmp_path):
    """The bare server, hookline with 1 and 2 ingest processes (each committing itself, then
    through the ingest writer process), the writer fed directly, and the least durable
    ingest in one process and as 1 and 2 HTTP processes feeding one writer: each accepts
    its load's events, stores every event it answered 2xx with its 3 jobs, and gets its
    share of the bare server's events/s and its CPU per event, process by process; the
    writer fed directly gives the model's shares with a core per HTTP process."""
    need_wrk()
    result, report = run_quick("ingest", "sqlite", tmp_path)
    designs = result["designs"]
    assert list(designs) == ["bare", "hookline", "hookline_2", "hookline_writer",
                             "hookline_writer_2", "writer_fed", "floor", "floor_split",
                             "floor_split_2"]
    processes = {"bare": {"bare"}, "hookline": {"ingest"}, "hookline_2": {"ingest", "ingest-2"},
                 "hookline_writer": {"ingest", "ingest-writer"},
                 "hookline_writer_2": {"ingest", "ingest-2", "ingest-writer"},
                 "writer_fed": {"ingest-writer"},
                 "floor": {"whole"}, "floor_split": {"writer", "http"},
                 "floor_split_2": {"writer", "http", "http-2"}}
    for label, figures in designs.items():
        assert figures["events_per_s"] > 0 and figures["non_2xx"] == 0, label
        assert figures["processes_alive"] and figures["socket_errors"] is None, label
        per_process = figures["process_cpu_us_per_event"]
        assert set(per_process) == processes[label]
        # every process did a real share of the work: a second HTTP process took
        # connections, the writer committed (not a clock tick of background work)
        assert all(us > 0.1 * figures["cpu_us_per_event"] for us in per_process.values()), \
            (label, per_process)
        assert figures["wrk_cpu_us_per_request"] > 0
        if label == "bare":
            assert figures["stored"] is None and figures["vs_bare"] == 1.0
            continue
        assert figures["stored"] >= figures["answered_2xx"] > 0, label
        assert figures["jobs_per_event"] == 3.0, label
        assert 0 < figures["vs_bare"] == result["vs_bare_by_design"][label]
    # hookline's supervisor and workers are counted apart from its ingest
    assert designs["hookline"]["other_processes_cpu_us_per_event"] is not None
    assert designs["floor"]["other_processes_cpu_us_per_event"] is None
    assert {name: result["checks"][name] for name in (
        "every_round_served", "every_answer_2xx", "stored_no_fewer_than_answered_2xx",
        "every_event_3_jobs")} == dict.fromkeys((
            "every_round_served", "every_answer_2xx", "stored_no_fewer_than_answered_2xx",
            "every_event_3_jobs"), True)
    assert "hookline_at_least_0.6_of_bare" in result["checks"]
    assert "floor_split_2:" in report and "against the bare server's" in report
    # the model: one HTTP process's share is at most two's, both from this run's figures
    model = result["model_with_spare_cores"]
    assert 0 < model["http_1"] <= model["http_2"]
    assert model["http_2"] <= designs["writer_fed"]["vs_bare"] + 0.001
    assert "a core for each HTTP process" in report

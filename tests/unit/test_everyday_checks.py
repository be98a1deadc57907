"""The everyday scenario's medians and checks (rehearsal/scenario_everyday.py) on figures
made up here: each target at its boundary, a missing figure, an incomplete Huey run,
medians over three rounds with a figure missing from one, and which targets the bare
framework's own ratio puts out of reach."""

from __future__ import annotations

from typing import Any

import pytest

from hookline.rehearsal.scenario_everyday import _checks, _medians, _out_of_reach


def _medians_of(*, ingest_x: float, workers_x: float, cores: float | None, p99: float,
                huey: float | None) -> dict[str, Any]:
    return {"steady": {"200": {"ingest_cpu_vs_flat_out": ingest_x,
                               "workers_cpu_vs_flat_out": workers_x, "service_cores": cores,
                               "latency_p99_ms": p99}},
            "huey_cpu_ratio": huey}


NAMES = ("ingest_cpu_at_200_within_1.5x_flat_out", "workers_cpu_at_200_within_1.5x_flat_out",
         "service_below_0.3_cores", "p99_at_most_22_ms", "huey_cpu_per_delivery_at_least_4x")


def test_every_target_is_met_at_its_boundary_and_missed_just_past_it():
    met = _checks(_medians_of(ingest_x=1.5, workers_x=1.5, cores=0.299, p99=22.0, huey=4.0))
    assert met == dict.fromkeys(NAMES, True)
    missed = _checks(_medians_of(ingest_x=1.501, workers_x=1.501, cores=0.3, p99=22.01,
                                 huey=3.99))
    assert missed == dict.fromkeys(NAMES, False)


@pytest.mark.parametrize("field", ["cores", "huey"])
def test_a_missing_figure_fails_its_check(field):
    figures: dict[str, Any] = {"ingest_x": 1.0, "workers_x": 1.0, "cores": 0.1, "p99": 5.0,
                               "huey": 9.0}
    figures[field] = None
    checks = _checks(_medians_of(**figures))
    failed = {"cores": "service_below_0.3_cores", "huey": "huey_cpu_per_delivery_at_least_4x"}
    assert [name for name, ok in checks.items() if not ok] == [failed[field]]


def _round(ingest: float, ratio: float | None, huey: float | None,
           server_floor: float | None = 8.0) -> dict[str, Any]:
    steady = {"ingest_cpu_ms_per_event": ingest, "workers_cpu_ms_per_delivery": 1.0,
              "service_cores": 0.5, "vs_flat_out": {"ingest_cpu": ratio, "workers_cpu": 2.0},
              "latency_ms": {"p50": 10.0, "p99": ingest * 10},
              "recorded_latency_ms": {"p50": 20.0, "p99": ingest * 20},
              "sent_latency_ms": {"p50": 30.0, "p99": ingest * 30},
              "floor": {"vs_flat_out": {"server": server_floor, "client": 1.2},
                        "vs_hookline_flat_out": {"server": 2.0, "client": None},
                        "service_cores": 0.25}}
    return {"flat_out": {"events_per_s": 1000.0, "ingest_cpu_ms_per_event": 0.3,
                         "workers_cpu_ms_per_delivery": 0.4},
            "steady": {"200": steady}, "huey": {"huey_cpu_ratio": huey}}


def test_medians_are_of_every_round_and_skip_a_missing_figure():
    """Three rounds: each figure's median (not the first round's, nor the mean), a ratio
    missing from one round left out, and an incomplete Huey run (None) left out."""
    rounds = [_round(3.0, 6.0, 1.5), _round(1.0, None, None, server_floor=None),
              _round(2.5, 9.0, 2.0, server_floor=6.0)]
    medians = _medians(rounds, (200.0,))
    at_200 = medians["steady"]["200"]
    assert at_200["ingest_cpu_ms_per_event"] == 2.5
    assert at_200["ingest_cpu_vs_flat_out"] == 7.5  # median of 6 and 9
    assert at_200["latency_p99_ms"] == 25.0
    assert at_200["recorded_latency_p99_ms"] == 50.0
    assert at_200["sent_latency_p99_ms"] == 75.0
    assert medians["huey_cpu_ratio"] == 1.75
    assert medians["flat_out"]["ingest_cpu_ms_per_event"] == 0.3
    assert at_200["floor_server_vs_flat_out"] == 7.0  # median of 8 and 6, None left out
    assert at_200["floor_client_vs_flat_out"] == 1.2
    assert (at_200["floor_server_vs_hookline_flat_out"],
            at_200["floor_client_vs_hookline_flat_out"]) == (2.0, None)
    assert at_200["floor_service_cores"] == 0.25


def _floors(server: float | None, client: float | None, cores: float | None = None,
            rate: str = "50") -> dict[str, Any]:
    return {"steady": {rate: {"floor_server_vs_hookline_flat_out": server,
                              "floor_client_vs_hookline_flat_out": client,
                              "floor_service_cores": cores,
                              # the framework's own ratio plays no part in the bound
                              "floor_server_vs_flat_out": 9.0,
                              "floor_client_vs_flat_out": 9.0}}}


def test_a_target_is_out_of_reach_only_where_the_bare_http_alone_costs_more():
    """Ingest's cost target is bounded by the bare server's CPU per request at the rate over
    ingest's flat-out cost, the workers' by the bare client's over theirs: past 1.5 it is out
    of reach, at 1.5 (or with no floor measured) it is not. The service's cores at 200
    events/s are out of reach from 0.3 on (the target is "under 0.3")."""
    names = ("ingest_cpu_at_50_within_1.5x_flat_out", "workers_cpu_at_50_within_1.5x_flat_out",
             "service_below_0.3_cores")
    assert _out_of_reach(_floors(1.501, 1.5)) == dict(zip(names, (True, False, False),
                                                           strict=True))
    assert _out_of_reach(_floors(1.5, 7.0)) == dict(zip(names, (False, True, False),
                                                         strict=True))
    assert _out_of_reach(_floors(None, None)) == dict.fromkeys(names, False)
    at_200 = [name.replace("_50_", "_200_") for name in names]
    assert _out_of_reach(_floors(1.0, 1.0, 0.3, "200")) == dict(
        zip(at_200, (False, False, True), strict=True))
    assert _out_of_reach(_floors(1.0, 1.0, 0.299, "200"))["service_below_0.3_cores"] is False

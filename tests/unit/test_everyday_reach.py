"""The everyday scenario's least figures for a design that keeps its books at hookline's
flat-out cost (rehearsal/everyday_reach.py): the arithmetic, on the figures of README's run of
2026-12-04 14:08 UTC, worked by hand."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hookline.rehearsal.everyday_reach import (
    bookkeeping_ms,
    durable_reach,
    least_ratio,
    reach,
    with_own_work,
)

RESULT: dict[str, Any] = {
    "targets": {"cost_ratio_at_most": 1.5, "service_cores_below": 0.3, "p99_ms_at_most": 22.0,
                "at_rate": 200.0, "huey_cpu_ratio_at_least": 4.0},
    "medians": {
        "flat_out": {"ingest_cpu_ms_per_event": 0.235, "workers_cpu_ms_per_delivery": 0.26},
        "steady": {
            "200": {"floor_server_vs_hookline_flat_out": 1.415, "floor_server_vs_flat_out": 6.74,
                    "floor_client_vs_hookline_flat_out": 1.112,
                    "floor_client_vs_flat_out": 2.534, "floor_service_cores": 0.237},
            "500": {"floor_server_vs_hookline_flat_out": 0.885, "floor_server_vs_flat_out": 3.459,
                    "floor_client_vs_hookline_flat_out": 0.792,
                    "floor_client_vs_flat_out": 1.722, "floor_service_cores": 0.41}}},
    "rounds": [{"huey": {"complete": True, "huey_cpu_s_per_1000_deliveries": 1.915}},
               {"huey": {"complete": True, "huey_cpu_s_per_1000_deliveries": 2.057}},
               {"huey": {"complete": True, "huey_cpu_s_per_1000_deliveries": 1.98}},
               {"huey": {"unavailable": "redis-server not found"}}]}


def test_the_least_ratio_is_the_bare_http_at_the_rate_plus_flat_out_bookkeeping():
    # A + 1 - A/S: the bare client at 200 events/s costs 1.112x the workers' flat-out cost
    # and 2.534x its own, so its flat-out cost is 0.439 of the workers' and their own work
    # 0.561 of it; at least 1.112 + 0.561.
    assert least_ratio(1.112, 2.534) == 1.673
    assert least_ratio(0.792, 1.722) == 1.332
    assert least_ratio(2.0, 1.0) == 2.0  # the bare HTTP costing more flat out: no books left
    assert least_ratio(None, 2.0) is None and least_ratio(1.0, 0.0) is None
    assert bookkeeping_ms(0.26, 1.112, 2.534) == pytest.approx(0.1459, abs=1e-4)
    assert bookkeeping_ms(0.26, 3.0, 1.0) == 0.0
    assert bookkeeping_ms(None, 1.0, 2.0) is None


def test_reach_names_each_target_with_its_least_figure():
    """Per rate, ingest's and the workers' least ratios; at 200 events/s the service's least
    cores (the bare HTTP's 0.237 plus 200 events/s x (0.186 + 3 x 0.146) ms) and Huey's CPU
    per delivery (median of the complete rounds, 1.98 ms) over the least any design pays
    (0.608 ms). Only the workers at 500 events/s stay in reach."""
    found = reach(RESULT)
    assert found["least"] == {
        "ingest_cpu_at_200_within_1.5x_flat_out": 2.205,
        "workers_cpu_at_200_within_1.5x_flat_out": 1.673,
        "ingest_cpu_at_500_within_1.5x_flat_out": 1.629,
        "workers_cpu_at_500_within_1.5x_flat_out": 1.332,
        "service_below_0.3_cores": 0.362,
        "huey_cpu_per_delivery_at_least_4x": 3.258}
    assert [name for name, out in found["out_of_reach"].items() if not out] == [
        "workers_cpu_at_500_within_1.5x_flat_out"]


def test_a_target_whose_figures_are_missing_is_left_out():
    """A file from before the floor was measured, or a run without Huey: nothing is claimed
    out of reach that was not measured."""
    result = copy.deepcopy(RESULT)
    del result["medians"]["steady"]["500"]["floor_client_vs_flat_out"]
    result["rounds"] = [{"huey": {"unavailable": "redis-server not found"}}]
    found = reach(result)
    assert "workers_cpu_at_500_within_1.5x_flat_out" not in found["least"]
    assert "huey_cpu_per_delivery_at_least_4x" not in found["least"]
    assert found["least"]["service_below_0.3_cores"] == 0.362
    result["medians"]["steady"]["200"] = {}
    assert set(reach(result)["least"]) == {"ingest_cpu_at_500_within_1.5x_flat_out"}


def round_with(a: float, s: float, huey_ms: float) -> dict[str, Any]:
    """One round of a run, as scenario-everyday.json keeps it: the workers' bare client at
    500 events/s `a` times their flat-out cost and `s` times its own."""
    return {"flat_out": {"ingest_cpu_ms_per_event": 0.3, "workers_cpu_ms_per_delivery": 0.3},
            "steady": {"500": {"floor": {"vs_flat_out": {"client": s},
                                         "vs_hookline_flat_out": {"client": a}}}},
            "huey": {"complete": True, "huey_cpu_s_per_1000_deliveries": huey_ms}}


def test_with_the_rounds_floors_each_bound_is_the_median_of_the_rounds_own():
    """As each check is the median of the rounds' ratios: rounds bounded 1.0, 1.4 and 1.1
    give 1.1, not the bound of the median A and S (0.8 and 1.2: 1.133)."""
    result = {"targets": RESULT["targets"], "medians": {"flat_out": {}, "steady": {}},
              "rounds": [round_with(1.0, 1.0, 2.0), round_with(0.8, 2.0, 2.0),
                         round_with(0.6, 1.2, 2.0)]}
    assert least_ratio(0.8, 1.2) == 1.133
    assert reach(result) == {"least": {"workers_cpu_at_500_within_1.5x_flat_out": 1.1},
                             "out_of_reach": {"workers_cpu_at_500_within_1.5x_flat_out": False}}


def round_at_200(a_client: float, huey_ms: float | None) -> dict[str, Any]:
    """One round with README's 14:08 figures at 200 events/s but the bare client's A
    (`a_client`), and Huey's CPU per delivery (None: that round's Huey run incomplete)."""
    steady = RESULT["medians"]["steady"]["200"]
    return {"flat_out": {"ingest_cpu_ms_per_event": 0.235, "workers_cpu_ms_per_delivery": 0.26},
            "steady": {"200": {"floor": {
                "vs_flat_out": {"server": steady["floor_server_vs_flat_out"],
                                "client": steady["floor_client_vs_flat_out"]},
                "vs_hookline_flat_out": {"server": steady["floor_server_vs_hookline_flat_out"],
                                         "client": a_client},
                "service_cores": steady["floor_service_cores"]}}},
            "huey": {"complete": huey_ms is not None, "huey_cpu_s_per_1000_deliveries": huey_ms}}


def test_the_service_and_huey_bounds_are_medians_of_the_rounds_too():
    """Rounds whose bare client at 200 events/s costs 1.112x, 1.3x and 1.0x the workers'
    flat out: the workers' least ratios 1.673, 1.787 and 1.605 -> 1.673; the service's least
    cores -> 0.362 (round 1's). Huey's only in the two complete rounds, 1.98 ms over 0.608
    and 1.72 ms over 0.590: the median of 3.258 and 2.915 is 3.087. At exactly its limit a
    target is still in reach; past it, out."""
    result = {"targets": RESULT["targets"], "medians": {"flat_out": {}, "steady": {}},
              "rounds": [round_at_200(1.112, 1.98), round_at_200(1.3, None),
                         round_at_200(1.0, 1.72)]}
    found = reach(result)["least"]
    workers, cores, huey = ("workers_cpu_at_200_within_1.5x_flat_out", "service_below_0.3_cores",
                            "huey_cpu_per_delivery_at_least_4x")
    assert (found[workers], found[cores], found[huey]) == (1.673, 0.362, 3.087)
    at_edge = copy.deepcopy(result)
    at_edge["targets"] = {**RESULT["targets"], "cost_ratio_at_most": 1.673,
                          "service_cores_below": 0.3621, "huey_cpu_ratio_at_least": 3.087}
    out = reach(at_edge)["out_of_reach"]
    assert not (out["workers_cpu_at_200_within_1.673x_flat_out"]
                or out["service_below_0.3621_cores"]
                or out["huey_cpu_per_delivery_at_least_3.087x"])
    at_edge["targets"].update(cost_ratio_at_most=1.672, service_cores_below=0.362,
                              huey_cpu_ratio_at_least=3.088)
    out = reach(at_edge)["out_of_reach"]
    assert (out["workers_cpu_at_200_within_1.672x_flat_out"] and out["service_below_0.362_cores"]
            and out["huey_cpu_per_delivery_at_least_3.088x"])


def test_the_least_durable_service_bounds_from_its_own_costs_and_files_before_it_give_none():
    """durable_reach: a round's cost bound is the floor's cost at the rate over hookline's
    flat-out cost of that round; its cores and Huey's ratio only at the target rate and
    with a complete Huey run; a file from before the floor was measured gives no bound."""
    none = {"least": {}, "contradicted": [], "out_of_reach": {}}
    assert durable_reach(RESULT) == {**none, "with_own_work": none}
    result = copy.deepcopy(RESULT)
    result["rounds"] = [
        {"flat_out": {"ingest_cpu_ms_per_event": 0.2, "workers_cpu_ms_per_delivery": 0.25},
         "steady": {
             "200": {"durable": {"ingest_cpu_ms_per_event": 0.6,
                                 "deliverer_cpu_ms_per_delivery": 0.3, "cores": 0.33}},
             "500": {"durable": {"ingest_cpu_ms_per_event": 0.28,
                                 "deliverer_cpu_ms_per_delivery": 0.2, "cores": 0.6}}},
         "huey": {"unavailable": "redis-server not found"}}]
    bounds = durable_reach(result)
    assert bounds["least"] == {"ingest_cpu_at_200_within_1.5x_flat_out": 3.0,
                               "workers_cpu_at_200_within_1.5x_flat_out": 1.2,
                               "ingest_cpu_at_500_within_1.5x_flat_out": 1.4,
                               "workers_cpu_at_500_within_1.5x_flat_out": 0.8,
                               "service_below_0.3_cores": 0.33}
    assert [name for name, out in bounds["out_of_reach"].items() if out] == [
        "ingest_cpu_at_200_within_1.5x_flat_out", "service_below_0.3_cores"]


def test_hooklines_work_beyond_the_least_durable_service_at_its_flat_out_cost():
    """with_own_work: the floor's cost at the rate plus hookline's flat-out cost beyond the
    floor's flat-out cost, over hookline's flat-out cost; a missing figure gives none, and
    so does a floor dearer flat out than hookline. durable_reach gives it per target
    from rounds whose flat-out figures include the floor's, contradicted where hookline's
    own figure is below it."""
    assert with_own_work(0.34, 0.18, 0.28) == round((0.34 + 0.10) / 0.28, 3)
    assert with_own_work(0.34, 0.28, 0.28) == round(0.34 / 0.28, 3)
    assert with_own_work(0.34, 0.3, 0.28) is None  # hookline cheaper flat out: no floor there
    assert with_own_work(None, 0.18, 0.28) is None and with_own_work(0.34, None, 0.28) is None
    result = copy.deepcopy(RESULT)
    result["rounds"] = [
        {"flat_out": {"ingest_cpu_ms_per_event": 0.2, "workers_cpu_ms_per_delivery": 0.25,
                      "durable": {"ingest_cpu_ms_per_event": 0.12,
                                  "deliverer_cpu_ms_per_delivery": 0.15}},
         "steady": {"200": {"durable": {"ingest_cpu_ms_per_event": 0.6,
                                        "deliverer_cpu_ms_per_delivery": 0.3}}}}]
    result["medians"]["steady"]["200"]["workers_cpu_vs_flat_out"] = 1.5
    own_work = durable_reach(result)["with_own_work"]
    assert own_work["least"] == {"ingest_cpu_at_200_within_1.5x_flat_out": 3.4,
                                 "workers_cpu_at_200_within_1.5x_flat_out": 1.6}
    # hookline's own 1.5x is below the 1.6x bound: the premise fails there, no bound.
    assert own_work["contradicted"] == ["workers_cpu_at_200_within_1.5x_flat_out"]
    assert own_work["out_of_reach"] == {"ingest_cpu_at_200_within_1.5x_flat_out": True,
                                        "workers_cpu_at_200_within_1.5x_flat_out": False}

"""`hookline bench --compare`'s pure parts: matching deliveries to events by body, the
latency and throughput figures, the direction of the ratios, the peers' destinations."""

from __future__ import annotations

import hashlib

import pytest

from hookline.rehearsal.compare.peer_tasks import load_destinations
from hookline.rehearsal.compare.workload import body_index, delivery_figures, ratios
from hookline.rehearsal.loadgen import event_body


def sha(index: int) -> str:
    return hashlib.sha256(event_body(index, "run1", 200)).hexdigest()


def effect(endpoint: str, index: int, at: float) -> dict[str, object]:
    return {"endpoint": endpoint, "body_sha256": sha(index), "received_at": at}


def test_body_index_maps_each_event_body_to_its_index():
    """Every event's body hash leads back to its index, and no two bodies collide."""
    index = body_index("run1", 50, 200)
    assert len(index) == 50
    assert index[sha(7)] == 7


def test_delivery_figures_count_first_arrivals_and_measure_from_accept():
    """Latency is first verified arrival minus accept time; a second arrival of the same
    event at an endpoint (another webhook-id) and an unknown body count as extra, not as
    deliveries; a refused event is not expected."""
    effects = [effect("d1", 0, 10.100), effect("d2", 0, 10.200), effect("d1", 1, 11.000),
               effect("d1", 1, 11.500),
               {"endpoint": "d1", "body_sha256": "0" * 64, "received_at": 12.0}]
    figures = delivery_figures(effects=effects, requests=6, accepted_at=[10.0, 10.5, None],
                               index_by_sha=body_index("run1", 3, 200), destinations=2,
                               load_started_at=9.0)
    assert figures["expected"] == 4  # 2 accepted events x 2 destinations
    assert figures["delivered"] == 3
    assert figures["extra_effects"] == 2
    assert figures["requests"] == 6
    assert figures["last_delivery_at"] == 11.0
    assert figures["deliveries_per_s"] == round(3 / 2.0, 1)
    assert figures["latency_ms"]["p50"] == pytest.approx(200.0)
    assert figures["latency_ms"]["max"] == pytest.approx(500.0)


def test_a_delivery_that_beats_the_2xx_counts_as_zero_latency():
    """Arriving before the load generator read the 2xx is 0 ms, never negative."""
    figures = delivery_figures(effects=[effect("d1", 0, 9.99)], requests=1, accepted_at=[10.0],
                               index_by_sha=body_index("run1", 1, 200), destinations=1,
                               load_started_at=9.0)
    assert figures["latency_ms"]["max"] == 0.0


def test_delivery_figures_with_nothing_delivered():
    """No arrivals: nothing delivered, no rate, zero latencies (never a division by zero)."""
    figures = delivery_figures(effects=[], requests=0, accepted_at=[1.0],
                               index_by_sha={}, destinations=3, load_started_at=0.0)
    assert figures["delivered"] == 0 and figures["expected"] == 3
    assert figures["deliveries_per_s"] is None


def test_ratios_above_one_always_favour_hookline():
    """Throughput is hookline / peer, latency and CPU peer / hookline; a missing or zero
    figure gives None."""
    ours = {"events_per_s": 1000.0, "deliveries_per_s": 3000.0, "latency_p50_ms": 10.0,
            "latency_p99_ms": 40.0, "cpu_s_per_1000_deliveries": 0.3}
    theirs = {"events_per_s": 500.0, "deliveries_per_s": 600.0, "latency_p50_ms": 50.0,
              "latency_p99_ms": 20.0, "cpu_s_per_1000_deliveries": None}
    assert ratios(ours, theirs) == {
        "events_per_s": 2.0, "deliveries_per_s": 5.0, "latency_p50_ms": 5.0,
        "latency_p99_ms": 0.5, "cpu_s_per_1000_deliveries": None}


def test_peer_destinations_come_from_the_environment():
    """COMPARE_DESTINATIONS is a JSON list of name, url and secret; unset means none."""
    env = {"COMPARE_DESTINATIONS":
           '[{"name": "d1", "url": "http://127.0.0.1:1/d1", "secret": "whsec_x"}]'}
    assert load_destinations(env) == {"d1": ("http://127.0.0.1:1/d1", "whsec_x")}
    assert load_destinations({}) == {}

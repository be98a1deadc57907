"""rehearsal/bench_latency.py: the bench's percentiles, and sent->delivered joined from the
load generator's send times and the delivered jobs."""

from __future__ import annotations

from hookline.rehearsal.bench_latency import percentiles_ms, sent_to_delivered_ms


def test_percentiles_pick_the_value_at_each_rank_in_ms():
    figures = percentiles_ms([i / 1000 for i in range(1, 101)])  # 1 .. 100 ms
    assert figures == {"p50": 51.0, "p90": 91.0, "p99": 100.0, "max": 100.0}
    assert percentiles_ms([]) == {"p50": None, "p90": None, "p99": None, "max": None}


def test_each_job_counts_from_its_own_events_send_time():
    """Three jobs of event 0 and one of event 2: each from its event's send time; a job of
    an event never sent, of another run (even with an index in range) or not the
    generator's at all, is left out."""
    sent_at = [100.0, None, 200.0]
    delivered = [("bench-ab12-0", 100.010), ("bench-ab12-0", 100.020),
                 ("bench-ab12-0", 100.030), ("bench-ab12-2", 200.005),
                 ("bench-ab12-1", 150.0),  # its request was never written
                 ("bench-ab12-7", 300.0),  # beyond the generator's events
                 ("bench-cd34-0", 100.5),  # another run's event 0
                 ("gh-delivery-x", 400.0)]  # another sender's
    assert sent_to_delivered_ms(delivered, "ab12", sent_at) == {
        "p50": 20.0, "p90": 30.0, "p99": 30.0, "max": 30.0, "joined": 4}

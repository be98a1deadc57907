"""The least durable service of the everyday scenario (rehearsal/everyday_floor.py,
durable_floor), end to end: the ingest floor and the delivery floor as real processes on one
SQLite file, loaded by the Python generator, delivering to the lean receiver on 127.0.0.1."""

from __future__ import annotations

import sqlite3

from hookline.rehearsal.bench import BenchOptions, bench_env
from hookline.rehearsal.everyday_floor import ENDPOINTS, durable_floor


def test_every_stored_event_is_delivered_once_to_each_endpoint_and_marked(tmp_path):
    """Flat out (300 events) and at 100 events/s (100 events): every event stored, its 3
    jobs verified once each by the receiver and marked delivered, and each process's CPU
    read. At the rate, the delivery floor is woken by the ingest floor's datagrams (it
    starts with nothing to claim), and its marks share its claims' writes."""
    env = bench_env(tmp_path)
    flat = durable_floor(BenchOptions(events=300, use_wrk=False, out_dir=tmp_path / "flat"),
                         env, None)
    steady = durable_floor(BenchOptions(events=100, rate_per_s=100.0, use_wrk=False,
                                        out_dir=tmp_path / "steady"), env, 100.0)
    for figures in (flat, steady):
        assert figures["deliveries"] == ENDPOINTS * figures["events"]
        assert figures["ingest_cpu_ms_per_event"] > 0
        assert figures["deliverer_cpu_ms_per_delivery"] > 0
    assert (flat["events"], steady["events"]) == (300, 100)
    assert flat["cores"] is None and 0 < steady["cores"] < 2
    # Marks ride with the next claim, as a worker's results do: about one write per event
    # (the first version wrote two or three at everyday rates); a stall of the load longer
    # than the 50 ms linger adds one.
    assert 1 <= steady["writes"] <= 1.2 * steady["events"]
    with sqlite3.connect(tmp_path / "steady" / "durable-floor" / "floor.db") as conn:
        assert conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall() \
            == [("delivered", 300)]

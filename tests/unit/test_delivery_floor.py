"""rehearsal/delivery_floor.py, the least durable delivery the everyday scenario measures:
its one transaction per wake-up on a real SQLite file made by the ingest floor. Its process
runs end to end beside the ingest floor in tests/acceptance/test_bench_everyday.py."""

from __future__ import annotations

import sqlite3

from hookline.rehearsal.delivery_floor import FloorDeliverer, FloorJob
from hookline.rehearsal.ingest_floor import Event, FloorStore


def _statuses(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall())


def test_a_transaction_marks_the_delivered_then_claims_each_destination_in_turn(tmp_path):
    """Two events of 3 jobs (destinations 0, 1, 2): a claim of 4 takes one job of each
    destination, oldest first, with its event; the next marks those delivered and claims the
    other 3; then nothing is left to claim, and nothing claimed twice."""
    path = str(tmp_path / "floor.db")
    FloorStore(path, jobs_per_event=3).write([Event("e1", "invoice.paid", b'{"n":1}'),
                                              Event("e2", "invoice.sent", b'{"n":2}')])
    conn = sqlite3.connect(path, isolation_level=None)
    deliverer = FloorDeliverer(conn, "http://127.0.0.1:9", ["whsec_a", "whsec_b", "whsec_c"])
    first = deliverer.finish_and_claim([], 4)
    assert [(job.destination, job.event_type, job.body) for job in first] == [
        (0, "invoice.paid", b'{"n":1}'), (1, "invoice.paid", b'{"n":1}'),
        (2, "invoice.paid", b'{"n":1}')]
    assert _statuses(conn) == {"pending": 3, "sending": 3}
    second = deliverer.finish_and_claim([job.job_id for job in first], 64)
    assert [(job.destination, job.event_type) for job in second] == [
        (0, "invoice.sent"), (1, "invoice.sent"), (2, "invoice.sent")]
    assert _statuses(conn) == {"delivered": 3, "sending": 3}
    assert deliverer.finish_and_claim([second[0].job_id], 64) == []
    assert _statuses(conn) == {"delivered": 4, "sending": 2}
    assert deliverer.counts.transactions == 3


def test_a_claim_never_takes_more_than_the_free_slots(tmp_path):
    path = str(tmp_path / "floor.db")
    FloorStore(path, jobs_per_event=3).write([Event(f"e{n}", "t", b"{}") for n in range(5)])
    deliverer = FloorDeliverer(sqlite3.connect(path, isolation_level=None), "http://x",
                               ["whsec_a", "whsec_b", "whsec_c"])
    assert deliverer.finish_and_claim([], 0) == []
    two = deliverer.finish_and_claim([], 2)
    assert [job.destination for job in two] == [0, 1]
    seven = deliverer.finish_and_claim([], 7)  # 2 of each destination: the split rounds down
    assert [job.destination for job in seven] == [0, 0, 1, 1, 2, 2]
    assert all(isinstance(job, FloorJob) for job in seven)

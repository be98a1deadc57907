"""SQLite's cross-process write lock (shared/store/write_lock.py): its wait and hold figures, its
timeout, the warning a long hold logs, and that a claim with nothing to take never takes it."""

from __future__ import annotations

import time

import pytest
from structlog.testing import capture_logs

from hookline.shared.errors import StoreBusy
from hookline.shared.store import write_lock
from hookline.shared.store.write_lock import DurationHistogram, WriteLock
from tests.conftest import new_event


def test_histogram_percentiles_are_within_a_bucket_of_the_truth():
    """p50/p99 read from the buckets overstate by at most 25% and never exceed the max."""
    histogram = DurationHistogram()
    for n in range(1, 1001):  # 1 ms .. 1000 ms
        histogram.record(n / 1000)
    assert histogram.count == 1000 and histogram.max_s == 1.0
    assert 0.5 <= histogram.percentile_s(0.5) <= 0.5 * 1.25
    assert 0.99 <= histogram.percentile_s(0.99) <= 1.0
    summary = histogram.summary_ms()
    assert summary["count"] == 1000 and summary["max_ms"] == 1000.0
    assert summary["total_ms"] == pytest.approx(500_500, rel=1e-6)
    assert DurationHistogram().percentile_s(0.99) == 0.0


def test_lock_counts_waits_and_holds_and_times_out(tmp_path):
    """Each acquire is one wait and each release one hold; a lock held elsewhere (another
    open file description: another process) makes acquire raise StoreBusy after its
    timeout, and that failed wait is not counted as a transaction."""
    path = str(tmp_path / "db-lock")
    mine, theirs = WriteLock(path, timeout_s=0.05), WriteLock(path, timeout_s=0.05)
    try:
        mine.acquire()
        mine.release()
        theirs.acquire()
        with pytest.raises(StoreBusy):
            mine.acquire()
        theirs.release()
        mine.acquire()
        mine.release()
        stats = mine.stats()
        assert stats["wait"]["count"] == 2 and stats["hold"]["count"] == 2
        assert theirs.stats()["hold"]["count"] == 1
    finally:
        mine.close()
        theirs.close()


@pytest.mark.sqlite_only
async def test_a_claim_with_nothing_due_does_not_take_the_write_lock(store, destination_factory):
    """Workers woken under load mostly find the work already taken: such a claim is a read
    (no write lock, no commit); one that can take a job writes."""
    await destination_factory("p")
    before = store.write_lock_stats()["wait"]["count"]
    assert await store.claim("w1", 10, lease_s=30, max_attempts=5) == []
    assert store.write_lock_stats()["wait"]["count"] == before
    await store.add_events([new_event("e1")])
    await store.set_paused("p", True, reason="operator")
    paused = store.write_lock_stats()["wait"]["count"]
    assert await store.claim("w1", 10, lease_s=30, max_attempts=5) == []
    assert store.write_lock_stats()["wait"]["count"] == paused
    await store.set_paused("p", False)
    resumed = store.write_lock_stats()["wait"]["count"]
    assert len(await store.claim("w1", 10, lease_s=30, max_attempts=5)) == 1
    assert store.write_lock_stats()["wait"]["count"] == resumed + 1


def test_a_long_hold_is_logged_once_per_interval_with_the_holds_left_out(tmp_path, monkeypatch):
    """A hold of LONG_HOLD_S or more logs `write_lock_held_long` naming the transaction; more
    long holds within LONG_HOLD_LOG_EVERY_S are counted, not logged, and the next line says
    how many; a short hold logs nothing."""
    # Margins for a loaded machine: a long hold is 50 ms past the bar, and the interval
    # leaves over a second between the first two long holds.
    monkeypatch.setattr(write_lock, "LONG_HOLD_S", 0.1)
    monkeypatch.setattr(write_lock, "LONG_HOLD_LOG_EVERY_S", 1.5)
    lock = WriteLock(str(tmp_path / "db-lock"), timeout_s=1.0)

    def hold(transaction: str, seconds: float) -> None:
        lock.acquire()
        time.sleep(seconds)
        lock.release(transaction)

    try:
        with capture_logs() as logs:
            hold("slow_tx", 0.15)
            hold("again_tx", 0.15)  # within the interval: counted only
            hold("fast_tx", 0.0)  # short: nothing
            time.sleep(1.5)
            hold("later_tx", 0.15)
    finally:
        lock.close()
    long_holds = [line for line in logs if line["event"] == "write_lock_held_long"]
    assert [(line["transaction"], line["left_out"]) for line in long_holds] == [
        ("slow_tx", 0), ("later_tx", 1)]
    assert all(line["held_ms"] >= 150 and line["log_level"] == "warning" for line in long_holds)


@pytest.mark.sqlite_only
async def test_a_long_hold_names_the_store_transaction(store, monkeypatch):
    """The line names the store transaction that held the lock (its generator function)."""
    monkeypatch.setattr(write_lock, "LONG_HOLD_S", 0.0)  # every hold is long
    with capture_logs() as logs:
        await store.add_events([new_event("e1")])
    assert [line["transaction"] for line in logs
            if line["event"] == "write_lock_held_long"] == ["add_events_tx"]

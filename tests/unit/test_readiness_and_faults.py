"""Readiness markers (supervisor/readiness.py) and the fault helpers (shared/faults.py)."""

from __future__ import annotations

import os
from pathlib import Path

from structlog.testing import capture_logs

from hookline.shared.errors import ConfigError, StoreBusy, StoreError, StoreUnavailable
from hookline.shared.faults import CappedBackoff, StoreOutage, is_transient
from hookline.shared.store.postgres import driver_fault
from hookline.supervisor.readiness import Readiness


def test_ready_only_when_every_slot_marker_names_a_live_child(tmp_path: Path) -> None:
    """A marker counts only when it holds the pid of a live child of its slot (a stale one
    from an earlier child does not); the last slot to report makes check() True, once."""
    files = {"ingest": str(tmp_path / "ingest.ready"), "worker-1": str(tmp_path / "w1.ready")}
    readiness = Readiness(files)
    live = {"ingest": {101}, "worker-1": {202}}
    Path(files["ingest"]).write_text("999\n")  # an earlier ingest's marker
    assert not readiness.check(live, files)
    Path(files["ingest"]).write_text("101\n")
    assert not readiness.check(live, files)
    assert readiness.pending == ["worker-1"]
    Path(files["worker-1"]).write_text("202\n")
    assert readiness.check(live, files)
    assert readiness.done and not readiness.check(live, files)  # True exactly once
    Readiness.clear(files["worker-1"])
    assert not os.path.exists(files["worker-1"])


def test_a_retired_slot_no_longer_holds_readiness_back(tmp_path: Path) -> None:
    readiness = Readiness({"worker-2": str(tmp_path / "w2.ready")})
    assert readiness.check({}, wanted={"ingest"})


def test_transient_or_permanent() -> None:
    assert is_transient(StoreUnavailable("connection refused"))
    assert is_transient(StoreBusy("database is locked"))
    assert is_transient(RuntimeError("a bug of this process"))
    assert not is_transient(StoreError("schema version 9 is newer than this hookline"))
    assert not is_transient(ConfigError("bad setting"))


def test_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = CappedBackoff(0.1, 0.5)
    assert [backoff.next_delay_s() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.next_delay_s() == 0.1


def test_one_log_pair_per_outage_however_many_retries() -> None:
    outage = StoreOutage()
    with capture_logs() as logs:
        outage.succeeded()  # nothing to recover from
        for _ in range(50):
            outage.failed(StoreUnavailable("refused"), during="claim")
        outage.succeeded()
        outage.succeeded()
        outage.failed(StoreUnavailable("refused"), during="finish")
    assert [log["event"] for log in logs] == ["store_unavailable", "store_recovered",
                                              "store_unavailable"]
    assert outage.outages == 2 and outage.ongoing


def test_a_driver_timeout_or_socket_error_says_what_to_check() -> None:
    """A timeout's own text is empty: the message says there was no answer, and both it and
    a socket error say what to check (it read `TimeoutError: ` before)."""
    timeout = driver_fault(TimeoutError(), "cannot connect to postgresql://db.example/h")
    assert isinstance(timeout, StoreUnavailable)
    assert str(timeout) == ("cannot connect to postgresql://db.example/h: TimeoutError: no "
                            "answer in time (is the server up, and reachable from this host?)")
    refused = driver_fault(ConnectionRefusedError(111, "Connect call failed"), "cannot connect")
    assert "Connect call failed (is the server up, and reachable" in str(refused)

"""The in-process metrics snapshots (shared/process/metrics_file.py) on real files: a restarted
process carries its counters on, an exited process's counters still count while its gauges
and per-process series go, and the supervisor names restart causes in a bounded set."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hookline.shared.metrics_catalog import (
    ACCEPT_SECONDS_BUCKETS,
    CHILDREN_ALIVE,
    INGEST_ACCEPT_SECONDS,
    INGEST_REQUESTS,
)
from hookline.shared.process.metrics_file import (
    ProcessMetrics,
    SnapshotWriter,
    merge_snapshots,
    read_snapshots,
)
from hookline.supervisor.metrics import restart_cause

ROUTE = ("POST /v1/events", "202")


def test_a_restarted_process_carries_its_counters_and_histograms_on(tmp_path: Path) -> None:
    first = ProcessMetrics()
    first.inc(INGEST_REQUESTS, ROUTE, 3)
    first.observe(INGEST_ACCEPT_SECONDS, 0.002, ACCEPT_SECONDS_BUCKETS)
    SnapshotWriter(tmp_path, "ingest", first).write()

    second = ProcessMetrics()  # the same slot, a new process
    second.inc(INGEST_REQUESTS, ROUTE, 2)
    second.observe(INGEST_ACCEPT_SECONDS, 0.2, ACCEPT_SECONDS_BUCKETS)
    writer = SnapshotWriter(tmp_path, "ingest", second)
    writer.write()
    writer.write()  # writing again adds nothing: the base is read once, at start

    merged = merge_snapshots(read_snapshots(tmp_path), lambda pid: True)
    assert merged[INGEST_REQUESTS.name] == {ROUTE: 5}
    [accept] = merged[INGEST_ACCEPT_SECONDS.name].values()
    assert accept["count"] == 2 and accept["cumulative"][-1] == 2
    assert accept["cumulative"][ACCEPT_SECONDS_BUCKETS.index(0.0025)] == 1


def test_exited_processes_keep_their_counts_but_not_their_gauges(tmp_path: Path) -> None:
    for slot in ("worker-1", "worker-2"):
        metrics = ProcessMetrics()
        metrics.inc(INGEST_REQUESTS, ROUTE)
        metrics.set(CHILDREN_ALIVE, ("worker",), 2)
        SnapshotWriter(tmp_path, slot, metrics).write()
    gone = tmp_path / "worker-2.metrics.json"
    data = json.loads(gone.read_text())
    data["pid"] = 2 ** 22 + 1  # a process that no longer runs
    gone.write_text(json.dumps(data))

    merged = merge_snapshots(read_snapshots(tmp_path), lambda pid: pid == os.getpid())
    assert merged[INGEST_REQUESTS.name] == {ROUTE: 2}  # summed over both
    assert merged[CHILDREN_ALIVE.name] == {("worker",): 2}  # the live one's reading only
    cpu_slots = {labels[0] for labels in merged["hookline_process_cpu_seconds_total"]}
    assert cpu_slots == {"worker-1"}


def test_an_unreadable_snapshot_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "ingest.metrics.json").write_text("{half")
    assert read_snapshots(tmp_path) == []
    SnapshotWriter(None, "ingest", ProcessMetrics()).write()  # no folder: writes nothing


def test_restart_causes() -> None:
    assert restart_cause({"exit_code": 75}, hung=False) == "transient"
    assert restart_cause({"exit_code": 1}, hung=False) == "crash"
    assert restart_cause({"exit_code": 0}, hung=False) == "exit"
    assert restart_cause({"signal": "SIGKILL"}, hung=False) == "signal"
    assert restart_cause({"signal": "SIGKILL"}, hung=True) == "hung"

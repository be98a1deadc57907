"""The in-process metrics snapshots (shared/process/metrics_file.py) on real files: a restarted
process carries its counters on, an exited process's counters still count while its gauges
and per-process series go, the files of slots gone for long are aged out without any sum going
down, and the supervisor names restart causes in a bounded set."""

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
    retire_snapshots,
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


def _exited(path: Path, written_at: float) -> None:
    """Make a snapshot file look written at `written_at` by a process that no longer runs."""
    data = json.loads(path.read_text())
    data["pid"], data["written_at"] = 2 ** 22 + 1, written_at
    path.write_text(json.dumps(data))


def test_snapshots_of_slots_gone_for_long_are_aged_out_and_their_counts_kept(
        tmp_path: Path) -> None:
    """Old files of exited processes are folded into one `_retired` snapshot and deleted;
    a recent one, or a running process's, stays; every counter and histogram sum is the same
    before and after, and after a second round (a retired total is added to, not replaced)."""
    now = 1_000_000.0
    for slot, n in (("worker-1", 1), ("worker-7", 2), ("worker-8", 4), ("worker-9", 8)):
        metrics = ProcessMetrics()
        metrics.inc(INGEST_REQUESTS, ROUTE, n)
        metrics.observe(INGEST_ACCEPT_SECONDS, 0.002, ACCEPT_SECONDS_BUCKETS)
        SnapshotWriter(tmp_path, slot, metrics).write()
    _exited(tmp_path / "worker-7.metrics.json", now - 7200)
    _exited(tmp_path / "worker-8.metrics.json", now - 7200)
    _exited(tmp_path / "worker-9.metrics.json", now - 60)  # gone a minute: may come back
    alive = lambda pid: pid == os.getpid()  # noqa: E731  (a one-line predicate)
    before = merge_snapshots(read_snapshots(tmp_path), alive)

    assert retire_snapshots(tmp_path, alive, older_than_s=3600, now_s=now) == 2
    names = sorted(p.name for p in tmp_path.glob("*.metrics.json"))
    assert names == ["_retired.metrics.json", "worker-1.metrics.json", "worker-9.metrics.json"]
    after = merge_snapshots(read_snapshots(tmp_path), alive)
    assert after[INGEST_REQUESTS.name] == before[INGEST_REQUESTS.name] == {ROUTE: 15}
    assert after[INGEST_ACCEPT_SECONDS.name] == before[INGEST_ACCEPT_SECONDS.name]

    # Later, worker-9 ages out too: added to the retired totals.
    assert retire_snapshots(tmp_path, alive, older_than_s=3600, now_s=now + 3600) == 1
    again = merge_snapshots(read_snapshots(tmp_path), alive)
    assert again[INGEST_REQUESTS.name] == {ROUTE: 15}
    assert again[INGEST_ACCEPT_SECONDS.name] == before[INGEST_ACCEPT_SECONDS.name]
    assert len(list(tmp_path.glob("*.metrics.json"))) == 2


def test_a_file_already_in_the_retired_totals_is_counted_once(tmp_path: Path) -> None:
    """A round that wrote the retired totals but stopped before deleting the file it folded:
    readers skip that file, and the next round deletes it without adding it again."""
    now = 1_000_000.0
    metrics = ProcessMetrics()
    metrics.inc(INGEST_REQUESTS, ROUTE, 5)
    SnapshotWriter(tmp_path, "worker-3", metrics).write()
    path = tmp_path / "worker-3.metrics.json"
    _exited(path, now - 7200)
    kept = path.read_text()
    alive = lambda pid: False  # noqa: E731  (a one-line predicate)
    assert retire_snapshots(tmp_path, alive, older_than_s=3600, now_s=now) == 1
    path.write_text(kept)  # as if the unlink had not happened
    assert merge_snapshots(read_snapshots(tmp_path), alive)[INGEST_REQUESTS.name] == {ROUTE: 5}
    assert retire_snapshots(tmp_path, alive, older_than_s=3600, now_s=now + 10) == 0
    assert not path.exists()
    assert merge_snapshots(read_snapshots(tmp_path), alive)[INGEST_REQUESTS.name] == {ROUTE: 5}

"""In-process metrics, and how every process's reach the one `/metrics` endpoint.

Each process (the supervisor, ingest, every worker) counts in its own memory
(:class:`ProcessMetrics`: a dict update per event, no lock, no I/O) and every
:data:`SNAPSHOT_INTERVAL_S` writes a JSON snapshot to `<runtime_dir>/<slot>.metrics.json`
(temp file + rename, so a reader never sees half of one). Ingest reads every snapshot in the
folder when `/metrics` is scraped (:func:`read_snapshots`, :func:`merge_snapshots`), after
writing its own, so what a scrape shows was persisted first.

Counters and histograms never go down: a process starts from its slot's previous snapshot
(:class:`SnapshotWriter` loads it as a base and adds to it), and families not kept per process
are summed over every snapshot in the folder, including those of processes that have exited.
A process killed between two snapshots loses at most the counts of that interval, never counts
already scraped. Per-process families (`per_slot`) are shown only while the process that wrote
them runs. The files of slots no longer run (a worker count lowered, a slot renamed) are
aged out: once a file's process is gone and it is :data:`RETIRED_AFTER_S` old, its counters
and histograms are added to `_retired.metrics.json` and the file is deleted
(:func:`retire_snapshots`, at each scrape), so the folder and each scrape's work stay bounded
while the sums never go down. Removing the runtime folder resets everything.
"""

from __future__ import annotations

import asyncio
import bisect
import fcntl
import json
import os
import resource
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookline.shared.logs import get_logger
from hookline.shared.metrics_catalog import (
    BY_NAME,
    PROCESS_CPU_SECONDS,
    PROCESS_RESIDENT_MEMORY_BYTES,
    PROCESS_START_TIME_SECONDS,
    Family,
)
from hookline.shared.process.lifecycle import stopped_within

SNAPSHOT_INTERVAL_S = 2.0
"""How often a process writes its snapshot, seconds (a scrape sees figures this much old)."""
SNAPSHOT_SUFFIX = ".metrics.json"
RETIRED_SLOT = "_retired"
"""The slot of the snapshot that holds the counts of aged-out slots."""
RETIRED_AFTER_S = 3600.0
"""How long the snapshot of an exited process stays before it is aged out, seconds: far
beyond a supervisor's restart of the slot (which carries the file's counts on itself)."""

Labels = tuple[str, ...]
HistogramData = dict[str, Any]
"""A histogram in a snapshot: {"bounds": [...], "cumulative": [...], "count": n, "sum": s}
(cumulative[i] = observations <= bounds[i]; count includes those above the last bound)."""


class Histogram:
    """Observation counts in fixed buckets, plus their count and sum (one per label set)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Add one observation (in the family's unit)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value

    def data(self) -> HistogramData:
        """The snapshot form (cumulative counts)."""
        cumulative, seen = [], 0
        for n in self.counts[:-1]:
            seen += n
            cumulative.append(seen)
        return {"bounds": list(self.bounds), "cumulative": cumulative, "count": self.count,
                "sum": self.sum}


HistogramSource = Callable[[], Mapping[str, Mapping[Labels, HistogramData]]]
ValueSource = Callable[[], Mapping[str, Mapping[Labels, float]]]


@dataclass(slots=True)
class ProcessMetrics:
    """One process's counters, gauges and histograms, by family name and label values.

    Meant for one thread (the event loop, or the supervisor's loop); figures kept by another
    thread are read at snapshot time through `histogram_sources`, counts another object
    keeps (a store's missed deadlines) through `value_sources`.
    """

    values: dict[str, dict[Labels, float]] = field(default_factory=dict)
    histograms: dict[str, dict[Labels, Histogram]] = field(default_factory=dict)
    histogram_sources: list[HistogramSource] = field(default_factory=list)
    value_sources: list[ValueSource] = field(default_factory=list)

    def inc(self, family: Family, labels: Labels = (), amount: float = 1.0) -> None:
        """Add `amount` to a counter."""
        series = self.values.setdefault(family.name, {})
        series[labels] = series.get(labels, 0.0) + amount

    def set(self, family: Family, labels: Labels, value: float) -> None:
        """Set a gauge."""
        self.values.setdefault(family.name, {})[labels] = value

    def clear(self, family: Family) -> None:
        """Forget every series of a gauge (before setting the current ones)."""
        self.values.pop(family.name, None)

    def observe(self, family: Family, value: float, bounds: tuple[float, ...],
                labels: Labels = ()) -> None:
        """Add one observation to a histogram with these bucket bounds."""
        series = self.histograms.setdefault(family.name, {})
        histogram = series.get(labels)
        if histogram is None:
            histogram = series[labels] = Histogram(bounds)
        histogram.observe(value)

    def current(self) -> dict[str, dict[Labels, Any]]:
        """Every family's series now: numbers, or :data:`HistogramData`."""
        out: dict[str, dict[Labels, Any]] = {name: dict(series)
                                             for name, series in self.values.items()}
        for name, hseries in self.histograms.items():
            out[name] = {labels: h.data() for labels, h in hseries.items()}
        for source in (*self.histogram_sources, *self.value_sources):
            for name, series in source().items():
                out.setdefault(name, {}).update(series)
        return out


def snapshot_path(folder: Path, slot: str) -> Path:
    """`<folder>/<slot>.metrics.json`."""
    return folder / f"{slot}{SNAPSHOT_SUFFIX}"


class SnapshotWriter:
    """Writes one process's snapshots, continuing the carried families of its slot's last one.

    Args:
        folder: the runtime folder; None keeps no file (:meth:`write` does nothing, e.g. an
            ingest app run inside a test, which still shows its own figures).
        slot: the process's slot name (`supervisor`, `ingest`, `worker-2`).
        metrics: what the process counts.
    """

    def __init__(self, folder: Path | None, slot: str, metrics: ProcessMetrics) -> None:
        self.path = None if folder is None else snapshot_path(folder, slot)
        self.slot = slot
        self.metrics = metrics
        self.base = {} if self.path is None else _carried(read_snapshot(self.path))
        self._warned = False

    def build(self) -> dict[str, Any]:
        """The snapshot now: the base plus this process's figures, and its CPU and memory."""
        families: dict[str, dict[Labels, Any]] = {}
        for name, series in self.base.items():
            families[name] = dict(series)
        for name, series in self.metrics.current().items():
            family = BY_NAME.get(name)
            merged = families.setdefault(name, {})
            for labels, value in series.items():
                base = merged.get(labels) if family is not None and family.carried else None
                merged[labels] = value if base is None else _add(base, value)
        for family, value in process_figures().items():
            families[family.name] = {(): value}
        return {"slot": self.slot, "pid": os.getpid(), "written_at": time.time(),
                "families": {name: [[list(labels), value] for labels, value in series.items()]
                             for name, series in families.items()}}

    def write(self) -> None:
        """Replace the snapshot file (temp file + rename). An unwritable folder is logged
        once, never fatal: the process works on, its figures are missing from /metrics."""
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _replace(self.path, self.build())
            self._warned = False
        except OSError as exc:
            if not self._warned:
                get_logger().warning("metrics_snapshot_failed", path=str(self.path),
                                     error=str(exc))
                self._warned = True


async def write_snapshots(writer: SnapshotWriter, stop: asyncio.Event,
                          interval_s: float = SNAPSHOT_INTERVAL_S) -> None:
    """Write `writer`'s snapshot every `interval_s` seconds, and once more when `stop` is set
    (a clean stop loses nothing). Runs as a task on the process's event loop."""
    while not stop.is_set():
        writer.write()
        await stopped_within(stop, interval_s)
    writer.write()


def process_figures() -> dict[Family, float]:
    """This process's CPU seconds (user + system), resident memory bytes (Linux /proc; 0
    elsewhere) and start time (unix seconds)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {PROCESS_CPU_SECONDS: usage.ru_utime + usage.ru_stime,
            PROCESS_RESIDENT_MEMORY_BYTES: float(_resident_bytes()),
            PROCESS_START_TIME_SECONDS: _START_TIME}


_START_TIME = time.time()


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def read_snapshot(path: Path) -> dict[str, Any] | None:
    """One snapshot file; None when missing or not a snapshot."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("families"), dict) else None


def read_snapshots(folder: Path) -> list[dict[str, Any]]:
    """Every snapshot in the runtime folder (unreadable ones are skipped)."""
    try:
        paths = sorted(folder.glob(f"*{SNAPSHOT_SUFFIX}"))
    except OSError:
        return []
    return [s for s in (read_snapshot(p) for p in paths) if s is not None]


def merge_snapshots(snapshots: Iterable[Mapping[str, Any]],
                    alive: Callable[[int], bool]) -> dict[str, dict[Labels, Any]]:
    """The families of all snapshots, as ingest exposes them.

    Per-process families get the writer's slot as first label value and come only from
    processes `alive(pid)` says run; gauges likewise (a dead process's gauge is no reading);
    counters and histograms are summed over every snapshot, so they never go down when a
    process exits. Unknown family names are ignored (a newer or older writer).
    """
    out: dict[str, dict[Labels, Any]] = {}
    snapshots = list(snapshots)
    folded = {(str(slot), float(at)) for snap in snapshots if snap.get("slot") == RETIRED_SLOT
              for slot, at in snap.get("folded", [])}
    for snap in snapshots:
        if (str(snap.get("slot")), float(snap.get("written_at") or 0.0)) in folded:
            continue  # already in the retired totals; its file is about to go
        pid = snap.get("pid")
        running = isinstance(pid, int) and alive(pid)
        slot = str(snap.get("slot", "?"))
        for name, series in snap["families"].items():
            family = BY_NAME.get(name)
            if family is None or not isinstance(series, list):
                continue
            if (family.per_slot or family.kind == "gauge") and not running:
                continue
            merged = out.setdefault(name, {})
            for labels_list, value in series:
                labels = tuple(str(v) for v in labels_list)
                if family.per_slot:
                    labels = (slot, *labels)
                if len(labels) != len(family.labels) + family.per_slot:
                    continue
                base = merged.get(labels)
                merged[labels] = value if base is None else _add(base, value)
    return out


def retire_snapshots(folder: Path, alive: Callable[[int], bool], *,
                     older_than_s: float = RETIRED_AFTER_S, now_s: float | None = None) -> int:
    """Age out the snapshots of exited processes last written more than `older_than_s`
    seconds ago: their counters and histograms are added to the `_retired` snapshot, which
    records which (slot, written_at) it holds, before their files are deleted, so a reader
    at any moment counts each once. Under a lock file, so two ingest processes never fold
    the same file twice. Filesystem errors are logged and leave everything for the next
    scrape.

    Args:
        folder: the runtime folder.
        alive: whether a pid's process runs.
        older_than_s: age past which an exited process's file is aged out, seconds.
        now_s: the time now, unix seconds (None: the clock).

    Returns:
        How many files were aged out.
    """
    now = time.time() if now_s is None else now_s
    retired_path = snapshot_path(folder, RETIRED_SLOT)
    try:
        with open(folder / ".retire.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            retired = read_snapshot(retired_path) or {
                "slot": RETIRED_SLOT, "pid": 0, "written_at": now, "families": {}}
            done_before = {(str(slot), float(at)) for slot, at in retired.get("folded", [])}
            stale = []
            for path in sorted(folder.glob(f"*{SNAPSHOT_SUFFIX}")):
                snap = read_snapshot(path)
                if snap is None or path == retired_path or not isinstance(snap.get("pid"), int):
                    continue
                written = float(snap.get("written_at") or 0.0)
                if (str(snap.get("slot")), written) in done_before:
                    path.unlink(missing_ok=True)  # folded by a round that stopped before this
                elif written < now - older_than_s and not alive(snap["pid"]):
                    stale.append((path, snap))
            if not stale:
                return 0
            totals = merge_snapshots([retired, *(snap for _, snap in stale)], lambda _: False)
            _replace(retired_path, {
                "slot": RETIRED_SLOT, "pid": 0, "written_at": now,
                "families": {name: [[list(labels), value] for labels, value in series.items()]
                             for name, series in totals.items()},
                "folded": [[snap["slot"], snap["written_at"]] for _, snap in stale]})
            for path, _ in stale:
                path.unlink(missing_ok=True)
            return len(stale)
    except OSError as exc:
        get_logger().warning("metrics_snapshot_retire_failed", folder=str(folder),
                             error=str(exc))
        return 0


def _replace(path: Path, snapshot: Mapping[str, Any]) -> None:
    """Write `snapshot` to `path` through a temp file and a rename (a reader sees the old
    file or the new, never half of one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(snapshot))
    os.replace(tmp, path)


def _carried(snapshot: Mapping[str, Any] | None) -> dict[str, dict[Labels, Any]]:
    """The carried families of a previous snapshot (the base a restarted process adds to)."""
    if snapshot is None:
        return {}
    out: dict[str, dict[Labels, Any]] = {}
    for name, series in snapshot["families"].items():
        family = BY_NAME.get(name)
        if family is None or not family.carried or family.kind == "gauge" \
                or not isinstance(series, list):
            continue
        out[name] = {tuple(str(v) for v in labels): value for labels, value in series}
    return out


def _add(a: Any, b: Any) -> Any:
    """Sum of two counter values or two histograms (a histogram whose bounds differ from the
    other's is replaced by it: the bucket layout changed)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("bounds") != b.get("bounds"):
            return b
        return {"bounds": b["bounds"],
                "cumulative": [x + y for x, y in zip(a["cumulative"], b["cumulative"],
                                                     strict=True)],
                "count": a["count"] + b["count"], "sum": a["sum"] + b["sum"]}
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + b
    return b

"""`GET /metrics`: Prometheus text, from the database and from every hookline process.

Two sources, both read at scrape time:

* **The database** (:meth:`Store.metric_figures`): jobs by destination and status, the oldest
  due job, attempts by destination and outcome, accept -> delivered latency per destination,
  pause state and failure run per destination, events stored, operational events made; and
  the store's own gauges (:meth:`Store.health`: the SQLite WAL). The store keeps these
  figures in the transactions that change the rows (shared/store/metric_deltas.py), so a
  scrape reads a small table, not the jobs: its cost grows with destinations, not jobs.
  They are the same whichever host answers and add up across every worker process.
  Attempts and latency never go down (retention deletes rows, not their counts).
  At most `metrics_destination_series_max` destinations get series of their own
  (paused, failing, oldest due job first); the others,
  and the jobs of removed destinations, are added up under `destination="_other"`, and
  `hookline_destinations` says how many are shown and folded. Every destination shown has
  every outcome series from the start (0), so `increase()` sees its first failure.
* **Each process's memory**, through the snapshots every process leaves in the runtime folder
  (shared/process/metrics_file.py; families in shared/metrics_catalog.py): ingest's requests,
  refusals, accept latency and batch sizes; each process's write-lock waits, CPU and memory;
  the supervisor's children, restarts, heartbeats and clock steps. Ingest writes its own
  snapshot first, so a scrape never shows a count that was not persisted.

Plus `hookline_ready` (the /readyz checks), `hookline_build_info` and
`hookline_database_readable`. While the database does not answer within
`FIGURES_TIMEOUT_S` (a PostgreSQL outage, a silent network), /metrics still answers 200,
within Prometheus's default 10 s scrape timeout, with what the processes know (their store
timeouts, the supervisor's children, `hookline_ready` as /readyz finds it),
`hookline_database_readable 0`, and none of the database's families: a zero there would
read as jobs gone or a counter reset.
"""

from __future__ import annotations

import asyncio
import os
import platform
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from hookline.ingest import health
from hookline.ingest.app_state import CONFIG_KEY, READ_STORE_KEY, SNAPSHOTS_KEY, STORE_KEY
from hookline.shared.errors import StoreUnavailable
from hookline.shared.logs import get_logger
from hookline.shared.metrics_catalog import FAMILIES
from hookline.shared.models import JOB_STATUSES
from hookline.shared.policy import notify
from hookline.shared.policy.delivery import pause_kind
from hookline.shared.process.lifecycle import pid_alive, runtime_dir
from hookline.shared.process.metrics_file import (
    Labels,
    merge_snapshots,
    read_snapshots,
    retire_snapshots,
)
from hookline.shared.report_models import MetricFigures
from hookline.shared.store.health import Gauge
from hookline.shared.version import VERSION

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The database's figures take about 0.1 s with 10 million jobs (docs/benchmarks.md); past
# this, the scrape answers without them, well within Prometheus's default 10 s timeout.
FIGURES_TIMEOUT_S = 5.0
OUTCOMES = ("delivered", "http_3xx", "http_4xx", "http_5xx", "transport_error", "worker_lost",
            "handed_back")
"""The finished-attempt outcome classes every destination shown has from the start."""


class StatsCollector(Collector):
    """Yields the database's metric families from one :class:`MetricFigures` read.

    Args:
        figures: the store's figures (of the destinations shown alone, the rest in `other`).
        store_gauges: the store's own gauges (its health's: the WAL size and its limit on
            SQLite, none on PostgreSQL).
    """

    def __init__(self, figures: MetricFigures, store_gauges: tuple[Gauge, ...] = ()) -> None:
        self.figures = figures
        self.store_gauges = store_gauges

    def collect(self) -> Iterator[Metric]:
        """Jobs, oldest due age, attempts, latency, pause state, failure runs, events, WAL."""
        fig = self.figures
        series = [*fig.destinations, *([fig.other] if fig.other is not None else [])]
        shown = GaugeMetricFamily(
            "hookline_destinations", "Live destinations, by whether /metrics shows them with "
            "series of their own (shown) or adds them up under destination=\"_other\" "
            "(folded; metrics_destination_series_max).", labels=["series"])
        shown.add_metric(["shown"], len(fig.destinations))
        shown.add_metric(["folded"], 0 if fig.other is None else fig.other.folded)
        yield shown
        jobs = GaugeMetricFamily("hookline_jobs", "Jobs by destination and status.",
                                 labels=["destination", "status"])
        for d in series:
            for status in JOB_STATUSES:
                jobs.add_metric([d.name, status], d.jobs.get(status, 0))
        yield jobs

        yield GaugeMetricFamily(
            "hookline_oldest_pending_age_seconds",
            "Age of the longest-waiting due pending job, seconds (0 when none is due).",
            value=fig.oldest_due_age_s or 0.0)
        oldest = GaugeMetricFamily(
            "hookline_destination_oldest_due_age_seconds",
            "Age of each destination's longest-waiting due pending job, seconds (0 when none "
            "is due).", labels=["destination"])
        for d in series:
            oldest.add_metric([d.name], d.oldest_due_age_s or 0.0)
        yield oldest

        # Finished attempts only: an attempt's outcome is fixed once it is closed, and the
        # purge deletes rows, not their counts, so these never go down (but see `_other`).
        attempts = CounterMetricFamily(
            "hookline_attempts", "Finished delivery attempts, by destination and outcome.",
            labels=["destination", "outcome"])
        for d in series:
            for outcome in sorted(set(OUTCOMES) | set(d.attempts)):
                attempts.add_metric([d.name, outcome], d.attempts.get(outcome, 0))
        yield attempts
        yield GaugeMetricFamily("hookline_attempts_in_flight",
                                "Attempts started and not yet finished.", value=fig.in_flight)

        latency = HistogramMetricFamily(
            "hookline_delivery_latency_seconds",
            "Accept -> delivered time of each job delivery, seconds, by destination.",
            labels=["destination"])
        for d in series:
            if d.latency is None:
                continue
            buckets = [(f"{bound:g}", n) for bound, n in d.latency.buckets]
            buckets.append(("+Inf", d.latency.count))
            latency.add_metric([d.name], buckets, sum_value=d.latency.sum_s)
        yield latency

        filtered = CounterMetricFamily(
            "hookline_events_filtered", "Events a destination subscribes to that its payload "
            "filter turned away (no job made), by destination.", labels=["destination"])
        for d in series:
            filtered.add_metric([d.name], d.filtered)
        yield filtered

        paused = GaugeMetricFamily(
            "hookline_destination_paused",
            "1 while a live destination is paused (reason: manual or auto), else 0 "
            "(_other: 1 when any destination it adds up is).",
            labels=["destination", "reason"])
        streak = GaugeMetricFamily(
            "hookline_destination_failure_streak",
            "Consecutive failed attempts of each live destination since its last 2xx "
            "(_other: the longest).", labels=["destination"])
        for d in series:
            reason = pause_kind(d.paused_reason) if d.paused else ""
            paused.add_metric([d.name, reason], 1 if d.paused else 0)
            streak.add_metric([d.name], d.failure_streak)
        yield paused
        yield streak

        yield GaugeMetricFamily("hookline_events_stored", "Events stored.", value=fig.events)
        notifications = CounterMetricFamily(
            "hookline_notifications",
            "Operational events made (hookline.KIND, see OPERATIONS.md), by kind.",
            labels=["kind"])
        for kind in sorted({t.removeprefix(notify.PREFIX) for t in notify.TYPES}
                           | set(fig.notifications)):
            notifications.add_metric([kind], fig.notifications.get(kind, 0))
        yield notifications
        for gauge in self.store_gauges:
            yield GaugeMetricFamily(gauge.name, gauge.help, value=gauge.value)


class ProcessCollector(Collector):
    """Yields the in-process families (shared/metrics_catalog.py) from merged snapshots."""

    def __init__(self, merged: Mapping[str, Mapping[Labels, Any]]) -> None:
        self.merged = merged

    def collect(self) -> Iterator[Metric]:
        """Every catalogued family, with the series the snapshots hold (maybe none)."""
        for family in FAMILIES:
            labels = (["slot"] if family.per_slot else []) + list(family.labels)
            series = sorted(self.merged.get(family.name, {}).items())
            if family.kind == "histogram":
                histogram = HistogramMetricFamily(family.name, family.help, labels=labels)
                for values, data in series:
                    if not isinstance(data, dict):
                        continue
                    buckets = [(f"{bound:g}", n)
                               for bound, n in zip(data["bounds"], data["cumulative"],
                                                   strict=True)]
                    buckets.append(("+Inf", data["count"]))
                    histogram.add_metric(list(values), buckets, sum_value=data["sum"])
                yield histogram
                continue
            metric: CounterMetricFamily | GaugeMetricFamily = (
                CounterMetricFamily(family.name, family.help, labels=labels)
                if family.kind == "counter"
                else GaugeMetricFamily(family.name, family.help, labels=labels))
            for values, value in series:
                if isinstance(value, int | float):
                    metric.add_metric(list(values), value)
            yield metric


class InfoCollector(Collector):
    """`hookline_ready`, `hookline_database_readable` and `hookline_build_info`."""

    def __init__(self, ready: bool, backend: str, readable: bool = True) -> None:
        self.ready = ready
        self.backend = backend
        self.readable = readable

    def collect(self) -> Iterator[Metric]:
        """Readiness (1/0), whether the database's figures were read (1/0) and the build."""
        yield GaugeMetricFamily(
            "hookline_ready", "1 when /readyz answers 200 (database writable, a live worker, "
            "not stopping), else 0.", value=1 if self.ready else 0)
        yield GaugeMetricFamily(
            "hookline_database_readable", "1 when this scrape read the database's figures; 0 "
            "when the database did not answer, and the families read from it are left out.",
            value=1 if self.readable else 0)
        info = GaugeMetricFamily("hookline_build_info",
                                 "Always 1; the labels name the build.",
                                 labels=["version", "python", "backend"])
        info.add_metric([VERSION, platform.python_version(), self.backend], 1)
        yield info


def render(figures: MetricFigures | None, *,
           merged: Mapping[str, Mapping[Labels, Any]] | None = None, ready: bool = False,
           backend: str = "", store_gauges: tuple[Gauge, ...] = ()) -> bytes:
    """Prometheus text exposition of the store's figures (None: the database did not answer,
    none is shown) and the processes' snapshots (`backend`: the store's, as its health
    names it)."""
    registry = CollectorRegistry(auto_describe=False)
    if figures is not None:
        registry.register(StatsCollector(figures, store_gauges))
    registry.register(ProcessCollector(merged or {}))
    registry.register(InfoCollector(ready, backend, readable=figures is not None))
    return generate_latest(registry)


def process_families(app: web.Application) -> dict[str, dict[Labels, Any]]:
    """Every process's in-memory families, merged as /metrics shows them (the dashboard's
    processes view reads this too): family name -> label values -> number or histogram.

    Ingest's own snapshot is written first, so what is shown was persisted: a restart cannot
    go below it. An app without a runtime folder (tests) shows its own figures only."""
    writer = app[SNAPSHOTS_KEY]
    if writer.path is not None:
        writer.write()
        folder = runtime_dir(app[CONFIG_KEY])
        retire_snapshots(folder, pid_alive)
        snapshots = read_snapshots(folder)
    else:
        snapshots = [writer.build()]
    return merge_snapshots(snapshots, lambda pid: pid == os.getpid() or pid_alive(pid))


async def scrape(app: web.Application) -> bytes:
    """Everything /metrics answers for this ingest app (module docstring); without the
    database's families while it does not answer within FIGURES_TIMEOUT_S seconds. The
    figures and the readiness checks are read at once, so a scrape answers within about
    FIGURES_TIMEOUT_S whatever the database does."""
    reader = app[READ_STORE_KEY]  # a read must not hold up the group commit

    async def read_figures() -> MetricFigures | None:
        try:
            return await asyncio.wait_for(
                reader.metric_figures(app[CONFIG_KEY].metrics_destination_series_max),
                FIGURES_TIMEOUT_S)
        except (StoreUnavailable, TimeoutError) as exc:  # show what the processes know
            get_logger().warning("metrics_figures_unreadable", error=(
                str(exc) or f"no answer within {FIGURES_TIMEOUT_S:g} s"))
            return None

    figures, (problems, _) = await asyncio.gather(read_figures(), health.readiness(app))
    merged = process_families(app)
    found = await app[STORE_KEY].health()  # the store's own view: no database call
    return render(figures, merged=merged, ready=not problems, backend=found.backend,
                  store_gauges=found.gauges)

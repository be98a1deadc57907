"""`GET /metrics`: Prometheus text built from the database at scrape time.

Nothing is counted in process memory: each scrape reads :meth:`Store.stats` and a custom
collector turns that snapshot into metric families, so the numbers are the same whichever
ingest process answers and they add up across every worker process (they are the store's
rows, not per-process counters).

Attempts: `hookline_attempts_total{outcome}` counts finished attempts (an outcome never
changes once recorded); `hookline_attempts_in_flight` is a gauge of those still being sent.
`hookline_sqlite_wal_bytes` is the -wal file's size at scrape time (SQLite only).

Latency: `hookline_delivery_latency_seconds` is a histogram of `finished_at - received_at`
(accept -> delivered) over the done jobs still stored. It only grows as jobs finish; a purge
of job metadata lowers it, which Prometheus treats as a counter reset (rate() stays right).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from shared.models import JOB_STATUSES, Stats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
IN_FLIGHT = "in_flight"
"""The outcome class of attempts not finished yet (see the stores' attempts_by_outcome)."""


class StatsCollector(Collector):
    """Yields hookline's metric families from one :class:`Stats` snapshot."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        """Metric families: jobs, oldest pending age, attempts, paused, latency, events."""
        st = self.stats
        jobs = GaugeMetricFamily("hookline_jobs", "Jobs by destination and status.",
                                 labels=["destination", "status"])
        for destination, counts in sorted(st.jobs_by_destination.items()):
            for status in JOB_STATUSES:
                jobs.add_metric([destination, status], counts.get(status, 0))
        yield jobs

        total = GaugeMetricFamily("hookline_jobs_total_by_status",
                                  "Jobs by status, all destinations.", labels=["status"])
        for status in JOB_STATUSES:
            total.add_metric([status], st.jobs_by_status.get(status, 0))
        yield total

        yield GaugeMetricFamily(
            "hookline_oldest_pending_age_seconds",
            "Age of the longest-waiting due pending job (0 when none is due).",
            value=st.oldest_pending_age_s or 0.0)

        # Finished attempts only: an attempt's outcome is fixed once it is closed, so these
        # only grow (a purge is a counter reset). Attempts still being sent go down as they
        # finish, so they are a gauge.
        attempts = CounterMetricFamily("hookline_attempts", "Finished attempts, by outcome.",
                                       labels=["outcome"])
        for outcome, n in sorted(st.attempts_by_outcome.items()):
            if outcome != IN_FLIGHT:
                attempts.add_metric([outcome], n)
        yield attempts
        yield GaugeMetricFamily("hookline_attempts_in_flight",
                                "Attempts started and not yet finished.",
                                value=st.attempts_by_outcome.get(IN_FLIGHT, 0))

        yield GaugeMetricFamily("hookline_destinations_paused",
                                "Live destinations currently paused.",
                                value=len(st.paused_destinations))
        paused = GaugeMetricFamily("hookline_destination_paused",
                                   "1 for each paused destination.",
                                   labels=["destination"])
        for name in sorted(st.paused_destinations):
            paused.add_metric([name], 1)
        yield paused

        yield GaugeMetricFamily("hookline_events_stored", "Events stored.", value=st.events)
        if st.wal_bytes is not None:  # SQLite only: PostgreSQL's WAL is the server's
            yield GaugeMetricFamily("hookline_sqlite_wal_bytes",
                                    "Size of the SQLite -wal file now, bytes.",
                                    value=st.wal_bytes)

        latency = st.delivery_latency
        if latency is not None:
            histogram = HistogramMetricFamily(
                "hookline_delivery_latency_seconds",
                "Accept -> delivered time of done jobs still stored.")
            buckets = [(f"{bound:g}", n) for bound, n in latency.buckets]
            buckets.append(("+Inf", latency.count))
            histogram.add_metric([], buckets, sum_value=latency.sum_s)
            yield histogram


def render(stats: Stats) -> bytes:
    """Prometheus text exposition of one stats snapshot."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsCollector(stats))
    return generate_latest(registry)

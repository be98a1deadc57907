"""Counts and figures computed over the stored rows: `hookline stats`, /metrics, the
dashboard's destination table and its throughput buckets.

Times named `*_s` or `*_at` are unix seconds (float) unless a docstring says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hookline.shared.models import DEFAULT_TENANT


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """Counts for `hookline stats` and /metrics."""

    jobs_by_status: dict[str, int] = field(default_factory=dict)
    events: int = 0
    attempts: int = 0
    oldest_pending_age_s: float | None = None
    # Operator views and /metrics: per-destination job counts (removed
    # destinations appear as `name~removed-ID`) and paused destinations with their reason,
    # both of `tenant`'s destinations only; attempts by outcome class, and accept ->
    # delivered latency of every delivery (the maintained figures: what retention purged
    # included).
    tenant: str = DEFAULT_TENANT
    paused_count: int = 0
    """Paused live destinations of every tenant (`paused_destinations` lists `tenant`'s)."""
    jobs_by_destination: dict[str, dict[str, int]] = field(default_factory=dict)
    paused_destinations: dict[str, str | None] = field(default_factory=dict)
    attempts_by_outcome: dict[str, int] = field(default_factory=dict)
    delivery_latency: LatencyHistogram | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationFigures:
    """One destination's /metrics figures, read from the maintained counts
    (shared/store/metric_deltas.py), or the sum of those /metrics folds into `_other`.

    Attributes:
        name: the destination (`_other` for the fold).
        paused: whether it is paused (`_other`: any folded one is).
        paused_reason: why (an operator's text, or the circuit breaker's); None when running.
        failure_streak: consecutive failed attempts since its last 2xx (`_other`: the longest).
        oldest_due_age_s: age of its longest-waiting due pending job, seconds (None: none due).
        jobs: jobs by status (statuses with none left out).
        attempts: finished attempts by outcome class, what retention purged included.
        in_flight: attempts started and not finished.
        latency: accept -> delivered latency of each delivery (None: none yet).
        folded: how many live destinations these figures add up (1 for one destination).
        filtered: events it subscribes to that its payload filter turned away (a counter).
    """

    name: str
    paused: bool = False
    paused_reason: str | None = None
    failure_streak: int = 0
    oldest_due_age_s: float | None = None
    jobs: dict[str, int] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    latency: LatencyHistogram | None = None
    folded: int = 1
    filtered: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class GaugeCorrection:
    """One maintained gauge that the repair path (:meth:`Store.recount_metrics`) found
    different from what the rows say, and set right.

    Attributes:
        family: `jobs` (by status), `attempts` (label `in_flight`), `oldest` (the oldest
            pending job's run_at, unix seconds) or `events` (stored).
        destination: the destination's name (a removed one's is `name~removed-ID`); None
            for the totals over every destination (and for `events`).
        label: the job status, `in_flight`, or "" (oldest, events).
        before: the maintained value (None: no pending job / no row).
        after: the value counted from the rows (None: no pending job).
    """

    family: str
    destination: str | None
    label: str
    before: float | None
    after: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricFigures:
    """What /metrics shows from the database.

    Attributes:
        destinations: the destinations shown with series of their own.
        other: the sum of every other live destination, and of the jobs removed
            destinations left (None: nothing to fold).
        events: events stored.
        notifications: operational events made, by kind (`destination.failing`, ...).
        in_flight: attempts started and not finished, over every destination.
        oldest_due_age_s: age of the longest-waiting due pending job, seconds (None: none).
    """

    destinations: tuple[DestinationFigures, ...] = ()
    other: DestinationFigures | None = None
    events: int = 0
    notifications: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    oldest_due_age_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyHistogram:
    """Accept -> delivered latency (job finished_at - event received_at, seconds) of every
    delivery (each time a job became done; what retention purged included), as a cumulative
    histogram.

    Attributes:
        buckets: (upper bound in seconds, jobs at or below it), ascending; +Inf not included.
        count: number of done jobs.
        sum_s: total latency, seconds.
    """

    buckets: tuple[tuple[float, int], ...]
    count: int
    sum_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationSummary:
    """One live destination as the dashboard's table shows it.

    Attributes:
        tenant: the tenant it belongs to (names are unique within a tenant only).
        name, paused, paused_reason, failure_streak, failing_since, max_in_flight: as on
            :class:`Destination` (`paused_reason` also tells an auto-pause by the breaker).
        in_flight: jobs running under an unexpired lease now.
        pending: jobs waiting (due or scheduled for a retry).
        dead: dead jobs still stored (replayable unless their body was purged).
        oldest_pending_at: `run_at` (unix seconds) of its longest-waiting due pending job,
            or None when none is due.
        latency_samples: completed attempts the percentiles were taken over.
        delivered_samples: how many of those got a 2xx (the success rate is
            `delivered_samples / latency_samples`).
        p50_s, p99_s: nearest-rank percentiles of those attempts' durations (request sent to
            response read, or to the transport error), seconds; None without samples.
    """

    name: str
    paused: bool
    paused_reason: str | None
    failure_streak: int
    failing_since: float | None
    max_in_flight: int
    in_flight: int
    pending: int
    dead: int
    oldest_pending_at: float | None
    latency_samples: int = 0
    delivered_samples: int = 0
    p50_s: float | None = None
    p99_s: float | None = None
    tenant: str = DEFAULT_TENANT

    @classmethod
    def from_rows(cls, row: Any, latency: Any | None) -> DestinationSummary:
        """Build from a `destination_summaries` row and its `destination_latency` row (None
        when the destination has no recent completed attempt)."""
        return cls(
            name=row["name"], paused=bool(row["paused"]), paused_reason=row["paused_reason"],
            failure_streak=int(row["failure_streak"] or 0), failing_since=row["failing_since"],
            max_in_flight=row["max_in_flight"], in_flight=int(row["in_flight"]),
            pending=int(row["pending"]), dead=int(row["dead"]),
            oldest_pending_at=row["oldest_pending_at"],
            latency_samples=0 if latency is None else int(latency["samples"]),
            delivered_samples=0 if latency is None else int(latency["delivered_samples"] or 0),
            p50_s=None if latency is None else latency["p50_s"],
            p99_s=None if latency is None else latency["p99_s"], tenant=row["tenant_id"])


@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputBucket:
    """Counts of one time bucket `[start_s, start_s + bucket_s)` (unix seconds).

    Attributes:
        start_s: the bucket's first instant, a multiple of the bucket length.
        events: events accepted (by `received_at`).
        delivered: jobs that ended done (by `finished_at`).
        dead: jobs that ended dead (by `finished_at`).
        failed: attempts that did not deliver (HTTP status other than 2xx, or a transport
            error) by `started_at`; a lost worker or a hand-back is no delivery failure.
            None when the bucket lies (even partly) before the newest attempt rows the
            count scans (see :meth:`hookline.shared.store.Store.throughput`).
    """

    start_s: float
    events: int = 0
    delivered: int = 0
    dead: int = 0
    failed: int | None = 0


def fill_buckets(counts: dict[int, dict[str, int]], *, first: int, last: int,
                 bucket_s: int) -> list[ThroughputBucket]:
    """Zero-filled buckets from bucket number `first` to `last` inclusive.

    Args:
        counts: bucket number (`floor(t / bucket_s)`) -> {"events"|"delivered"|"dead"|
            "failed": n};
            numbers outside [first, last] are ignored.
        first, last: bucket numbers of the oldest and the newest bucket.
        bucket_s: bucket length, seconds.

    Returns:
        One :class:`ThroughputBucket` per number, oldest first.
    """
    return [ThroughputBucket(start_s=float(n * bucket_s), **counts.get(n, {}))
            for n in range(first, last + 1)]

"""The transactions that read the maintained figures (shared/store/metric_deltas.py): what a
/metrics scrape shows, every destination's figures for the admin API, the operator's stats,
and the repair that counts the gauges again from the rows. Each is a generator of
:mod:`hookline.shared.store.ops` operations, driven by a backend."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hookline.shared.models import DEFAULT_TENANT, JOB_STATUSES
from hookline.shared.policy.rules import REMOVED_MARK
from hookline.shared.report_models import (
    DestinationFigures,
    GaugeCorrection,
    LatencyHistogram,
    MetricFigures,
    Stats,
)
from hookline.shared.store.metric_deltas import (
    IN_FLIGHT,
    INF_LABEL,
    LATENCY_BUCKETS_S,
    TOTALS,
    bound_label,
)
from hookline.shared.store.ops import BEGIN_WRITE, NOW, Tx, count, one, rows

OTHER = "_other"
"""The destination label /metrics adds up every destination not shown alone under."""
TENANT_MARK = REMOVED_MARK
"""Between a tenant and a destination name in a series name (see :func:`series_name`)."""
RECOUNT_QUERIES = ("recount_jobs", "recount_in_flight", "recount_oldest", "recount_events")


class Tally:
    """One destination's (or the totals') metric_counts rows, by family."""

    __slots__ = ("attempts", "events", "filtered", "jobs", "latency", "notifications")

    def __init__(self) -> None:
        self.jobs: dict[str, int] = {}
        self.attempts: dict[str, int] = {}
        self.latency: dict[str, tuple[int, float]] = {}
        self.events = 0
        self.filtered = 0
        self.notifications: dict[str, int] = {}

    def add(self, family: str, label: str, n: int, total_s: float | None) -> None:
        """Add one metric_counts row."""
        if family == "jobs":
            self.jobs[label] = self.jobs.get(label, 0) + n
        elif family == "attempts":
            self.attempts[label] = self.attempts.get(label, 0) + n
        elif family == "latency":
            count_, total = self.latency.get(label, (0, 0.0))
            self.latency[label] = (count_ + n, total + float(total_s or 0.0))
        elif family == "events":
            self.events += n
        elif family == "filtered":
            self.filtered += n
        elif family == "notifications":
            self.notifications[label] = self.notifications.get(label, 0) + n

    def subtract(self, other: Tally) -> None:
        """Take another tally's figures away (totals minus those shown: the fold)."""
        for status, n in other.jobs.items():
            self.jobs[status] = self.jobs.get(status, 0) - n
        for outcome, n in other.attempts.items():
            self.attempts[outcome] = self.attempts.get(outcome, 0) - n
        for label, (n, total_s) in other.latency.items():
            count_, total = self.latency.get(label, (0, 0.0))
            self.latency[label] = (count_ - n, total - total_s)
        self.filtered -= other.filtered

    def histogram(self) -> LatencyHistogram | None:
        """The latency rows as a cumulative histogram (None: no delivery)."""
        if not any(n for n, _ in self.latency.values()):
            return None
        buckets, running = [], 0
        for bound in LATENCY_BUCKETS_S:
            running += self.latency.get(bound_label(bound), (0, 0.0))[0]
            buckets.append((bound, running))
        total = running + self.latency.get(INF_LABEL, (0, 0.0))[0]
        return LatencyHistogram(buckets=tuple(buckets), count=total,
                                sum_s=sum(t for _, t in self.latency.values()))

    def figures(self, name: str, **state: Any) -> DestinationFigures:
        """These figures as a DestinationFigures named `name` (`state`: pause state etc.)."""
        return DestinationFigures(
            name=name, jobs={k: n for k, n in self.jobs.items() if n},
            attempts={k: n for k, n in self.attempts.items() if n and k != IN_FLIGHT},
            in_flight=self.attempts.get(IN_FLIGHT, 0), latency=self.histogram(),
            filtered=self.filtered, **state)


def _due_age(oldest: float | None, now: float) -> float | None:
    """Age of a pending job due since `oldest`, seconds (None: none, or not due yet)."""
    return None if oldest is None or oldest > now else now - oldest


def _state(row: Any, now: float) -> dict[str, Any]:
    """A destination row's pause state, failure run and oldest due job's age."""
    return {"paused": bool(row["paused"]), "paused_reason": row["paused_reason"],
            "failure_streak": int(row["failure_streak"] or 0),
            "oldest_due_age_s": _due_age(row["oldest"], now)}


def series_name(row: Any) -> str:
    """The name /metrics labels a destination with (`destination="..."`): its own for the
    default tenant's, TENANT~NAME for another tenant's, since names are unique only within a
    tenant and two series may not share their labels; and `_default~_other` for a default
    tenant's destination named `_other`, the fold's own label. `~` is in no destination name
    nor tenant id, so no two destinations (nor one and the fold) get the same label (metrics
    carry no tenant label of their own: see ingest/metrics.py)."""
    tenant, name = row["tenant_id"], row["name"]
    if tenant == DEFAULT_TENANT and name != OTHER:
        return str(name)
    return f"{tenant}{TENANT_MARK}{name}"


def _tallies(found: Iterable[Any]) -> dict[int, Tally]:
    out: dict[int, Tally] = {}
    for r in found:
        out.setdefault(r["destination_id"], Tally()).add(
            r["family"], r["label"], int(r["n"]), r["total_s"])
    return out


def shown_figures_tx(series_max: int) -> Tx[MetricFigures]:
    """What one /metrics scrape shows: the figures of at most `series_max` live destinations
    (paused first, then the longest failure run, then the longest-waiting due job, then the
    largest backlog: the `destination_ranking` query orders and limits them) and one fold of the
    rest (the totals minus those shown, and the rest's state summed up in SQL). Reads
    `series_max` short rows, one aggregate row and the counts of those shown; no job row."""
    now = yield NOW
    shown = list((yield rows("destination_ranking", limit=series_max))) if series_max else []
    fold = yield one("destination_fold", shown_ids=[r["id"] for r in shown])
    tallies = _tallies((yield rows("metric_counts_of",
                                   destination_ids=[TOTALS, *(r["id"] for r in shown)])))
    totals = tallies.pop(TOTALS, Tally())
    figures = []
    left = Tally()
    for family, found in (("jobs", totals.jobs), ("attempts", totals.attempts)):
        for label, n in found.items():
            left.add(family, label, n, None)
    for label, (n, total_s) in totals.latency.items():
        left.add("latency", label, n, total_s)
    left.filtered = totals.filtered
    for r in sorted(shown, key=series_name):
        tally = tallies.get(r["id"], Tally())
        left.subtract(tally)
        figures.append(tally.figures(series_name(r), **_state(r, now)))
    other = None
    folded = int(fold["folded"] or 0) if fold is not None else 0
    if folded or any(left.jobs.values()):
        oldest_due = None if fold is None else fold["oldest_due"]
        other = left.figures(
            OTHER, paused=bool(fold is not None and fold["paused"]),
            failure_streak=int(fold["failure_streak"] or 0) if fold is not None else 0,
            oldest_due_age_s=None if oldest_due is None else now - oldest_due, folded=folded)
    oldest_all = None if fold is None else fold["oldest_due_all"]
    return MetricFigures(destinations=tuple(figures), other=other, events=totals.events,
                         notifications=dict(sorted(totals.notifications.items())),
                         in_flight=totals.attempts.get(IN_FLIGHT, 0),
                         oldest_due_age_s=None if oldest_all is None else now - oldest_all)


def destination_page_tx(after_id: int, limit: int
                        ) -> Tx[tuple[list[DestinationFigures], int | None]]:
    """Up to `limit` live destinations' figures after id `after_id`, by id, and the id to
    ask after for the next page (None: this was the last)."""
    now = yield NOW
    page = list((yield rows("destination_page", after_id=after_id, limit=limit + 1)))
    more = len(page) > limit
    page = page[:limit]
    tallies = _tallies((yield rows("metric_counts_of",
                                   destination_ids=[r["id"] for r in page]))) if page else {}
    figures = [tallies.get(r["id"], Tally()).figures(series_name(r), **_state(r, now))
               for r in page]
    return figures, (int(page[-1]["id"]) if more else None)


def stats_tx(tenant: str) -> Tx[Stats]:
    """The operator's counts, from the maintained figures (plus a count of attempt rows); the
    per-destination ones of `tenant`'s destinations (names are unique within a tenant)."""
    now = yield NOW
    totals = _tallies((yield rows("metric_counts_of", destination_ids=[TOTALS]))).get(
        TOTALS, Tally())
    per_destination: dict[str, dict[str, int]] = {}
    for r in (yield rows("jobs_counts_by_destination", tenant=tenant)):
        per_destination.setdefault(r["destination"], {})[r["status"]] = int(r["n"])
    oldest_all = (yield one("destination_fold", shown_ids=[]))["oldest_due_all"]
    by_status: dict[str, int] = {s: 0 for s in JOB_STATUSES}
    by_status.update({k: n for k, n in totals.jobs.items() if n})
    return Stats(
        jobs_by_status=by_status, events=totals.events,
        attempts=(yield one("count_attempts"))["n"],
        oldest_pending_age_s=None if oldest_all is None else now - oldest_all,
        paused_count=int((yield one("count_paused_destinations"))["n"]),
        tenant=tenant, jobs_by_destination=per_destination,
        paused_destinations={r["name"]: r["paused_reason"]
                             for r in (yield rows("paused_destinations", tenant=tenant))},
        attempts_by_outcome={k: n for k, n in totals.attempts.items() if n},
        delivery_latency=totals.histogram() or LatencyHistogram(
            buckets=tuple((b, 0) for b in LATENCY_BUCKETS_S), count=0, sum_s=0.0))


def fold_tx() -> Tx[int]:
    """Move the appended metric deltas into metric_counts; returns how many there were (no
    row back: there were none, and nothing was written)."""
    found = yield one("fold_metric_deltas")
    return int(found["folded"] or 0) if found is not None else 0


def recount_tx() -> Tx[list[GaugeCorrection]]:
    """The repair path: the gauges (jobs by status, attempts in flight, each destination's
    oldest pending job, events stored) counted again from the rows; returns each gauge whose
    maintained value differed. The counters (finished attempts, deliveries) include what
    retention purged and stay as they are."""
    yield BEGIN_WRITE
    yield one("fold_metric_deltas")
    before = _gauges((yield rows("metric_gauges")))
    yield count("recount_metric_gauges")
    for name in RECOUNT_QUERIES:
        yield count(name)
    after = _gauges((yield rows("metric_gauges")))
    names = {**before.names, **after.names}
    return [GaugeCorrection(family=key[0], destination=names.get(key[1]), label=key[2],
                            before=before.get(key), after=after.get(key))
            for key in sorted(before.keys() | after.keys(), key=_gauge_order)
            if before.get(key) != after.get(key)]


class _Gauges(dict[tuple[str, int, str], float | None]):
    """Gauge rows by (family, destination id, label), with the destinations' names.
    A missing count is 0 and a missing oldest is None, so neither differs from no row."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[int, str] = {}


def _gauges(found: Iterable[Any]) -> _Gauges:
    gauges = _Gauges()
    for r in found:
        key = (r["family"], int(r["destination_id"]), r["label"])
        value = r["total_s"] if r["family"] == "oldest" else int(r["n"])
        if value:  # 0 counts and NULL oldest are the same as no row
            gauges[key] = value
        if r["destination"] is not None and r["destination_id"] != TOTALS:
            gauges.names[int(r["destination_id"])] = r["destination"]
    return gauges


def _gauge_order(key: tuple[str, int, str]) -> tuple[int, int, str]:
    """Totals first, then by destination id; within each, by family and label."""
    family, destination_id, label = key
    return destination_id, ["events", "jobs", "attempts", "oldest"].index(family), label

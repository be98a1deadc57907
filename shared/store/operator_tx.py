"""The operator's and the dashboard's store transactions (see :mod:`hookline.shared.store.logic`):
destination controls, replay, retention, and the read-only views. Each is a generator of
:mod:`hookline.shared.store.ops` operations, driven by a backend."""

from __future__ import annotations

import dataclasses
from typing import Any

from hookline.shared.errors import Conflict, InvalidSetting, NotFound
from hookline.shared.models import JOB_STATUSES
from hookline.shared.record_models import DeadLetter, Job, PurgeResult
from hookline.shared.report_models import (
    DestinationHealth,
    DestinationSummary,
    LatencyHistogram,
    MetricFigures,
    Stats,
    ThroughputBucket,
    fill_buckets,
)
from hookline.shared.store.ops import NOTIFY, NOW, Tx, count, one, rows


def set_paused_tx(tenant: str, name: str, paused: bool, reason: str | None) -> Tx[None]:
    changed = yield count("set_paused", tenant=tenant, name=name, paused=bool(paused),
                          reason=reason if paused else None)
    if not changed:
        raise NotFound(f"no destination named {name!r}")
    if not paused:
        yield NOTIFY


def rotate_tx(tenant: str, name: str, new_secret: str, overlap_s: float) -> Tx[Any]:
    """Make `new_secret` (already checked) the secret; the current one signs on for
    `overlap_s` seconds. Returns the destination row."""
    current = yield one("get_destination", tenant=tenant, name=name)
    if current is None:
        raise NotFound(f"no destination named {name!r}")
    if current["secret"] == new_secret:
        raise InvalidSetting("secret", "the new secret equals the current one")
    return (yield one("rotate_secret", tenant=tenant, name=name, secret=new_secret,
                      overlap_s=overlap_s))


def expire_previous_tx(tenant: str, name: str) -> Tx[tuple[Any, bool]]:
    """Forget the previous secret now: later claims sign with the current one only. Returns
    the destination row and whether a previous secret was still signing."""
    now = yield NOW
    current = yield one("get_destination", tenant=tenant, name=name)
    if current is None:
        raise NotFound(f"no destination named {name!r}")
    was_signing = bool(current["previous_secret"]) and (
        current["previous_secret_until"] or 0) > now
    return (yield one("expire_previous_secret", tenant=tenant, name=name)), was_signing


def remove_destination_tx(tenant: str, name: str) -> Tx[int]:
    row = yield one("remove_destination", tenant=tenant, name=name)
    if row is None:
        raise NotFound(f"no destination named {name!r}")
    return int((yield count("kill_jobs_of_destination", destination_id=row["id"])))


def replay_tx(job_id: int | None, destination: str | None, since: float | None,
               dry_run: bool) -> Tx[int]:
    if job_id is not None:
        check_replayable(job_id, (yield one("replay_job_state", job_id=job_id)))
    ids = [r["id"] for r in (yield rows("replay_candidates", job_id=job_id,
                                        destination=destination, since=since))]
    if dry_run or not ids:
        return len(ids)
    replayed = int((yield count("replay_job", job_ids=ids)))
    if replayed:
        yield NOTIFY
    return replayed


BODY_PURGED = "body purged"
DESTINATION_REMOVED = "destination removed"


def not_replayable_reason(body_purged_at: float | None,
                          destination_deleted_at: float | None) -> str | None:
    """Why a dead job cannot be replayed (BODY_PURGED, DESTINATION_REMOVED), or None."""
    if body_purged_at is not None:
        return BODY_PURGED
    if destination_deleted_at is not None:
        return DESTINATION_REMOVED
    return None


def check_replayable(job_id: int, row: Any) -> None:
    """Raise NotFound or Conflict when one job cannot be replayed (see Store.replay)."""
    if row is None:
        raise NotFound(f"no job with id {job_id}")
    if row["status"] != "dead":
        raise Conflict(f"job {job_id} is {row['status']}, not dead; only dead jobs are replayed")
    reason = not_replayable_reason(row["body_purged_at"], row["deleted_at"])
    if reason == BODY_PURGED:
        raise Conflict(f"job {job_id} cannot be replayed: its event body was purged by "
                       "retention")
    if reason == DESTINATION_REMOVED:
        raise Conflict(f"job {job_id} cannot be replayed: its destination was removed")


def list_dead_tx(destination: str | None, since: float | None,
                 limit: int) -> Tx[list[DeadLetter]]:
    found = yield rows("list_dead", destination=destination, since=since, limit=limit)
    return [DeadLetter(job=Job.from_row(r), not_replayable_reason=not_replayable_reason(
        r["body_purged_at"], r["destination_deleted_at"])) for r in found]


def purge_tx(bodies_before_s: float, metadata_before_s: float, dedupe_before_s: float,
             dead_before_s: float) -> Tx[PurgeResult]:
    bodies = yield count("purge_bodies", before=bodies_before_s)
    # What is deleted is first added to the purged_* totals, so /metrics never goes down.
    yield count("fold_purged_attempts", before=metadata_before_s, dead_before=dead_before_s)
    attempts = yield count("purge_attempts", before=metadata_before_s,
                           dead_before=dead_before_s)
    yield count("fold_purged_latency", before=metadata_before_s)
    jobs = yield count("purge_jobs", before=metadata_before_s, dead_before=dead_before_s)
    events = yield count("purge_events", before=dedupe_before_s)
    return PurgeResult(bodies=bodies, attempts=attempts, jobs=jobs, events=events)


def get_job_tx(job_id: int, tenant: str | None = None) -> Tx[tuple[Any, list[Any]]]:
    """The job row (of `tenant`'s destinations only, unless None) and its attempts."""
    row = yield (one("get_job", job_id=job_id) if tenant is None
                 else one("tenant_get_job", job_id=job_id, tenant=tenant))
    if row is None:
        return None, []
    attempts = yield rows("list_attempts", job_id=job_id, limit=10_000)
    return row, attempts


def stats_tx() -> Tx[Stats]:
    now = yield NOW
    by_status: dict[str, int] = {s: 0 for s in JOB_STATUSES}
    by_status.update({r["status"]: r["n"] for r in (yield rows("jobs_by_status"))})
    oldest = (yield one("oldest_pending"))["oldest"]
    per_destination: dict[str, dict[str, int]] = {}
    for r in (yield rows("jobs_by_destination_status")):
        per_destination.setdefault(r["destination"], {})[r["status"]] = r["n"]
    return Stats(
        jobs_by_status=by_status,
        events=(yield one("count_events"))["n"],
        attempts=(yield one("count_attempts"))["n"],
        oldest_pending_age_s=None if oldest is None else now - oldest,
        jobs_by_destination=per_destination,
        paused_destinations={r["name"]: r["paused_reason"]
                             for r in (yield rows("paused_destinations"))},
        attempts_by_outcome={r["outcome"]: r["n"] for r in (yield rows("attempts_by_outcome"))},
        delivery_latency=latency((yield one("delivery_latency"))),
    )


def metric_figures_tx() -> Tx[MetricFigures]:
    attempts_by_destination: dict[str, dict[str, int]] = {}
    for r in (yield rows("attempts_by_destination_outcome")):
        attempts_by_destination.setdefault(r["destination"], {})[r["outcome"]] = int(r["n"])
    return MetricFigures(
        attempts_by_destination=attempts_by_destination,
        latency_by_destination={r["destination"]: latency(r)
                                for r in (yield rows("latency_by_destination"))},
        destination_health=tuple(
            DestinationHealth(name=r["name"], paused=bool(r["paused"]),
                              paused_reason=r["paused_reason"],
                              failure_streak=int(r["failure_streak"] or 0))
            for r in (yield rows("destination_health"))))


def summaries_tx(window_s: float, scan_limit: int) -> Tx[list[DestinationSummary]]:
    now = yield NOW
    found = yield rows("destination_summaries")
    latency = {r["destination_id"]: r for r in (yield rows(
        "destination_latency", since=float(now - window_s), scan_limit=scan_limit))}
    return [DestinationSummary.from_rows(r, latency.get(r["id"])) for r in found]


def throughput_tx(window_s: float, bucket_s: int, failed_scan_limit: int
                  ) -> Tx[list[ThroughputBucket]]:
    now = yield NOW
    first = int((now - window_s) // bucket_s)
    params = {"since": float(first * bucket_s), "bucket_s": float(bucket_s)}
    counts: dict[int, dict[str, int]] = {}
    for r in (yield rows("events_per_bucket", **params)):
        counts.setdefault(r["bucket"], {})["events"] = r["n"]
    for r in (yield rows("finished_per_bucket", **params)):
        key = "delivered" if r["status"] == "done" else "dead"
        counts.setdefault(r["bucket"], {})[key] = r["n"]
    # Failed attempts: only the newest `failed_scan_limit` attempt rows (a primary-key
    # range, so a poll costs the same however large the table grows).
    ids = yield one("attempt_id_range")
    after_id, counted_from = 0, None
    if ids["top"] is not None and ids["top"] - failed_scan_limit >= ids["bottom"]:
        after_id = int(ids["top"]) - failed_scan_limit
        counted_from = (yield one("first_attempt_after", after_id=after_id))["started_at"]
    for r in (yield rows("failed_attempts_per_bucket", after_id=after_id, **params)):
        counts.setdefault(r["bucket"], {})["failed"] = r["n"]
    buckets = fill_buckets(counts, first=first, last=int(now // bucket_s), bucket_s=bucket_s)
    if counted_from is None:
        return buckets
    # A bucket starting before the oldest scanned attempt may miss failures: not counted.
    return [b if b.start_s >= counted_from else dataclasses.replace(b, failed=None)
            for b in buckets]


LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400)


def latency(row: Any) -> LatencyHistogram:
    """The `delivery_latency` row as a histogram (columns le_<bound with _ for .>)."""
    def column(bound: float) -> str:
        return "le_" + (f"{bound:g}").replace(".", "_")

    return LatencyHistogram(
        buckets=tuple((float(b), int(row[column(b)] or 0)) for b in LATENCY_BUCKETS_S),
        count=int(row["n"] or 0), sum_s=float(row["total"] or 0))

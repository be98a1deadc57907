"""The operator's and the dashboard's store transactions (see :mod:`hookline.shared.store.logic`):
destination controls, replay, retention, and the read-only views. Each is a generator of
:mod:`hookline.shared.store.ops` operations, driven by a backend."""

from __future__ import annotations

import dataclasses
from typing import Any

from hookline.shared.errors import Conflict, DestinationMissing, InvalidSetting, NotFound
from hookline.shared.operator_models import BULK_MAX_LIMIT, JobSelection
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.record_models import DeadLetter, Job, PurgeResult
from hookline.shared.report_models import DestinationSummary, ThroughputBucket, fill_buckets
from hookline.shared.store import notify_tx
from hookline.shared.store.events_tx import retry_now_tx
from hookline.shared.store.metric_deltas import IN_FLIGHT, MetricDeltas
from hookline.shared.store.ops import GIVE_WAY, NOTIFY, NOW, WRITES_JOBS, Tx, count, one, rows


def set_paused_tx(tenant: str, name: str, paused: bool, reason: str | None,
                  notify: NotifyPolicy) -> Tx[tuple[int, bool]]:
    """Pause (with a reason) or resume a destination; pausing a running one announces it
    (hookline.destination.paused, reason manual). A resume also brings every pending job
    of the destination waiting for a later retry forward to now, as retry now does (an
    operator resumes once the receiver is fixed: its retries should not wait out their
    backoff). Returns how many jobs were brought forward (0 for a pause) and whether more may
    wait (:func:`bring_forward_tx`). Raises NotFound."""
    if paused:
        row = yield one("pause_running", tenant=tenant, name=name, reason=reason)
        if row is not None:
            yield from notify_tx.paused_tx(notify, row, reason)
            return 0, False
    changed = yield count("set_paused", tenant=tenant, name=name, paused=bool(paused),
                          reason=reason if paused else None)
    if not changed:
        raise DestinationMissing(name, tenant)
    if paused:
        return 0, False
    brought_forward, more = yield from bring_forward_tx(tenant, name)
    yield NOTIFY
    return brought_forward, more


def bring_forward_tx(tenant: str, name: str) -> Tx[tuple[int, bool]]:
    """Up to retry now's largest selection of tenant `tenant`'s live destination `name`'s
    pending jobs not yet due become due now (attempt counts kept; jobs already due keep
    their place); which of them is sent first, and how many at once, is still the claim's
    (ordered, max_in_flight). Returns (how many, whether more may wait): the caller brings
    the rest forward in transactions of their own, so no one holds the write lock for a
    whole backlog."""
    selection = JobSelection(destination=name, tenant=tenant, limit=BULK_MAX_LIMIT)
    batch = yield from retry_now_tx(selection.check(resend=False), dry_run=False)
    # count 0 with more: nothing changed (raced away), so nothing will next time either.
    return batch.count, batch.more and batch.count > 0


def rotate_tx(tenant: str, name: str, new_secret: str, overlap_s: float,
              notify: NotifyPolicy) -> Tx[Any]:
    """Make `new_secret` (already checked) the secret; the current one signs on for
    `overlap_s` seconds; announce it (hookline.destination.secret_rotated). Returns the
    destination row."""
    current = yield one("get_destination", tenant=tenant, name=name)
    if current is None:
        raise DestinationMissing(name, tenant)
    if current["secret"] == new_secret:
        raise InvalidSetting("secret", "the new secret equals the current one")
    row = yield one("rotate_secret", tenant=tenant, name=name, secret=new_secret,
                    overlap_s=overlap_s)
    yield from notify_tx.rotated_tx(notify, row, overlap_s)
    return row


def expire_previous_tx(tenant: str, name: str) -> Tx[tuple[Any, bool]]:
    """Forget the previous secret now: later claims sign with the current one only. Returns
    the destination row and whether a previous secret was still signing."""
    now = yield NOW
    current = yield one("get_destination", tenant=tenant, name=name)
    if current is None:
        raise DestinationMissing(name, tenant)
    until = current["previous_secret_until"]
    # A value that is not a number (a hand edit; the claim pauses such a destination) signs
    # nothing: expiring it is how it is fixed (OPERATIONS.md, "Destination URLs").
    was_signing = (bool(current["previous_secret"]) and isinstance(until, int | float)
                   and until > now)
    return (yield one("expire_previous_secret", tenant=tenant, name=name)), was_signing


def remove_destination_tx(tenant: str, name: str) -> Tx[int]:
    yield GIVE_WAY  # brief waits only, and none for a job row (unfinished_jobs_of_destination)
    row = yield one("remove_destination", tenant=tenant, name=name)
    if row is None:
        raise DestinationMissing(name, tenant)
    return (yield from kill_jobs_of_destination_tx(row["id"]))


def kill_jobs_of_destination_tx(destination_id: int) -> Tx[int]:
    """A removed destination's unfinished jobs end dead (the maintained figures follow).
    Returns how many."""
    status_of = {r["id"]: r["status"] for r in (yield rows(
        "unfinished_jobs_of_destination", destination_id=destination_id))}
    killed = yield rows("kill_jobs_of_destination", destination_id=destination_id)
    deltas = MetricDeltas()
    for r in killed:
        deltas.jobs(destination_id, status_of.get(r["id"], "pending"), "dead")
    yield from deltas.apply()
    return len(killed)


def replay_tx(job_id: int | None, destination: str | None, since: float | None,
               dry_run: bool, tenant: str | None = None) -> Tx[int]:
    if job_id is not None:
        check_replayable(job_id, (yield one("replay_job_state", job_id=job_id)))
    destination_of = {r["id"]: r["destination_id"] for r in (yield rows(
        "replay_candidates", job_id=job_id, destination=destination, tenant=tenant,
        since=since))}
    if dry_run or not destination_of:
        return len(destination_of)
    yield WRITES_JOBS  # replay_job gives each its destination's `ordered` now
    replayed = yield rows("replay_job", job_ids=list(destination_of))
    deltas = MetricDeltas()
    for r in replayed:
        deltas.jobs(destination_of[r["id"]], "dead", "pending")
    yield from deltas.apply()
    if replayed:
        yield NOTIFY
    return len(replayed)


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


def list_dead_tx(destination: str | None, since: float | None, limit: int,
                 tenant: str | None = None, before_id: int | None = None
                 ) -> Tx[list[DeadLetter]]:
    """Dead letters, most recently dead first; with `before_id` (the last row of the page
    before) only those after it in that order. Raises NotFound: `before_id` is no dead
    job."""
    before_at = None
    if before_id is not None:
        position = yield one("dead_letter_position", job_id=before_id)
        if position is None:  # paging on from it would silently start over or end early
            raise NotFound(f"job {before_id} is not a dead letter (replayed or purged since "
                           "its page was listed?); list again from the first page")
        before_at = float(position["finished_at"])
    found = yield rows("list_dead", destination=destination, tenant=tenant, since=since,
                       before_at=before_at, before_id=before_id, limit=limit)
    return [DeadLetter(job=Job.from_row(r), not_replayable_reason=not_replayable_reason(
        r["body_purged_at"], r["destination_deleted_at"])) for r in found]


def purge_tx(bodies_before_s: float, metadata_before_s: float, dedupe_before_s: float,
             dead_before_s: float) -> Tx[PurgeResult]:
    bodies = yield count("purge_bodies", before=bodies_before_s)
    cutoffs = {"before": metadata_before_s, "dead_before": dead_before_s}
    # The maintained figures lose the deleted jobs and any attempt still open, but keep the
    # finished attempts and deliveries: those counters never go down.
    deltas = MetricDeltas()
    for r in (yield rows("open_attempts_to_purge", **cutoffs)):
        deltas.attempts(r["destination_id"], IN_FLIGHT, None, int(r["n"]))
    attempts = yield count("purge_attempts", **cutoffs)
    for r in (yield rows("jobs_to_purge", **cutoffs)):
        deltas.jobs(r["destination_id"], r["status"], None, int(r["n"]))
    jobs = yield count("purge_jobs", **cutoffs)
    events = yield count("purge_events", before=dedupe_before_s)
    deltas.events(-events)
    yield from deltas.apply()
    secrets = yield count("forget_previous_secrets", now=(yield NOW))
    return PurgeResult(bodies=bodies, attempts=attempts, jobs=jobs, events=events,
                       previous_secrets=secrets)


def get_job_tx(job_id: int, tenant: str | None = None) -> Tx[tuple[Any, list[Any]]]:
    """The job row (of `tenant`'s destinations only, unless None) and its attempts.

    The attempts are read first: on PostgreSQL each statement sees what was committed when it
    began, and a finish writes the attempt and the job in one transaction, so an attempt
    read as finished is always matched by a job row that shows that finish (read the other
    way round, a test delivery's answer could pair a finished attempt with a job still
    `running`)."""
    attempts = yield rows("list_attempts", job_id=job_id, limit=10_000)
    row = yield (one("get_job", job_id=job_id) if tenant is None
                 else one("tenant_get_job", job_id=job_id, tenant=tenant))
    if row is None:
        return None, []
    return row, attempts


def summaries_tx(window_s: float, scan_limit: int,
                 tenant: str | None) -> Tx[list[DestinationSummary]]:
    now = yield NOW
    found = yield rows("destination_summaries", tenant=tenant)
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

"""The JSON shape of every resource and result, written once for the admin API and the CLI.

The admin API (ingest/admin_api.py, ingest/sources_api.py, ingest/admin_views.py) answers
with these dicts and `hookline ... --json` prints the same dicts, so a script can switch
between the two without changing its parsing. ingest/openapi.json documents each shape in
its components (the schema named beside each function below).

Conventions, the same in every view:
- times are unix seconds (JSON numbers, fractional): fields named `*_at`, `*_until`,
  `*_since` (and a throughput bucket's `start_s`); durations are seconds in the other
  fields named `*_s`; rates are per second in `*_per_s`; sizes are bytes in `*_bytes`;
- absent values are `null`, never omitted (except a secret, which appears in full only in
  the answer that generated it, or in destination_secret_view, to an admin who asked);
- secrets are redacted to a short prefix and `…`; custom header values are never shown.

Every function returns a new plain dict (or list) of JSON types; none raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from hookline.shared.endpoint_models import Destination, Source
from hookline.shared.operator_models import BulkResult, EventJob, EventMatch, EventRecord
from hookline.shared.record_models import (
    HANDED_BACK,
    Attempt,
    DeadLetter,
    Job,
    JobStory,
    PurgeResult,
)
from hookline.shared.report_models import (
    DestinationFigures,
    DestinationSummary,
    GaugeCorrection,
    Stats,
    ThroughputBucket,
)


def _fields(record: Any) -> dict[str, Any]:
    """A slotted frozen dataclass's fields, in declaration order (no deep copy)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def destination_view(dest: Destination, *, generated_secret: str | None = None) -> dict[str, Any]:
    """A destination (schema `Destination`): secret redacted, header values hidden.

    Args:
        dest: the stored destination.
        generated_secret: the whole secret when this answer created it (shown once).
    """
    out = dest.redacted()
    if generated_secret is not None:
        out["secret"] = generated_secret
    return out


def destination_removed_view(name: str, jobs_ended: int) -> dict[str, Any]:
    """The answer to removing a destination (schema `DestinationRemoved`)."""
    return {"removed": name, "jobs_ended": jobs_ended}


def paused_view(name: str, reason: str) -> dict[str, Any]:
    """The answer to pausing a destination (schema `Paused`)."""
    return {"paused": name, "reason": reason}


def resumed_view(name: str, brought_forward: int) -> dict[str, Any]:
    """The answer to resuming a destination (schema `Resumed`): `brought_forward` of its
    pending jobs waiting for a later retry became due now."""
    return {"resumed": name, "brought_forward": brought_forward}


def destination_secret_view(dest: Destination) -> dict[str, Any]:
    """A destination's signing secret, shown whole to an admin who asked for it (a reveal or
    a rotation; schema `DestinationSecret`): `secret` is the current one; `previous_secret`
    (redacted like in the destination, or None) still signs until `previous_secret_until`
    (unix seconds, or None)."""
    return {"name": dest.name, "secret": dest.secret,
            "previous_secret": dest.redacted()["previous_secret"],
            "previous_secret_until": dest.previous_secret_until}


def previous_secret_expired_view(dest: Destination, expired: bool) -> dict[str, Any]:
    """The answer to expiring a destination's previous secret early (schema
    `PreviousSecretExpired`): `expired` is False when no previous secret was still signing
    (one kept past its overlap, if any, is forgotten all the same)."""
    return {"name": dest.name, "expired": expired}


def job_view(job: Job) -> dict[str, Any]:
    """One job row (schema `Job`), as listed by jobs and dead letters."""
    return _fields(job)


def dead_letter_view(dead: DeadLetter) -> dict[str, Any]:
    """One dead job as `GET /v1/admin/dead` and `hookline dead --json` show it (schema
    `DeadLetter`): the job's fields, then `replayable` and `not_replayable_reason` (`body
    purged`, `destination removed`, or null when it can be replayed)."""
    return {**job_view(dead.job), "replayable": dead.replayable,
            "not_replayable_reason": dead.not_replayable_reason}


def attempt_view(attempt: Attempt) -> dict[str, Any]:
    """One delivery attempt (schema `Attempt`)."""
    return _fields(attempt)


def job_story_view(story: JobStory) -> dict[str, Any]:
    """A job, its event's facts and every attempt, oldest first (schema `JobStory`).

    `attempts` is the list of attempts (every budget), each with its `run`: 1 for the
    job's first budget, one more after each resend or replay (which start the attempt
    numbers again at 1); the job row's attempt count in its current budget (what `attempts`
    is in :func:`job_view`) is `attempts_in_budget`.
    """
    return {**job_view(story.job), "attempts_in_budget": story.job.attempts,
            "replays": story.replays, "source": story.source,
            "source_event_id": story.source_event_id, "received_at": story.received_at,
            "body_bytes": story.body_bytes, "body_purged_at": story.body_purged_at,
            "attempts": _with_runs(story.attempts)}


def _with_runs(attempts: Sequence[Attempt]) -> list[dict[str, Any]]:
    """Attempt views, oldest first, numbered by run: a new budget (a resend or a replay)
    numbers its attempts from 1 again, so an attempt number not above the last one counted
    starts the next run. A handed-back attempt (a graceful stop) is not counted: the next
    claim takes its number again, in the same run."""
    views, run, last = [], 1, 0
    for attempt in attempts:
        if attempt.attempt <= last:
            run += 1
        handed_back = (attempt.error or "").startswith(HANDED_BACK)
        last = attempt.attempt - 1 if handed_back else attempt.attempt
        views.append({**attempt_view(attempt), "run": run})
    return views


def stats_view(stats: Stats, wal_bytes: int | None) -> dict[str, Any]:
    """The store's counts (schema `Stats`), with `wal_bytes` from its health
    (:meth:`hookline.shared.store.Store.health`: the SQLite `-wal` file's size, bytes; None on
    PostgreSQL); `delivery_latency.buckets` are `[upper bound s, count]` pairs."""
    view: dict[str, Any] = {}
    for key, value in dataclasses.asdict(stats).items():
        view[key] = value
        if key == "oldest_pending_age_s":  # where the answer has always carried it
            view["wal_bytes"] = wal_bytes
    return view


def replay_result_view(count: int, dry_run: bool) -> dict[str, Any]:
    """The answer to a replay (schema `ReplayResult`): `count` jobs replayed, or that would
    be replayed when `dry_run`."""
    return {"count": count, "dry_run": dry_run}


def purge_result_view(result: PurgeResult) -> dict[str, Any]:
    """What a purge removed (schema `PurgeResult`)."""
    return _fields(result)


def source_view(source: Source, *, generated_secret: str | None = None) -> dict[str, Any]:
    """An inbound source (schema `Source`): secret redacted unless this answer generated it.

    Args:
        source: the stored source.
        generated_secret: the whole secret when this answer created it (shown once).
    """
    out = source.redacted()
    if generated_secret is not None:
        out["secret"] = generated_secret
    return out


def source_removed_view(name: str) -> dict[str, Any]:
    """The answer to removing a source (schema `SourceRemoved`)."""
    return {"removed": name}


def destination_summary_view(summary: DestinationSummary) -> dict[str, Any]:
    """One destination's state, counts and latency (schema `DestinationSummary`)."""
    return dataclasses.asdict(summary)


def metric_destinations_view(page: list[DestinationFigures], next_after: int | None
                             ) -> dict[str, Any]:
    """A page of destinations' /metrics figures (schema `MetricDestinationsPage`):
    `next_after` is the `after` value of the next page, null on the last page."""
    return {"destinations": [dataclasses.asdict(d) for d in page], "next_after": next_after}


def gauge_corrections_view(corrections: list[GaugeCorrection]) -> dict[str, Any]:
    """What `hookline maintenance recount-metrics --json` prints: each gauge the repair
    path set right (`destination` null: the totals; `oldest` values are unix seconds)."""
    return {"corrected": [_fields(c) for c in corrections]}


def throughput_view(bucket_s: int, buckets: list[ThroughputBucket]) -> dict[str, Any]:
    """Events and finished jobs per time bucket, oldest first (schema `Throughput`)."""
    return {"bucket_s": bucket_s, "buckets": [_fields(b) for b in buckets]}


def event_job_view(job: EventJob) -> dict[str, Any]:
    """One job of an event: `next_run_at` is when a pending job is next due (unix seconds),
    null for any other status."""
    return {"id": job.id, "destination": job.destination, "status": job.status,
            "attempts": job.attempts,
            "next_run_at": job.run_at if job.status == "pending" else None,
            "last_error": job.last_error, "created_at": job.created_at,
            "finished_at": job.finished_at, "replays": job.replays}


def event_view(event: EventRecord) -> dict[str, Any]:
    """An event's facts (never its body) and its jobs; `body_stored` is false once retention
    emptied the body (its jobs can then not be resent). `tenant` says whose destinations
    its jobs' names are (names repeat across tenants)."""
    return {"id": event.id, "message_id": event.message_id, "tenant": event.tenant,
            "source": event.source, "source_event_id": event.source_event_id,
            "type": event.type,
            "received_at": event.received_at, "body_bytes": event.body_bytes,
            "body_stored": event.body_purged_at is None,
            "body_purged_at": event.body_purged_at, "schema_problem": event.schema_problem,
            "jobs": [event_job_view(j) for j in event.jobs]}


def event_lookup_view(match: EventMatch) -> dict[str, Any]:
    """A looked-up event (:func:`event_view`) and which form of the reference matched it:
    `id`, `message_id` or `source_event_id`."""
    return {**event_view(match.event), "matched_by": match.matched_by}


def events_page_view(events: list[EventRecord], limit: int) -> dict[str, Any]:
    """One page of the event listing, newest first; `next_before` is the `before` value of
    the next page, null when this page was not full (a full last page is followed by an
    empty one)."""
    full = len(events) >= limit
    return {"events": [event_view(e) for e in events],
            "next_before": events[-1].id if full and events else None}


def bulk_result_view(action: str, result: BulkResult) -> dict[str, Any]:
    """What a resend or retry now did (`action`: "resend" or "retry_now"): `count` jobs
    changed (with `dry_run`: would be), `job_ids` the first of them, `more` when more
    matched than the limit allowed."""
    return {"action": action, "count": result.count, "job_ids": list(result.job_ids),
            "more": result.more, "dry_run": result.dry_run}

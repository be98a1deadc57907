"""The JSON shape of each resource, written once: the admin API answers it and the CLI's
`--json` prints it, so both say the same thing about the same record (one function per
resource)."""

from __future__ import annotations

from typing import Any

from shared.models import DeadLetter
from shared.operator_models import BulkResult, EventJob, EventMatch, EventRecord


def dead_letter_view(dead: DeadLetter) -> dict[str, Any]:
    """One dead job as `GET /v1/admin/dead` and `hookline dead --json` show it: the job's
    fields, then `replayable` and `not_replayable_reason` (`body purged`, `destination
    removed`, or null when it can be replayed)."""
    job = dead.job
    return {**{name: getattr(job, name) for name in job.__slots__},
            "replayable": dead.replayable,
            "not_replayable_reason": dead.not_replayable_reason}


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
    emptied the body (its jobs can then not be resent)."""
    return {"id": event.id, "message_id": event.message_id, "source": event.source,
            "source_event_id": event.source_event_id, "type": event.type,
            "received_at": event.received_at, "body_bytes": event.body_bytes,
            "body_stored": event.body_purged_at is None,
            "body_purged_at": event.body_purged_at,
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

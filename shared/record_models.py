"""Stored jobs, attempts and event bodies as operators read them back: the job list, dead
letters, a job's whole story, the start of an event body, and what a purge removed.

Times named `*_s` or `*_at` are unix seconds (float) unless a docstring says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookline.shared.models import JobStatus

HANDED_BACK = "handed back"
"""How the error of an attempt handed back begins (the store writes `handed back (graceful
stop)`, or `handed back (claim answer lost)` for a claim its worker never heard of): it did
not count against the job's budget."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A job row as the admin views show it."""

    id: int
    event_id: int
    message_id: str
    event_type: str
    destination: str
    tenant: str
    status: JobStatus
    attempts: int
    run_at: float
    lease_owner: str | None
    lease_until: float | None
    last_error: str | None
    created_at: float
    updated_at: float
    finished_at: float | None

    @classmethod
    def from_row(cls, row: Any) -> Job:
        """Build from a row of the `list_jobs` query."""
        return cls(**{name: row[name] for name in cls.__slots__})


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    """A dead job as `hookline dead` and `GET /v1/admin/dead` list it.

    Attributes:
        job: the job row.
        not_replayable_reason: why a replay would be refused (`body purged`: retention emptied
            its event's body; `destination removed`), or None when it can be replayed.
    """

    job: Job
    not_replayable_reason: str | None

    @property
    def replayable(self) -> bool:
        """True when `hookline replay --job ID` would take it."""
        return self.not_replayable_reason is None


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One HTTP attempt of a job, as recorded."""

    job_id: int
    attempt: int
    worker: str
    lease_token: str
    started_at: float
    duration_s: float | None
    status_code: int | None
    error: str | None
    response_excerpt: str | None
    response_headers: str | None = None
    location: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> Attempt:
        """Build from a row of the attempts table (columns added by later migrations may be
        missing from the row; they default to None)."""
        keys = set(row.keys())
        return cls(**{name: row[name] for name in cls.__slots__
                      if name in keys})


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStory:
    """One job with its event and every attempt, for `hookline job ID` and the admin API.

    Attributes:
        job: the job row.
        replays: how many times an operator replayed it.
        source, source_event_id: the event's idempotency key.
        received_at: unix seconds when ingest accepted the event.
        body_bytes: size of the stored body (0 once purged).
        body_purged_at: unix seconds when retention emptied the body, or None.
        attempts: every attempt, oldest first (attempt numbers restart at 1 after a replay).
    """

    job: Job
    replays: int
    source: str
    source_event_id: str
    received_at: float
    body_bytes: int
    body_purged_at: float | None
    attempts: tuple[Attempt, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeResult:
    """What one `purge` removed.

    Attributes:
        bodies: event bodies emptied.
        attempts: attempt rows deleted.
        jobs: job rows deleted.
        events: event rows (and so their dedupe keys) deleted.
        previous_secrets: destinations' previous secrets forgotten, their rotation's overlap
            over (they signed no more).
    """

    bodies: int
    attempts: int
    jobs: int
    events: int
    previous_secrets: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EventBody:
    """The start of one stored event body, for display (size-limited).

    Attributes:
        event_id: the event's id.
        type: its event type.
        size_bytes: the whole stored body's length (0 once purged).
        head: at most the requested number of bytes from its start.
        body_purged_at: unix seconds when retention emptied the body, or None.
    """

    event_id: int
    type: str
    size_bytes: int
    head: bytes
    body_purged_at: float | None

    @property
    def truncated(self) -> bool:
        """True when `head` is shorter than the stored body."""
        return len(self.head) < self.size_bytes

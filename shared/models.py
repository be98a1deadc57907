"""Immutable rows and results passed between the store, ingest and workers.

Times named `*_s` or `*_at` are unix seconds (float) unless a docstring says otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

JobStatus = Literal["pending", "running", "done", "dead"]
JOB_STATUSES: tuple[JobStatus, ...] = ("pending", "running", "done", "dead")


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An event as accepted by ingest, before it is stored.

    Attributes:
        source: who sent it (`api` for POST /v1/events, else a configured source name).
        source_event_id: the sender's id for the event; (source, source_event_id) is the
            idempotency key.
        type: event type, e.g. `pull_request.opened`; matched against subscriptions.
        body: the exact bytes to deliver; never re-serialised.
    """

    source: str
    source_event_id: str
    type: str
    body: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    """`add_events` result for a new event: it and its jobs are committed."""

    event_id: int
    message_id: str
    job_ids: tuple[int, ...]
    duplicate: Literal[False] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Duplicate:
    """`add_events` result for an event whose (source, source_event_id) was already stored."""

    event_id: int
    message_id: str
    duplicate: Literal[True] = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Destination:
    """A delivery target (endpoint).

    Attributes:
        event_types: subscriptions: exact types, `prefix.*` patterns, or `*` for all.
        max_in_flight: most jobs of this destination running at once, across all workers.
        secret: `whsec_` signing secret; never log it.
    """

    id: int
    name: str
    url: str
    secret: str
    event_types: tuple[str, ...]
    max_in_flight: int
    paused: bool
    paused_reason: str | None
    created_at: float

    @classmethod
    def from_row(cls, row: Any) -> Destination:
        """Build from a row with the destinations table's column names."""
        return cls(
            id=row["id"], name=row["name"], url=row["url"], secret=row["secret"],
            event_types=tuple(json.loads(row["event_types"])),
            max_in_flight=row["max_in_flight"], paused=bool(row["paused"]),
            paused_reason=row["paused_reason"], created_at=row["created_at"],
        )

    def subscribes_to(self, event_type: str) -> bool:
        """True when one subscription matches `event_type` exactly, by `prefix.*`, or is `*`."""
        for pattern in self.event_types:
            if pattern == "*" or pattern == event_type:
                return True
            if pattern.endswith(".*") and event_type.startswith(pattern[:-1]):
                return True
        return False

    def redacted(self) -> dict[str, Any]:
        """A dict for display: everything but the secret, which shows only its prefix."""
        return {
            "id": self.id, "name": self.name, "url": self.url,
            "secret": self.secret[:10] + "…", "event_types": list(self.event_types),
            "max_in_flight": self.max_in_flight, "paused": self.paused,
            "paused_reason": self.paused_reason, "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """One claimed job: everything a worker needs to send it, and the lease that fences it.

    Attributes:
        lease_token: unique to this claim (not just the worker); every later write by the
            worker for this job must present it.
        lease_until: unix seconds when the lease expires unless extended.
        attempt: the attempt number this claim represents (1 for the first), counted at claim.
        body: the event's stored bytes, sent unchanged.
    """

    job_id: int
    event_id: int
    message_id: str
    event_type: str
    destination_id: int
    destination_name: str
    url: str
    secret: str
    body: bytes
    attempt: int
    lease_token: str
    lease_owner: str
    lease_until: float
    taken_over: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptResult:
    """What happened on the wire for one attempt (filled by the sender, stored by finish).

    Attributes:
        started_at: unix seconds when the request started.
        duration_s: wall time of the attempt, from a monotonic clock.
        status_code: HTTP status, or None when no response arrived.
        error: error class for transport failures (e.g. `ClientConnectorError`,
            `TimeoutError`, `ServerDisconnectedError`), or a short reason; None on 2xx.
        response_excerpt: first bytes of the response body (decoded, capped).
    """

    started_at: float
    duration_s: float
    status_code: int | None = None
    error: str | None = None
    response_excerpt: str | None = None
    location: str | None = None
    retry_after: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Done:
    """Finish outcome: the destination acknowledged the event (2xx)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """Finish outcome: try again at `run_at` (unix seconds)."""

    run_at: float
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Dead:
    """Finish outcome: no more attempts (permanent failure, or the attempt cap was reached)."""

    error: str


Outcome = Done | Retry | Dead


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A job row as the admin views show it."""

    id: int
    event_id: int
    message_id: str
    event_type: str
    destination: str
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
        return cls(**{name: row[name] for name in cls.__slots__})  # type: ignore[attr-defined]


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

    @classmethod
    def from_row(cls, row: Any) -> Attempt:
        """Build from a row of the attempts table."""
        return cls(**{name: row[name] for name in cls.__slots__})  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """Counts for `hookline stats` and /metrics."""

    jobs_by_status: dict[str, int] = field(default_factory=dict)
    events: int = 0
    attempts: int = 0
    oldest_pending_age_s: float | None = None

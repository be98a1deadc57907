"""Immutable rows and results passed between the store, ingest and workers.

Times named `*_s` or `*_at` are unix seconds (float) unless a docstring says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

JobStatus = Literal["pending", "running", "done", "dead"]
JOB_STATUSES: tuple[JobStatus, ...] = ("pending", "running", "done", "dead")
"""Every job status, in a job's life order: the one list the SQL filters, the CLI's choices and
the admin API's checks use (the schema's CHECK constraint spells the same four)."""
FINISHED_STATUSES: tuple[JobStatus, ...] = ("done", "dead")
"""A finished job: delivered, or given up on (a dead letter). Only these can be resent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An event as accepted by ingest, before it is stored.

    Attributes:
        source: who sent it (`api` for POST /v1/events, else a configured source name).
        source_event_id: the sender's id for the event; (source, source_event_id) is the
            idempotency key.
        type: event type, e.g. `pull_request.opened`; matched against subscriptions.
        body: the exact bytes to deliver; never re-serialised.
        forwarded_headers: (name, value) pairs every delivery of a source event carries (its
            origin and the provider's identifying headers: shared/policy/forwarding.py);
            () for events posted to POST /v1/events.
    """

    source: str
    source_event_id: str
    type: str
    body: bytes
    forwarded_headers: tuple[tuple[str, str], ...] = ()


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


def subscribes(event_types: Sequence[str], event_type: str) -> bool:
    """True when one of the subscription patterns `event_types` matches `event_type`:
    exactly, by `prefix.*`, or `*`."""
    for pattern in event_types:
        if pattern == "*" or pattern == event_type:
            return True
        if pattern.endswith(".*") and event_type.startswith(pattern[:-1]):
            return True
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Destination:
    """A delivery target (endpoint).

    Attributes:
        event_types: subscriptions: exact types, `prefix.*` patterns, or `*` for all.
        max_in_flight: most jobs of this destination running at once, across all workers.
        secret: `whsec_` signing secret; never log it.
        previous_secret: the secret before the last rotation, still signed with (after the
            current one) until `previous_secret_until` (unix s).
        timeout_s: attempt timeout override, seconds (None = Config.attempt_timeout_s);
            workers keep it below the lease.
        rate_limit_per_s: most requests per second across all workers (None = no limit).
        ordered: FIFO mode: one request at a time, oldest unfinished job first.
        failure_streak: consecutive failed attempts (circuit breaker); 0 after a success.
        failing_since: unix seconds of the first failure of the current run, or None.
        headers: custom request headers, (name, value) pairs sent with every attempt (names
            are tokens, values printable ASCII: see shared/policy/rules.py `headers`).
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
    # Delivery policy (migration 003); defaults mean "no override".
    previous_secret: str | None = None
    previous_secret_until: float | None = None
    timeout_s: float | None = None
    rate_limit_per_s: float | None = None
    ordered: bool = False
    failure_streak: int = 0
    failing_since: float | None = None
    headers: tuple[tuple[str, str], ...] = ()  # migration 005

    @classmethod
    def from_row(cls, row: Any) -> Destination:
        """Build from a row with the destinations table's column names."""
        keys = set(row.keys())

        def opt(name: str, default: Any = None) -> Any:
            return row[name] if name in keys and row[name] is not None else default

        return cls(
            id=row["id"], name=row["name"], url=row["url"], secret=row["secret"],
            event_types=tuple(json.loads(row["event_types"])),
            max_in_flight=row["max_in_flight"], paused=bool(row["paused"]),
            paused_reason=row["paused_reason"], created_at=row["created_at"],
            previous_secret=opt("previous_secret"),
            previous_secret_until=opt("previous_secret_until"),
            timeout_s=opt("timeout_s"), rate_limit_per_s=opt("rate_limit_per_s"),
            ordered=bool(opt("ordered", 0)), failure_streak=int(opt("failure_streak", 0)),
            failing_since=opt("failing_since"), headers=parse_headers(opt("headers")),
        )

    def active_secrets(self, now_s: float) -> tuple[str, ...]:
        """Secrets to sign with at `now_s` (unix s): the current one first, then the previous
        one while its rotation overlap lasts."""
        if self.previous_secret and (self.previous_secret_until or 0) > now_s:
            return (self.secret, self.previous_secret)
        return (self.secret,)

    def subscribes_to(self, event_type: str) -> bool:
        """True when one subscription matches `event_type` exactly, by `prefix.*`, or is `*`."""
        return subscribes(self.event_types, event_type)

    def redacted(self) -> dict[str, Any]:
        """A dict for display: everything but the secret, which shows only its prefix."""
        return {
            "id": self.id, "name": self.name, "url": self.url,
            "secret": self.secret[:10] + "…", "event_types": list(self.event_types),
            "max_in_flight": self.max_in_flight, "paused": self.paused,
            "paused_reason": self.paused_reason, "created_at": self.created_at,
            "previous_secret": None if self.previous_secret is None
            else self.previous_secret[:10] + "…",
            "previous_secret_until": self.previous_secret_until, "timeout_s": self.timeout_s,
            "rate_limit_per_s": self.rate_limit_per_s, "ordered": self.ordered,
            "failure_streak": self.failure_streak, "failing_since": self.failing_since,
            # Values may be credentials (an API key the receiver wants): names only.
            "headers": {name: "***" for name, _ in self.headers},
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
    secrets: tuple[str, ...] = ()  # every active secret, new first (rotation); () = (secret,)
    timeout_s: float | None = None  # the destination's attempt timeout override, seconds
    headers: tuple[tuple[str, str], ...] = ()  # the destination's custom request headers
    # A source event's origin and provider headers, sent after the custom headers
    # (shared/policy/forwarding.py); () for events posted to POST /v1/events.
    forwarded_headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRequest:
    """The arguments of one claim (see :meth:`shared.store.Store.claim`), for a claim made in
    the same transaction as a batch of finishes (:meth:`shared.store.Store.finish_and_claim`).

    Attributes:
        worker: the lease identity, e.g. `worker-2@host:4242`.
        limit: most jobs to take (0 = none).
        lease_s: lease length, seconds.
        max_attempts: the attempt cap (an expired lease at the cap makes its job dead).
        late_after: attempts after which a job counts as a late retry (None = never).
        max_late: most late retries to take (None = no reservation).
        per_destination: most of the worker's slots one destination may hold (None = no cap).
        held: destination id -> the worker's slots it holds already (for per_destination).
        may_take_over: the worker holds no other claim once this transaction commits, so a
            job taken over (maybe a poison job) may be claimed, alone (False: skipped).
    """

    worker: str
    limit: int
    lease_s: float
    max_attempts: int
    late_after: int | None = None
    max_late: int | None = None
    per_destination: int | None = None
    held: Mapping[int, int] = field(default_factory=dict)
    may_take_over: bool = True


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
        unsendable: the request could not be sent as stored (e.g. a header value holding
            CR/LF) and never will be: the job fails permanently; `error` says why.
    """

    started_at: float
    duration_s: float
    status_code: int | None = None
    error: str | None = None
    response_excerpt: str | None = None
    location: str | None = None
    retry_after: str | None = None
    response_headers: str | None = None  # capped `Name: value` lines of the response
    unsendable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Done:
    """Finish outcome: the destination acknowledged the event (2xx)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """Finish outcome: try again `delay_s` seconds after the finish is written.

    The store adds the delay to its own clock in the finishing transaction (`run_at = now +
    delay`), so a host whose clock is off cannot move a job's next attempt.
    """

    delay_s: float
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
class Stats:
    """Counts for `hookline stats` and /metrics."""

    jobs_by_status: dict[str, int] = field(default_factory=dict)
    events: int = 0
    attempts: int = 0
    oldest_pending_age_s: float | None = None
    # Operator views and /metrics: per-destination job counts (removed
    # destinations appear as `name~removed-ID`), paused destinations with their reason,
    # attempts by outcome class, and accept -> delivered latency of done jobs still stored.
    jobs_by_destination: dict[str, dict[str, int]] = field(default_factory=dict)
    paused_destinations: dict[str, str | None] = field(default_factory=dict)
    attempts_by_outcome: dict[str, int] = field(default_factory=dict)
    delivery_latency: LatencyHistogram | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricFigures:
    """Per live destination figures only /metrics shows (a removed destination has none).

    Attributes:
        attempts_by_destination: {destination: {outcome class: finished attempts}}, counting
            what retention purged too, so the numbers never go down.
        latency_by_destination: {destination: accept -> delivered latency of its done jobs},
            purged ones included; destinations with no done job are missing.
        destination_health: each live destination's pause state and failure run.
    """

    attempts_by_destination: dict[str, dict[str, int]] = field(default_factory=dict)
    latency_by_destination: dict[str, LatencyHistogram] = field(default_factory=dict)
    destination_health: tuple[DestinationHealth, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationHealth:
    """One live destination's pause state and failure run, for /metrics.

    Attributes:
        name: the destination.
        paused: whether it is paused.
        paused_reason: why (an operator's text, or the circuit breaker's), None when running.
        failure_streak: consecutive failed attempts since its last 2xx.
    """

    name: str
    paused: bool
    paused_reason: str | None
    failure_streak: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyHistogram:
    """Accept -> delivered latency (job finished_at - event received_at, seconds) of the done
    jobs still stored, as a cumulative histogram.

    Attributes:
        buckets: (upper bound in seconds, jobs at or below it), ascending; +Inf not included.
        count: number of done jobs.
        sum_s: total latency, seconds.
    """

    buckets: tuple[tuple[float, int], ...]
    count: int
    sum_s: float


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
    """

    bodies: int
    attempts: int
    jobs: int
    events: int


SourceScheme = Literal["github", "stripe", "standard", "token"]
SOURCE_SCHEMES: tuple[SourceScheme, ...] = ("github", "stripe", "standard", "token")


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """An inbound source: a provider posting to `POST /v1/sources/{name}`.

    Attributes:
        name: the URL path segment and the `source` of its events (the dedupe namespace).
        scheme: how requests are verified: `github` (X-Hub-Signature-256), `stripe`
            (Stripe-Signature), `standard` (Standard Webhooks), `token` (Authorization: Bearer).
        secret: the signing secret (a `whsec_` secret for `standard`) or the bearer token;
            never log it.
        created_at: unix seconds.
    """

    id: int
    name: str
    scheme: SourceScheme
    secret: str
    created_at: float

    @classmethod
    def from_row(cls, row: Any) -> Source:
        """Build from a row with the sources table's column names."""
        return cls(id=row["id"], name=row["name"], scheme=row["scheme"], secret=row["secret"],
                   created_at=row["created_at"])

    def redacted(self) -> dict[str, Any]:
        """A dict for display: the secret shows only a short prefix (`whsec_` + 4 characters,
        or 4 characters of any other secret)."""
        shown = 10 if self.secret.startswith("whsec_") else 4
        return {"id": self.id, "name": self.name, "scheme": self.scheme,
                "secret": self.secret[:shown] + "…", "created_at": self.created_at}


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationSummary:
    """One live destination as the dashboard's table shows it.

    Attributes:
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
            p99_s=None if latency is None else latency["p99_s"])


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
            count scans (see :meth:`shared.store.Store.throughput`).
    """

    start_s: float
    events: int = 0
    delivered: int = 0
    dead: int = 0
    failed: int | None = 0


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


def parse_headers(stored: str | None) -> tuple[tuple[str, str], ...]:
    """A destination's stored `headers` column (a JSON object; None or '' = none) as
    (name, value) pairs in stored order."""
    if not stored:
        return ()
    return tuple((str(name), str(value)) for name, value in json.loads(stored).items())

"""The delivery path's rows and results: an event as ingest accepts it and what storing it
answers, a claimed job and the claim's arguments, what happened on the wire, and the outcome
a worker finishes a job with; plus the job statuses.

Destinations and sources are in shared/endpoint_models.py, operator reads of stored jobs in
shared/record_models.py, counts and figures in shared/report_models.py.

Times named `*_s` or `*_at` are unix seconds (float) unless a docstring says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

JobStatus = Literal["pending", "running", "done", "dead"]
JOB_STATUSES: tuple[JobStatus, ...] = ("pending", "running", "done", "dead")
"""Every job status, in a job's life order: the one list the SQL filters, the CLI's choices and
the admin API's checks use (the schema's CHECK constraint spells the same four)."""
DEFAULT_TENANT = "_default"
"""The reserved tenant that owns every destination and event not published for a tenant (and
everything stored before tenants existed). Tenant ids starting with `_` are reserved."""
FINISHED_STATUSES: tuple[JobStatus, ...] = ("done", "dead")
"""A finished job: delivered, or given up on (a dead letter). Only these can be resent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An event as accepted by ingest, before it is stored.

    Attributes:
        source: who sent it (`api` for POST /v1/events, else a configured source name).
        source_event_id: the sender's id for the event; (tenant, source, source_event_id) is
            the idempotency key.
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
    tenant: str = DEFAULT_TENANT
    """The tenant it is published for: only that tenant's destinations receive it."""
    trace_context: str | None = None
    """The ingest request span's W3C trace context (hookline.shared.tracing's stored form),
    stored with the event so every delivery attempt joins its trace; None while tracing is
    off."""
    schema_problem: str | None = None
    """Where its `data` first failed its catalogue schema, for a type whose validation is
    `warn` (stored as the event's mark); None when it passed or was not checked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    """`add_events` result for a new event: it and its jobs are committed."""

    event_id: int
    message_id: str
    job_ids: tuple[int, ...]
    duplicate: Literal[False] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Duplicate:
    """`add_events` result for an event whose (tenant, source, source_event_id) was already
    stored."""

    event_id: int
    message_id: str
    duplicate: Literal[True] = True


TenantRefusal = Literal["tenant_not_found", "tenant_disabled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantRefused:
    """`add_events` result for an event whose tenant does not exist (and is not created on
    first use) or is disabled: nothing of it is stored."""

    tenant: str
    reason: TenantRefusal


StoreResult = Accepted | Duplicate | TenantRefused
"""What `add_events` answers for each event of a batch."""


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
    tenant_id: str = DEFAULT_TENANT  # the destination's tenant (the per-tenant fair share)
    # When the event was accepted, unix seconds: a delivery's accept -> delivered latency
    # is counted from it (shared/store/metric_deltas.py); None: not known, or the job was
    # delivered before and resent (the histogram observes each job's first delivery only: a
    # replayed dead letter's is counted, from its event's acceptance).
    received_at: float | None = None
    # The event's stored trace context (hookline.shared.tracing): each attempt's span is its
    # child. None: stored while tracing was off.
    trace_context: str | None = None
    # The destination asks for the attempt span's `traceparent` on its requests.
    propagate_trace: bool = False
    # The destination's next job waits for this result to be written: it is ordered, or this
    # claim used up its room (free in-flight slots, the worker's share of it or its tenant),
    # or filled the late-retry reservation, or took the job over (shared/store/claim_tx.py,
    # _gating). The worker writes such a result promptly instead of letting it wait for the
    # next claim (workers/writer.py, RESULT_LINGER_S).
    gates_next: bool = False


def is_token_tag(text: str) -> bool:
    """Whether `text` is a lease token tag: 8 lowercase hex digits (ClaimRequest.token_tag)."""
    return len(text) == 8 and all(c in "0123456789abcdef" for c in text)


class HandedBack(NamedTuple):
    """A job handed back (:meth:`hookline.shared.store.Store.hand_back_unheld`)."""

    job_id: int
    event_id: int
    lease_token: str  # the lease it was handed back from
    destination: str  # its destination's name
    tenant: str  # its destination's tenant


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRequest:
    """The arguments of one claim (see :meth:`hookline.shared.store.Store.claim`), for a claim made
    in the same transaction as a batch of finishes
    (:meth:`hookline.shared.store.Store.finish_and_claim`).

    Attributes:
        worker: the lease identity, e.g. `worker-2@host:4242`.
        limit: most jobs to take (0 = none).
        lease_s: lease length, seconds.
        max_attempts: the attempt cap (an expired lease at the cap makes its job dead).
        late_after: attempts after which a job counts as a late retry (None = never).
        max_late: most late retries to take (None = no reservation).
        per_destination: most of the worker's slots one destination may hold (None = no cap).
        held: destination id -> the worker's slots it holds already (for per_destination).
        per_tenant: most of the worker's slots one tenant may hold while destinations of more
            than one tenant exist (None = no cap).
        held_tenants: tenant -> the worker's slots it holds already (for per_tenant).
        may_take_over: the worker holds no other claim once this transaction commits, so a
            job taken over (maybe a poison job) may be claimed, alone (False: skipped).
        token_tag: 8 hex digits set in each lease token this claim gives, after the claim's
            instant (16 hex digits) and before 16 random ones: the worker process's own, so
            that it can find the leases of a claim whose answer it lost
            (:meth:`hookline.shared.store.Store.hand_back_unheld`), whatever identity another
            process shares with it. Empty: none (tokens of 32 digits).

    Raises:
        ValueError: `token_tag` is neither empty nor 8 lowercase hex digits.
    """

    def __post_init__(self) -> None:
        if self.token_tag and not is_token_tag(self.token_tag):
            raise ValueError(f"token_tag must be 8 lowercase hex digits, not {self.token_tag!r}")

    worker: str
    limit: int
    lease_s: float
    max_attempts: int
    late_after: int | None = None
    max_late: int | None = None
    per_destination: int | None = None
    held: Mapping[int, int] = field(default_factory=dict)
    may_take_over: bool = True
    per_tenant: int | None = None
    held_tenants: Mapping[str, int] = field(default_factory=dict)
    token_tag: str = ""


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
        waited_s: seconds the result waited in the worker before the write that records
            it (set by the worker at that write). The job's `finished_at` is the write's
            instant less this: when the answer arrived, on the store's clock.
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
    waited_s: float = 0.0


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

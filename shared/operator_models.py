"""Records of the operator's event lookup, event listing, resend and retry now (see
:meth:`hookline.shared.store.Store.find_event`, `list_events`, `resend`, `retry_now`).

An event is named by a *reference*: its internal id (`42`, what ingest answers as
`event_id` and what log lines carry), its `webhook-id` (`msg_...`), or the sender's id
(`evt_1`), which is unique per source (`api` for `POST /v1/events`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hookline.shared.errors import InvalidInput
from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT, FINISHED_STATUSES
from hookline.shared.policy.inputs import MAX_ID, MAX_LIST_LIMIT, job_status, time_range
from hookline.shared.tenant_models import tenant_id

DEFAULT_SOURCE = "api"
"""The source of events posted to `POST /v1/events` (the sender's ids are unique per source)."""
MAX_EVENT_ID = MAX_ID
MAX_REF_CHARS = 512
"""Longest event reference or source name a lookup takes, characters."""
BULK_DEFAULT_LIMIT = 1000
"""Jobs one bulk resend or retry now touches when no `limit` is given."""
BULK_MAX_LIMIT = 10_000
"""Most jobs one bulk resend or retry now touches (run it again for more)."""
SAMPLE_IDS = 100
"""Most job ids a bulk answer lists (the first ones, by id)."""
RESEND_STATUSES = FINISHED_STATUSES
AUDIT_EVENTS = {"resend": "jobs_resent", "retry_now": "jobs_retried_now"}
"""The audit log line of each action."""

MatchedBy = Literal["id", "message_id", "source_event_id"]


@dataclass(frozen=True, slots=True)
class EventRef:
    """How to look an event up, in order: each candidate is tried until one matches.

    Attributes:
        text: the reference as given.
        internal_id: the event's row id to try first, when `text` is a whole number.
        message_id: the `webhook-id` to try, when `text` starts with `msg_`.
        source: the source the sender's id `text` belongs to (tried last).
    """

    text: str
    internal_id: int | None
    message_id: str | None
    source: str

    def describe(self) -> str:
        """What was looked for, for a not-found message."""
        tried = []
        if self.internal_id is not None:
            tried.append(f"internal id {self.internal_id}")
        if self.message_id is not None:
            tried.append(f"webhook-id {self.message_id!r}")
        tried.append(f"sender's id {self.text!r} from source {self.source!r}")
        return " or ".join(tried)


def scope_tenant(destination: str | None, tenant: str | None) -> str | None:
    """The tenant a selection is narrowed to: `tenant` when given; else the default tenant
    when a destination is named (a destination NAME means the default tenant's unless a
    tenant is given: names are unique within a tenant only); else None (every tenant)."""
    if tenant is not None:
        return tenant
    return DEFAULT_TENANT if destination is not None else None


def parse_event_ref(text: str, source: str | None = None) -> EventRef:
    """Read an event reference. With `source` given, `text` is only the sender's id in that
    source; otherwise a whole number is tried as the internal id, a `msg_` text as the
    `webhook-id`, and then either as the sender's id in source `api`.

    Raises:
        InvalidInput: `text` ("ref") or `source` ("source") is empty or longer than
            MAX_REF_CHARS characters.
    """
    if not isinstance(text, str) or not text or len(text) > MAX_REF_CHARS:
        raise InvalidInput("ref", f"an event reference is an internal id, a msg_ id or the "
                                  f"sender's id (1 to {MAX_REF_CHARS} characters)")
    if source is not None and (not isinstance(source, str) or not source
                               or len(source) > MAX_REF_CHARS):
        raise InvalidInput("source", f"must be a source name (1 to {MAX_REF_CHARS} "
                                     "characters)")
    if source is not None:
        return EventRef(text, None, None, source)
    internal = int(text) if text.isascii() and text.isdigit() else None
    if internal is not None and not 1 <= internal <= MAX_EVENT_ID:
        internal = None
    message = text if text.startswith("msg_") else None
    return EventRef(text, internal, message, DEFAULT_SOURCE)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventJob:
    """One job of an event, as the lookup shows it.

    Attributes:
        run_at: when a pending job is next due (unix seconds); for other statuses the
            instant of its last scheduling, not a next run.
        replays: how many times an operator replayed or resent it.
    """

    id: int
    destination: str
    status: str
    attempts: int
    run_at: float
    last_error: str | None
    created_at: float
    finished_at: float | None
    replays: int

    @classmethod
    def from_row(cls, row: Any) -> EventJob:
        """Build from a row of the `event_jobs` query."""
        return cls(**{name: row[name] for name in cls.__slots__})


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRecord:
    """An event's facts and its jobs.

    Attributes:
        tenant: the tenant it was published for; its jobs are that tenant's destinations'
            (names repeat across tenants, so a job's destination name means one of these).
        received_at: when ingest accepted it, unix seconds.
        body_bytes: size of the stored body (0 once purged).
        body_purged_at: when retention emptied the body (None while it is stored); an event
            without its body cannot be resent.
        jobs: its jobs, by id.
    """

    id: int
    message_id: str
    source: str
    source_event_id: str
    type: str
    received_at: float
    body_bytes: int
    body_purged_at: float | None
    jobs: tuple[EventJob, ...]
    tenant: str = DEFAULT_TENANT
    schema_problem: str | None = None
    """Warn mode's mark: where its `data` first failed its catalogue schema (None: it did
    not, or was not checked)."""

    @classmethod
    def from_rows(cls, row: Any, jobs: list[Any]) -> EventRecord:
        """Build from a row of the `find_event_*` / `list_events` queries and its jobs."""
        return cls(id=row["id"], message_id=row["message_id"], tenant=row["tenant_id"],
                   source=row["source"],
                   source_event_id=row["source_event_id"], type=row["type"],
                   received_at=row["received_at"], body_bytes=row["body_bytes"] or 0,
                   body_purged_at=row["body_purged_at"],
                   jobs=tuple(EventJob.from_row(j) for j in jobs),
                   schema_problem=row["schema_problem"])


@dataclass(frozen=True, slots=True, kw_only=True)
class EventMatch:
    """A looked-up event and which part of the reference matched it."""

    event: EventRecord
    matched_by: MatchedBy


@dataclass(frozen=True, slots=True, kw_only=True)
class EventFilter:
    """Which events `list_events` answers (each given criterion must hold).

    Attributes:
        destination: events with a job for this live destination (of `tenant`, default the
            default tenant's).
        tenant: events published for this tenant (None: every tenant, unless `destination`
            is given: see :func:`scope_tenant`).
        status: events with a job in this status (with `destination`: that destination's job).
        type: events of exactly this type.
        since_s, until_s: received at or after / before, unix seconds.
        before_id: only ids below this one (keyset paging: the last page's `next_before`).
        limit: most events answered.
    """

    destination: str | None = None
    tenant: str | None = None
    status: str | None = None
    type: str | None = None
    since_s: float | None = None
    until_s: float | None = None
    before_id: int | None = None
    limit: int = 100

    def check(self) -> EventFilter:
        """Return self when it is a valid filter.

        Raises:
            InvalidInput: a status that is not a job status, a limit outside 1 to
                MAX_LIST_LIMIT, or a time range whose end is not after its start.
        """
        job_status("status", self.status)
        _check_tenant(self.tenant)
        if not 1 <= self.limit <= MAX_LIST_LIMIT:
            raise InvalidInput("limit", f"must be from 1 to {MAX_LIST_LIMIT}")
        time_range(self.since_s, self.until_s)
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSelection:
    """The jobs a resend or retry now touches: one job, or a destination's jobs narrowed.

    Attributes:
        job_id: one job (then no filter but `tenant` may be given).
        destination: every matching job of this live destination (of `tenant`).
        tenant: whose destination `destination` names (None: the default tenant's); with
            `job_id`, the job only if it is one of this tenant's destinations' (a parameter
            of the queries: the tenant API's isolation).
        status: resend only: `done` or `dead` (None: both).
        since_s, until_s: jobs created (their event received) at or after / before, unix s.
        limit: most jobs touched, the oldest first (1 to BULK_MAX_LIMIT).
    """

    job_id: int | None = None
    destination: str | None = None
    tenant: str | None = None
    status: str | None = None
    since_s: float | None = None
    until_s: float | None = None
    limit: int = BULK_DEFAULT_LIMIT

    def check(self, *, resend: bool) -> JobSelection:
        """Return self when it is a valid selection.

        Raises:
            InvalidInput: naming the field: neither or both of a job id and a destination,
                a filter beside a job id, a status other than done/dead (or any status for
                retry now), a limit out of range, or a time range whose end is not after its
                start.
        """
        if (self.job_id is None) == (self.destination is None):
            raise InvalidInput("destination" if self.job_id is None else "job_id",
                               "give exactly one of a job id or a destination")
        _check_tenant(self.tenant)
        narrowed = {"status": self.status, "since": self.since_s, "until": self.until_s}
        given = [name for name, value in narrowed.items() if value is not None]
        if self.job_id is not None and given:
            raise InvalidInput(given[0], "status, since and until narrow a destination's "
                                         "jobs, not one job")
        if self.status is not None and not resend:
            raise InvalidInput("status", "retry now takes pending jobs; status narrows a "
                                         "resend only")
        job_status("status", self.status, RESEND_STATUSES)
        if not 1 <= self.limit <= BULK_MAX_LIMIT:
            raise InvalidInput("limit", f"must be from 1 to {BULK_MAX_LIMIT}")
        time_range(self.since_s, self.until_s)
        return self


def _check_tenant(tenant: str | None) -> None:
    """A tenant filter is a tenant id (the default tenant's own id included)."""
    if tenant is not None:
        tenant_id(tenant, reserved_ok=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkResult:
    """What a resend or retry now did (or, with dry_run, would do).

    Attributes:
        count: jobs changed (or that would be).
        job_ids: the first of them by id (at most SAMPLE_IDS).
        more: more jobs matched than `limit` allowed (run it again for the rest).
        dry_run: nothing was changed.
    """

    count: int
    job_ids: tuple[int, ...]
    more: bool
    dry_run: bool


def audit(action: str, result: BulkResult, selection: JobSelection, reason: str | None,
          **who: Any) -> None:
    """Log the audit line of a resend or retry now (`jobs_resent`, `jobs_retried_now`):
    who asked (`who`: by, and client and actor or os_user), why, the filters, what changed.
    The admin API and the CLI both call it."""
    filters = {"job_id": selection.job_id, "destination": selection.destination,
               "tenant": scope_tenant(selection.destination, selection.tenant),
               "status": selection.status, "since_s": selection.since_s,
               "until_s": selection.until_s,
               "limit": selection.limit if selection.job_id is None else None}
    get_logger().info(AUDIT_EVENTS[action], **who, reason=reason,
                      filters={k: v for k, v in filters.items() if v is not None},
                      count=result.count, job_ids=list(result.job_ids[:20]),
                      more=result.more)

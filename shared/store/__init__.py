"""The job store contract: what ingest, workers and the CLI may ask of a database.

One :class:`Store` protocol, defined here; the package also offers the factories that pick a
backend for a database URL (:func:`open_store`, :func:`store_for`: shared/store/factory.py)
and what only some backends have (shared/store/capabilities.py). The transactions are written
once (`shared/store/logic.py`) and driven by a backend (`shared/store/sqlite.py`,
`shared/store/postgres.py`). Callers never see SQL or a dialect; what only SQLite has is
behind :class:`SqliteDiagnostics`, and what the service shows of it comes through
:meth:`Store.health`. Instants are unix seconds; the store reads its own clock (SQLite: the
host's; PostgreSQL: the server's now()). Driver errors are translated at this boundary into
:mod:`hookline.shared.errors` types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from hookline.shared.endpoint_models import Destination, Source
from hookline.shared.models import (
    DEFAULT_TENANT,
    AttemptResult,
    Claim,
    ClaimRequest,
    HandedBack,
    NewEvent,
    Outcome,
    StoreResult,
)
from hookline.shared.operator_models import (
    BulkResult,
    EventFilter,
    EventMatch,
    EventRecord,
    JobSelection,
)
from hookline.shared.policy.delivery import BreakerPolicy
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.record_models import Attempt, DeadLetter, EventBody, Job, JobStory, PurgeResult
from hookline.shared.report_models import (
    DestinationFigures,
    DestinationSummary,
    GaugeCorrection,
    MetricFigures,
    Stats,
    ThroughputBucket,
)
from hookline.shared.store.capabilities import (
    SqliteDiagnostics,
    TimeoutCounting,
    store_timeouts,
    write_lock_stats,
    write_lock_waits,
)
from hookline.shared.store.catalogue_tx import CatalogueStore
from hookline.shared.store.factory import (
    SqliteOptions,
    open_store,
    postgres_limits,
    read_store_for,
    store_for,
)
from hookline.shared.store.filter_tx import FilterTestRow
from hookline.shared.store.health import StoreHealth
from hookline.shared.store.tenant_contract import TenantStore
from hookline.shared.timeparse import InstantSpec

__all__ = [
    "SqliteDiagnostics", "SqliteOptions", "Store", "TenantStore", "TimeoutCounting", "open_store",
    "postgres_limits", "read_store_for", "resolve_instants", "store_for", "store_timeouts",
    "write_lock_stats", "write_lock_waits",
]


class Store(TenantStore, CatalogueStore, Protocol):
    """Durable events, destinations and delivery jobs, with leases fenced by token (the
    tenants' part of the contract: :class:`TenantStore`; the event-type catalogue's:
    :class:`CatalogueStore`)."""

    notify: NotifyPolicy
    """When the store makes operational events (shared/policy/notify.py); store_for sets the
    Config's, any other store has the defaults."""

    migrated_from: int | None
    """The schema version :meth:`open` found and migrated forward (logged
    `schema_migrated`): 0 when it created the whole schema, None when it found nothing to
    migrate."""

    async def open(self) -> None:
        """Connect and apply pending migrations. Raises StoreError when it cannot."""

    async def close(self) -> None:
        """Release connections and wake-up sockets."""

    async def now_s(self) -> float:
        """The store's time now, unix seconds: the clock its instants (received, finished,
        dead, run_at) are written with. Compare stored instants with this, never with the
        wall clock: a retention age or a `since` like `10m` ago counts back from it.

        SQLite: the host's monotonic clock anchored in the database, which a wall-clock step
        while the service runs does not move (:mod:`hookline.shared.store.clock`); PostgreSQL: the
        database server's now().

        Raises:
            StoreError: the database cannot be reached.
        """

    async def add_events(self, events: Sequence[NewEvent], *,
                         create_tenants: bool = False) -> list[StoreResult]:
        """Store events and fan each out to one job per live subscribed destination of its
        tenant (the subscription index: see shared/store/ingest_tx.py).

        All of `events` commit in ONE transaction (group commit): when this returns, every
        Accepted event and its jobs are durable; when it raises, none of them is stored.
        An event whose (tenant, source, source_event_id) already exists, or repeats earlier
        in the batch, is a Duplicate and creates nothing. An event whose tenant does not
        exist (unless `create_tenants`: then it is created with defaults) or is disabled is
        TenantRefused and stores nothing. Workers are woken after the commit.

        Raises:
            StoreBusy: the write lock stayed taken past the busy timeout.
        """

    async def add_backlog(self, events: Sequence[NewEvent]) -> int:
        """Store events and their jobs as :meth:`add_events` does (one transaction, one job
        per live subscribed destination, due now, workers woken), without a per-event
        answer: for loading a large backlog (the backlog benchmark), in fewer statements.
        An event whose (source, source_event_id) exists, or repeats in the batch, is skipped.

        Returns:
            The number of jobs written.

        Raises:
            StoreBusy: the write lock stayed taken past the busy timeout.
        """

    async def add_event(self, event: NewEvent, *, create_tenants: bool = False) -> StoreResult:
        """One event in its own transaction; see :meth:`add_events`."""

    async def claim(self, worker: str, limit: int, lease_s: float,
                    max_attempts: int, *, late_after: int | None = None,
                    max_late: int | None = None, per_destination: int | None = None,
                    held: Mapping[int, int] | None = None,
                    may_take_over: bool = True, per_tenant: int | None = None,
                    held_tenants: Mapping[str, int] | None = None) -> list[Claim]:
        """Atomically take up to `limit` due jobs under fresh leases of `lease_s` seconds.

        Delivery policy (migration 003): jobs that already made `late_after` or more attempts
        are late retries; they are claimed after every other due job and at most `max_late`
        of them (None = no reservation). Fair share: no destination ends up holding more
        than `per_destination` of this worker's slots, counting the `held` ones (destination
        id -> slots it holds already; None = no cap). Tenants take turns (each tenant's
        first due job, then each one's second, ...; within a tenant its destinations take
        turns), and while live destinations of more than one tenant exist no tenant ends up
        holding more than `per_tenant` of this worker's slots, counting `held_tenants` (tenant
        -> slots it holds already; None = no cap). An `ordered` destination yields only its
        oldest unfinished job (by id), and only when that job is due (pending and run_at passed,
        or running with an expired lease), so it never has two in flight. A destination with
        `rate_limit_per_s` yields a job only while its GCRA allows one (see
        :mod:`hookline.shared.policy.delivery`); `next_send_at` is advanced in this transaction. The
        claim carries the destination's active secrets (new first) and timeout override.

        Due means pending with run_at <= now, or running with an expired lease (takeover).
        Each claim gets a lease token unique to it and counts an attempt. No destination gets
        more than its max_in_flight unexpired leases, across all processes. Paused
        destinations are skipped. An expired lease on a job that already used `max_attempts`
        makes it dead ("worker lost") instead of being claimed. The attempt a lost worker was
        sending (taken over, or dead at the cap) is closed in the same transaction: its
        error, and its duration up to now.

        Quarantine: a job is *taken over* (`Claim.taken_over`) when an attempt of an earlier
        claim never finished (its worker was lost, maybe killed by this very job: a poison
        job), or it was replayed after dying "worker lost". Such a job is only ever claimed
        alone: with `may_take_over` (the caller holds no other claim) a claim that finds one
        due takes exactly that one, the lowest job id, and nothing else; without it, takeovers
        are skipped (:meth:`finish_and_claim` reports one waiting).
        """

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        """Push the leases of `claims` to now + `lease_s`; returns the claims whose lease was
        lost (token superseded or job no longer running)."""

    async def finish(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                     breaker: BreakerPolicy | None = None) -> list[bool]:
        """Record each attempt and apply each outcome, fenced by the claim's lease token.

        Each attempt also updates its destination's failure run (`failure_streak`,
        `failing_since`; a 2xx resets both). With a `breaker`, a result for which
        :func:`hookline.shared.policy.delivery.auto_pause_reason` gives a reason pauses the
        destination in the same transaction and logs `destination_auto_paused`.

        Returns one bool per item: False when the lease was lost (a stale completion: the job
        row was not changed; the attempt row is still completed, since the request happened).
        """

    async def finish_and_claim(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]],
                               breaker: BreakerPolicy | None,
                               request: ClaimRequest
                               ) -> tuple[list[bool], list[Claim], bool]:
        """:meth:`finish` the items, then :meth:`claim` per `request` for the slots they free.

        SQLite runs both in ONE transaction: a busy worker then takes the single write lock
        and pays the commit's fsync once per batch instead of twice, which is what lets two
        workers sustain thousands of deliveries per second. PostgreSQL, whose writers do not
        queue on one lock, runs them as two transactions, the finish first. With no `items`
        it is a claim, which (like :meth:`claim`) writes nothing when nothing is claimable.

        Either way the items are committed before any claim is returned, so a worker that holds
        nothing else once they are written may take a job over (`request.may_take_over`).

        Returns:
            (one kept-bool per item as :meth:`finish` returns, the new claims, whether a
            takeover was skipped because `request.may_take_over` was False or it could not
            be sent now: the worker should then claim nothing new until it holds nothing,
            and claim again with `may_take_over`).
        """

    async def hand_back(self, claims: Sequence[Claim]) -> int:
        """Return claimed jobs to pending, due now, without charging their attempt (graceful
        stop). Fenced by token; returns how many were handed back."""

    async def hand_back_unheld(self, worker: str, tag: str, newer_than: str,
                               held: Sequence[str]) -> list[HandedBack]:
        """Hand back, as :meth:`hand_back` does, every job leased to `worker` under a lease
        token that carries `tag` (ClaimRequest.token_tag: one worker process's), sorts after
        `newer_than` and is not in `held`: the claims of a write whose answer never reached
        that process (its connection was cut at the commit, which may have landed). Tokens
        sort by their claim's instant, so a `newer_than` that is the newest token the
        process was given leaves alone the leases it knew of. A takeover among them (the
        attempt before its lease's was lost: maybe a poison job) is left to expire, to be
        taken over again alone. Their attempt rows close as `handed back (claim answer
        lost)`. Returns those handed back.

        Raises:
            StoreUnavailable, StoreBusy: as any write (nothing is handed back)."""

    async def wait_for_jobs(self, timeout_s: float) -> bool:
        """Sleep until new or replayed jobs may be due, or `timeout_s` passes; True if woken.

        A waiter hears only commits made after it started listening (first call; on
        PostgreSQL also after the LISTEN connection is reopened), so at that moment it
        returns True at once when due work is already waiting."""

    def pass_on_wake_up(self) -> None:
        """Hand the wake-up the last :meth:`wait_for_jobs` returned on to another waiting
        process, because this one cannot take the work at once (its slots are half full or
        more, it is stopping or draining). On SQLite a commit wakes one worker, so the others
        hear of the work only so or by their poll; each is visited at most once
        (shared/store/wakeup.py). A no-op on PostgreSQL, where every waiter hears each
        NOTIFY. Never raises."""

    async def add_destination(self, *, name: str, url: str, secret: str,
                              event_types: Sequence[str], max_in_flight: int,
                              headers: Mapping[str, str] | None = None,
                              timeout_s: float | None = None,
                              rate_limit_per_s: float | None = None,
                              ordered: bool = False,
                              tenant: str = DEFAULT_TENANT,
                              filter: Mapping[str, Any] | None = None,
                              propagate_trace: bool = False,
                              ) -> Destination:
        """Register a destination of `tenant` (names are unique within a tenant); `headers`
        are its custom request headers (see
        :func:`hookline.shared.policy.rules.headers`); `timeout_s` (seconds) and `rate_limit_per_s`
        override the attempt timeout and limit its request rate (None: no override, no
        limit); `ordered` sends its jobs one at a time, oldest first; `filter` is its payload
        filter (shared/policy/filters.py; None: none); `propagate_trace` sends each attempt
        span's `traceparent` with the request (while tracing is on). Every field is checked by
        :func:`hookline.shared.policy.rules.new_destination` first. Raises InvalidSetting (a
        ConfigError) for an invalid field, Conflict when a live destination of the tenant has
        that name or the tenant has its `max_destinations`, NotFound for an unknown tenant."""

    async def list_destinations(self, tenant: str | None = None) -> list[Destination]:
        """Live destinations in creation order (of `tenant` only, unless None)."""

    async def get_destination(self, name: str, *, tenant: str = DEFAULT_TENANT) -> Destination:
        """One destination of `tenant` by name. Raises NotFound."""

    async def set_paused(self, name: str, paused: bool, reason: str | None = None, *,
                         tenant: str = DEFAULT_TENANT) -> int:
        """Pause (no claims, no charges) or resume a destination; resuming also resets its
        failure run (circuit breaker) and, in the same transaction, brings every pending job
        of it not yet due forward to now (as :meth:`retry_now` does; attempt counts kept,
        jobs already due keep their place, the claim still keeps `ordered` and
        `max_in_flight`), then wakes workers. Returns how many jobs were brought forward (0
        for a pause). Raises NotFound."""

    async def rotate_secret(self, name: str, new_secret: str, overlap_s: float, *,
                            tenant: str = DEFAULT_TENANT) -> Destination:
        """Make `new_secret` the destination's secret; the old one stays active (both
        signatures are sent, new first) for `overlap_s` seconds from now.

        Raises:
            NotFound: no live destination has that name.
            InvalidSetting: `new_secret` is not a valid `whsec_` secret or equals the current
                one (field "secret"), or `overlap_s` is outside 0 to
                :data:`hookline.shared.policy.rules.MAX_ROTATION_OVERLAP_S` (field "overlap_s").
        """

    async def expire_previous_secret(self, name: str, *,
                                     tenant: str = DEFAULT_TENANT) -> tuple[Destination, bool]:
        """End a rotation's overlap now: the previous secret is forgotten, and every claim
        from now on signs with the current secret only (a request already in flight keeps
        the signatures it was sent with).

        Returns:
            The destination afterwards, and whether a previous secret was still signing
            (False: there was nothing to expire; the call changes nothing then).

        Raises:
            NotFound: no live destination has that name.
        """

    async def list_jobs(self, status: str | None = None, limit: int = 100, *,
                        tenant: str | None = None, before_id: int | None = None) -> list[Job]:
        """Jobs, newest first, optionally of one status and/or of one tenant's destinations
        (removed ones included); `before_id` pages on: only jobs with a lower id."""

    async def list_attempts(self, job_id: int | None = None, limit: int = 10_000) -> list[Attempt]:
        """Attempt rows, oldest first, of one job or of all."""

    async def stats(self, tenant: str = DEFAULT_TENANT) -> Stats:
        """Counts by status, events, attempts, and the oldest due pending job's age; plus
        counts per destination and status and the paused destinations, both of `tenant`'s
        destinations only (by name: names are unique within a tenant, not across tenants),
        attempts by outcome and the accept -> delivered latency histogram (for `hookline
        stats` and /metrics). Every figure but the two per-destination ones is the whole
        service's."""

    async def health(self) -> StoreHealth:
        """The store's own health for `/healthz` and `/metrics`, without touching the
        database: the backend's name and, on SQLite, the `-wal` file's size now and its
        state as of the last :meth:`maintenance` round (degraded past `wal_degraded_bytes`,
        with the checkpoint's result and the processes holding the files)."""

    async def metric_figures(self, series_max: int) -> MetricFigures:
        """What /metrics shows from the database, read from the figures the store keeps as
        rows change (shared/store/metric_deltas.py), never from the job rows: the cost grows
        with destinations, not jobs (PostgreSQL folds the appended deltas first).

        Args:
            series_max: at most this many live destinations get figures of their own
                (paused, failing, with the oldest due job, the largest backlog first); the
                others, and what removed destinations left, are added up in `other`.

        Returns:
            Jobs by status, the oldest due job's age, finished attempts by outcome class and
            accept -> delivered latency (both counting what retention purged, so they never
            go down), attempts in flight, pause state and failure run, events stored.
        """

    async def destination_figures(self, *, after_id: int = 0, limit: int = 100
                                  ) -> tuple[list[DestinationFigures], int | None]:
        """Every live destination's /metrics figures, a page at a time (keyset paging).

        Args:
            after_id: the page starts after this destination id (0: from the first).
            limit: at most this many destinations (at least 1).

        Returns:
            The page, by destination id, and the `after_id` of the next page (None: last).
        """

    async def fold_metric_deltas(self) -> int:
        """Move the metric deltas the writers appended into the maintained figures
        (ingest's maintenance, and before each read; SQLite also folds by itself each time
        1,024 have been appended), in one write transaction.

        Returns:
            How many delta rows were folded.
        """

    async def recount_metrics(self) -> list[GaugeCorrection]:
        """The repair path (`hookline maintenance recount-metrics`): count the maintained
        gauges (jobs by status, attempts in flight, each destination's oldest pending job,
        events stored) again from the rows, in one write transaction. Finished attempts and
        deliveries, counters that include what retention purged, are kept.

        Returns:
            Each gauge that differed from the rows, with both values; [] when none did.
        """

    async def maintenance(self) -> dict[str, int]:
        """Housekeeping that ingest runs periodically; cheap, never blocks writers for long.

        Returns:
            What the round did, for the log: backend-specific figures (a `busy` of 1 means
            it could not finish), {} when the backend has nothing to do (PostgreSQL: that is
            autovacuum's job). SQLite's are in :meth:`SqliteDiagnostics.maintenance`.

        Raises:
            StoreError: the database cannot be opened.
        """

    # -- operator controls ------------------------------------------------------------------

    async def update_destination(self, name: str, *, tenant: str = DEFAULT_TENANT,
                                 **changes: Any) -> Destination:
        """Change settings of a live destination; returns it as stored afterwards.

        Args:
            name: the destination.
            **changes: field=value for fields in
                :data:`hookline.shared.policy.rules.DESTINATION_UPDATERS` (validated and normalised
                by :func:`hookline.shared.policy.rules.destination_changes`); lists are stored as
                JSON.

        A destination turning ordered marks its unfinished jobs in the same transaction
        (jobs_ordered: SQLite since schema 25, PostgreSQL since 26) while writes of new jobs
        wait: about 3 to 4 s per million of them on SQLite (every other writer waits), 1.1
        to 1.4 s per 100,000 on PostgreSQL (bounded by its statement and transaction
        timeouts; writers of jobs give up after its lock timeout). Turning unordered, or
        setting ordered on a destination already ordered, changes the destination's row
        only.

        Raises:
            ConfigError: no change given, an unknown field, or an invalid value.
            NotFound: no live destination has that name.
            StoreBusy: (PostgreSQL) turning ordered waited over 0.5 s for a lock, or the
                marking outlasted the statement timeout; nothing changed.
            StoreUnavailable: (PostgreSQL) the marking outlasted the transaction timeout;
                nothing changed.
        """

    async def filter_test(self, name: str, *, tenant: str = DEFAULT_TENANT,
                          filter: Mapping[str, Any] | None = None, use_stored: bool = True,
                          last: int = 50) -> list[FilterTestRow]:
        """A dry run of a payload filter: the tenant's newest `last` events, newest first,
        each with whether destination `name` subscribes to its type and whether the filter
        (its stored one when `use_stored`, else `filter`; None: none) lets it through.
        Changes nothing. Raises NotFound; InvalidSetting("filter") for a bad filter."""

    async def remove_destination(self, name: str, *, tenant: str = DEFAULT_TENANT) -> int:
        """Soft-delete a destination: it stops receiving new events, its row stays for history
        under the name `NAME~removed-ID` (so NAME can be reused), and its pending and running
        jobs become dead with the error "destination removed" (a running attempt's finish is
        then fenced out). Returns how many jobs were ended. Raises NotFound."""

    async def list_dead(self, destination: str | None = None, since_s: float | None = None,
                        limit: int = 100, *, tenant: str | None = None,
                        before_id: int | None = None) -> list[DeadLetter]:
        """Dead jobs, most recently dead first (ties by id, highest first), with their last
        error and whether each can be replayed (else why not); optionally only those of one
        destination and/or dead at or after `since_s` (unix seconds), and of one tenant's
        destinations (a `destination` name means the default tenant's unless `tenant` is
        given). `before_id`, the last job of the page before, pages on: only the dead jobs
        after it in this order. Raises NotFound: `before_id` is not a dead job (replayed or
        purged since)."""

    async def replay(self, *, job_id: int | None = None, all_dead: bool = False,
                     destination: str | None = None, since_s: float | None = None,
                     dry_run: bool = False, tenant: str | None = None) -> int:
        """Return dead jobs to pending (attempts = 0, due now) and wake workers.

        Select one job (`job_id`) or every dead job (`all_dead`), narrowed by `destination`
        (of `tenant`, default the default tenant's), `tenant` and `since_s` (dead at or
        after, unix seconds). The event row is untouched, so the
        redelivery carries the same webhook-id and body bytes. Dead jobs of removed
        destinations and of purged events are skipped in bulk. Returns how many jobs were (or,
        with `dry_run`, would be) replayed.

        Raises:
            ConfigError: neither or both of `job_id` and `all_dead` given.
            NotFound: `job_id` does not exist (or its metadata was purged).
            Conflict: `job_id` is not dead, its event body was purged, or its destination was
                removed.
        """

    async def purge(self, *, bodies_before_s: float, metadata_before_s: float,
                    dedupe_before_s: float, dead_before_s: float | None = None) -> PurgeResult:
        """Retention, in one transaction. Instants are unix seconds (callers pass now - age).

        - Bodies: empty the body of events received before `bodies_before_s` whose jobs are
          all done and finished before it; an event with a dead job keeps its body while
          that job is kept, so every dead job listed stays replayable.
        - Metadata: delete done jobs that finished before `metadata_before_s`, dead jobs that
          died before `dead_before_s` (None: `metadata_before_s`), and their attempts.
        - Dedupe keys: delete events received before `dedupe_before_s` that have no job left.

        Raises:
            ConfigError: the cutoffs are not ordered dedupe <= metadata <= bodies.
        """

    async def get_job(self, job_id: int, *, tenant: str | None = None) -> JobStory:
        """One job with its event facts and attempts; with `tenant`, only a job of that
        tenant's destinations (read by a query that takes the tenant). Raises NotFound."""

    # -- finding events, resending, retrying now --------------------------------------------

    async def find_event(self, ref: str, source: str | None = None, *,
                         tenant: str | None = None) -> EventMatch:
        """One event and its jobs by a reference
        (:func:`hookline.shared.operator_models.parse_event_ref`): with `source`, `ref` is the
        sender's id in that source; otherwise a whole number is tried as the internal id, a
        `msg_` text as the webhook-id, then either as the sender's id in source `api`. The
        answer says which matched. With `tenant`, only that tenant's events are looked at (in
        the query); without, internal ids and webhook-ids of every tenant, and a sender's id
        (which repeats across tenants) in the default tenant, else in the one other tenant
        that has it.

        Raises:
            ConfigError: `ref` or `source` is empty or too long.
            NotFound: nothing matches (the message names every form that was tried), or,
                without `tenant`, several other tenants have that sender's id (the message
                names them).
        """

    async def list_events(self, flt: EventFilter) -> list[EventRecord]:
        """Events newest first (by id), each with its jobs, filtered by `flt` (a job's
        destination and/or status, the event's tenant and type, received time); page with
        `flt.before_id` = the last id of the previous page. `flt.tenant` reads that tenant's
        events only (a parameter of the query).

        Raises:
            ConfigError: an unknown status, or a limit outside 1..10000.
        """

    async def resend(self, selection: JobSelection, *, dry_run: bool = False) -> BulkResult:
        """Send finished jobs again: done or dead jobs become pending, due now, with a fresh
        attempt budget (attempts = 0, `replays` + 1); their attempt history stays. The event
        row is untouched, so the receiver gets the same webhook-id and body bytes. Workers
        are woken after the commit; a paused destination's resent jobs wait for its resume.
        In bulk (a destination, narrowed by status and creation time) jobs of removed
        destinations and of events whose body was purged are skipped. `selection.tenant`
        takes jobs of that tenant's destinations only (a parameter of the queries).

        Raises:
            ConfigError: an invalid selection (:meth:`JobSelection.check`).
            NotFound: the job does not exist.
            Conflict: the job is pending or running (retry it now instead), its event body
                was purged by retention, or its destination was removed.
        """

    async def retry_now(self, selection: JobSelection, *,
                        dry_run: bool = False) -> BulkResult:
        """Bring pending jobs' next attempt forward to now (their attempt count is kept) and
        wake workers. Only pending jobs not yet due change (a due one counts 0). A paused
        destination's jobs become due but are still not sent until it is resumed; an
        ordered destination still sends only its oldest unfinished job.

        Raises:
            ConfigError: an invalid selection (:meth:`JobSelection.check`).
            NotFound: the job does not exist.
            Conflict: the job is not pending (running, done or dead).
        """

    # -- health -----------------------------------------------------------------------------

    async def check_writable(self) -> None:
        """Prove the database takes writes now, cheaply and without changing anything.

        SQLite: take the write lock with `BEGIN IMMEDIATE`, then `ROLLBACK`. PostgreSQL: a
        read-write transaction that is rolled back (fails on a read-only standby).

        Raises:
            StoreBusy: the write lock was not free within the busy timeout.
            StoreError: the database cannot be written (read-only, gone, ...).
        """

    # -- dashboard views --------------------------------------------------------------------

    async def destination_summaries(self, *, latency_window_s: float = 900.0,
                                    latency_scan_limit: int = 20_000,
                                    tenant: str | None = None) -> list[DestinationSummary]:
        """Every live destination (of `tenant` only, when given) with its state, job counts
        and attempt latency.

        Args:
            latency_window_s: percentiles are taken over attempts started in the last this
                many seconds (the store's clock), default 15 minutes.
            latency_scan_limit: and only among the newest this many attempt rows of all
                destinations (a primary-key range), so a poll costs the same however large
                the attempts table grows; a destination with little traffic next to a busy
                one may then have fewer samples than its window holds.

        Returns:
            One :class:`DestinationSummary` per live destination, in creation order.
        """

    async def throughput(self, *, window_s: float, bucket_s: int = 60,
                         failed_scan_limit: int = 100_000) -> list[ThroughputBucket]:
        """Events accepted, jobs finished (done, dead) and failed attempts per time bucket.

        Args:
            window_s: how far back from now (the store's clock), seconds.
            bucket_s: bucket length, whole seconds (at least 1); buckets are aligned to
                multiples of it in unix time.
            failed_scan_limit: failed attempts are counted among the newest this many
                attempt rows only (a primary-key range, so a poll costs the same however
                large the attempts table grows); a bucket starting before the oldest of them
                has `failed` None (not counted) rather than a short count.

        Returns:
            Every bucket from the one holding `now - window_s` to the one holding now, oldest
            first, zero-filled; the last one is still filling.

        Raises:
            ConfigError: `bucket_s` is below 1 or `window_s` is negative.
        """

    async def event_body(self, job_id: int, max_bytes: int, *,
                         tenant: str | None = None) -> EventBody:
        """The start of the stored body of a job's event (for display).

        Args:
            job_id: the job.
            max_bytes: most bytes to return from the body's start (at least 1).
            tenant: only a job of this tenant's events (None: any tenant's).

        Raises:
            NotFound: no job has that id (or its metadata was purged), or it is another
                tenant's.
        """

    # -- inbound sources --------------------------------------------------------------------

    async def add_source(self, *, name: str, scheme: str, secret: str) -> Source:
        """Register an inbound source (`POST /v1/sources/{name}`).

        Fields are checked with :func:`hookline.shared.policy.sources.check_source` before anything
        is stored.

        Raises:
            ConfigError: a field is invalid. Conflict: a live source already has that name.
        """

    async def get_source(self, name: str) -> Source:
        """One live source by name. Raises NotFound."""

    async def list_sources(self) -> list[Source]:
        """Live sources in creation order."""

    async def remove_source(self, name: str) -> None:
        """Soft-delete a source: its requests are refused from then on (404), its row stays
        under the name `NAME~removed-ID` (so NAME can be reused), and its stored events and
        their jobs are untouched. Raises NotFound."""


async def resolve_instants(store: Store, *specs: InstantSpec | None) -> tuple[float | None, ...]:
    """Operator times as unix seconds on the store's clock: an age (`10m` ago) counts back
    from :meth:`Store.now_s`, asked once and only when some spec is an age.

    Args:
        store: an open store.
        *specs: parsed times (:func:`hookline.shared.timeparse.parse_instant_spec`); None stays
            None.

    Returns:
        One instant (unix seconds) or None per spec, in order.

    Raises:
        StoreError: the store's time cannot be read.
    """
    now_s = await store.now_s() if any(s is not None and s.ago for s in specs) else 0.0
    return tuple(None if s is None else s.resolve(now_s) for s in specs)

"""Every store transaction, written once for both backends (see :mod:`hookline.shared.store.ops`).

:class:`StoreLogic` implements the :class:`hookline.shared.store.Store` operations as generators of
named-query operations; a backend subclass supplies `_transact` (how one transaction is
driven), the connection, the clock, wake-ups and maintenance. The named queries of both
backends take the same parameters and return the same columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from hookline.shared.endpoint_models import Destination, Source, parse_headers
from hookline.shared.errors import ConfigError, NotFound
from hookline.shared.logs import get_logger
from hookline.shared.models import (
    DEFAULT_TENANT,
    Accepted,
    AttemptResult,
    Claim,
    ClaimRequest,
    Dead,
    Done,
    NewEvent,
    Outcome,
    Retry,
    StoreResult,
)
from hookline.shared.operator_models import scope_tenant
from hookline.shared.policy import forwarding, rules
from hookline.shared.policy.delivery import (
    BreakerPolicy,
    auto_pause_reason,
    choose_with_takeovers,
    fair_room,
    is_failure,
)
from hookline.shared.policy.sources import check_source
from hookline.shared.record_models import Attempt, DeadLetter, EventBody, Job, JobStory, PurgeResult
from hookline.shared.report_models import (
    DestinationFigures,
    DestinationSummary,
    GaugeCorrection,
    MetricFigures,
    Stats,
    ThroughputBucket,
)
from hookline.shared.store.events_tx import EventOperations
from hookline.shared.store.figures_tx import (
    destination_page_tx,
    fold_tx,
    recount_tx,
    shown_figures_tx,
    stats_tx,
)
from hookline.shared.store.ingest_tx import add_events_tx
from hookline.shared.store.metric_deltas import IN_FLIGHT, MetricDeltas, outcome_class
from hookline.shared.store.operator_tx import (
    expire_previous_tx,
    get_job_tx,
    list_dead_tx,
    purge_tx,
    remove_destination_tx,
    replay_tx,
    rotate_tx,
    set_paused_tx,
    summaries_tx,
    throughput_tx,
)
from hookline.shared.store.ops import (
    BEGIN_WRITE,
    NOTIFY,
    NOW,
    AfterCommit,
    Query,
    Rows,
    Tx,
    count,
    one,
    rows,
)
from hookline.shared.store.tenant_counts_tx import TenantCounts
from hookline.shared.store.tenant_reads_tx import TenantReadOperations
from hookline.shared.store.tenants_tx import TenantOperations, add_destination_tx

T = TypeVar("T")
log = get_logger()
_NO_ID_BOUND = 2**63 - 1  # claim_window's `upto` when the walk goes to the ring's end
Items = Sequence[tuple[Claim, Outcome, AttemptResult]]


class StoreLogic(EventOperations, TenantOperations, TenantCounts, TenantReadOperations):
    """The store operations once; subclasses drive transactions (see module docstring).

    `LOCKS_DESTINATIONS`: the claim locks the destinations it serves before counting their
    free slots (PostgreSQL, whose claimers run concurrently); SQLite's single writer needs no
    lock and reads the slots in one query. `FINISH_AND_CLAIM_TOGETHER`: finish_and_claim is
    one transaction (SQLite: one turn of the write lock and one fsync instead of two), or
    two, the finish first (PostgreSQL, whose writers do not queue on one lock).
    """

    LOCKS_DESTINATIONS = False
    FINISH_AND_CLAIM_TOGETHER = True
    CLAIM_WINDOW = 64  # most destinations one claim considers (see _claim_window)
    _claim_cursor = 0  # the destination id this process's next claim walks from (exclusive)

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive `tx` as one transaction (`write`: it writes from the start)."""
        raise NotImplementedError

    async def now_s(self) -> float:
        """See :meth:`hookline.shared.store.Store.now_s`: the instant a transaction would read."""
        return float(await self._transact(_now_tx(), write=False))

    # -- ingest ----------------------------------------------------------------------------

    async def add_events(self, events: Sequence[NewEvent], *,
                         create_tenants: bool = False) -> list[StoreResult]:
        """See :meth:`hookline.shared.store.Store.add_events` (workers are woken after the
        commit)."""
        return await self._transact(add_events_tx(events, create_tenants=create_tenants),
                                    write=False)  # see BEGIN_WRITE

    async def add_event(self, event: NewEvent, *,
                        create_tenants: bool = False) -> StoreResult:
        """One event in its own transaction; see :meth:`add_events`."""
        return (await self.add_events([event], create_tenants=create_tenants))[0]

    async def add_backlog(self, events: Sequence[NewEvent]) -> int:
        """See :meth:`hookline.shared.store.Store.add_backlog`: :meth:`add_events`'s transaction
        (its rows already go in a few statements per batch), counting the jobs written."""
        results = await self.add_events(events)
        return sum(len(r.job_ids) for r in results if isinstance(r, Accepted))

    async def _due_work_exists(self) -> bool:
        """Whether a job is claimable now (asked when a waiter starts listening)."""
        return bool((await self._transact(_single(one("due_work_exists")), write=False))["due"])

    # -- workers ---------------------------------------------------------------------------

    async def claim(self, worker: str, limit: int, lease_s: float,
                    max_attempts: int, *, late_after: int | None = None,
                    max_late: int | None = None, per_destination: int | None = None,
                    held: Mapping[int, int] | None = None,
                    may_take_over: bool = True, per_tenant: int | None = None,
                    held_tenants: Mapping[str, int] | None = None) -> list[Claim]:
        """See :meth:`hookline.shared.store.Store.claim`."""
        if limit <= 0:
            return []
        request = ClaimRequest(worker=worker, limit=limit, lease_s=lease_s,
                               max_attempts=max_attempts, late_after=late_after,
                               max_late=max_late, per_destination=per_destination,
                               held=held or {}, may_take_over=may_take_over,
                               per_tenant=per_tenant, held_tenants=held_tenants or {})
        return (await self._transact(self._claim_tx(request), write=False))[0]

    def _claim_tx(self, request: ClaimRequest) -> Tx[tuple[list[Claim], bool]]:
        # Most wake-ups under load find the work already taken by the other workers:
        # a read costs no write lock, so only a claim that can take something writes.
        if not (yield one("claim_probe", max_attempts=request.max_attempts))["claimable"]:
            return [], False
        yield BEGIN_WRITE
        deltas = MetricDeltas()
        claimed = yield from self._claim_in(request, deltas)
        yield from deltas.apply()
        return claimed

    def _claim_in(self, request: ClaimRequest,
                  deltas: MetricDeltas) -> Tx[tuple[list[Claim], bool]]:
        """The claim itself (see Store.claim) inside a write transaction: choose the jobs,
        then lease them, record their attempts and read what sending needs, each in one
        statement for the whole batch (a claim of 64 jobs is 5 statements, not 320).
        Returns the claims and whether a takeover was left waiting (see Store.claim)."""
        now = yield NOW
        killed = {r["id"]: r["destination_id"] for r in (yield rows(
            "kill_lost_at_cap", max_attempts=request.max_attempts))}
        if killed:  # their in-flight attempts end with them, in this transaction
            for destination_id in killed.values():
                deltas.jobs(destination_id, "running", "dead")
            for r in (yield rows("close_attempts_lost_at_cap", job_ids=list(killed))):
                deltas.attempts(killed[r["job_id"]], IN_FLIGHT, "worker_lost")
        ids = yield from self._claim_window(request)
        if self.LOCKS_DESTINATIONS and ids:  # lock first (id order), then count the free slots
            ids = [r["id"] for r in (yield rows("lock_claimable_destinations",
                                                destination_ids=ids))]
        if not ids:
            return [], False
        slots = list((yield rows("destination_slots", destination_ids=ids)))
        # The per-tenant share applies only while destinations of several tenants exist.
        per_tenant = request.per_tenant if slots and slots[0]["several_tenants"] else None
        # (late retry?, due since, job id, destination id): fresh work sorts first.
        candidates: list[tuple[bool, float, int, int]] = []
        status_of: dict[int, str] = {}  # each candidate's status now (pending, or running)
        rates: dict[int, tuple[float, float]] = {}  # id -> (per second, next_send_at)
        tenant_of: dict[int, str] = {}  # destination id -> tenant, of those offering jobs
        offers: dict[int, int] = {}  # destination id -> most jobs it may offer
        due: list[tuple[int, float, int, int, str]] = []  # job, due, attempts, dest., status
        for slot in slots:
            room = fair_room(request, slot["id"])
            if per_tenant is not None:  # a tenant at its share offers nothing
                room = min(room, per_tenant - request.held_tenants.get(slot["tenant_id"], 0))
            if slot["free"] <= 0 or room <= 0:
                continue
            if slot["rate_limit_per_s"] is not None:
                rates[slot["id"]] = (slot["rate_limit_per_s"], slot["next_send_at"])
            if slot["ordered"]:
                due += (yield from _ordered_due(slot["id"], now))
            else:
                offers[slot["id"]] = min(slot["free"], room)
        due += (yield from _due_of(offers))
        tenant_by_id = {slot["id"]: slot["tenant_id"] for slot in slots}
        for job_id, due_at, attempts, destination_id, status in due:
            status_of[job_id] = status
            late = request.late_after is not None and attempts >= request.late_after
            candidates.append((late, due_at, job_id, destination_id))
            tenant_of[destination_id] = tenant_by_id[destination_id]
        # The quarantine: a job taken over is claimed alone, by a worker that holds nothing.
        # {job id: its attempts still open}, of the jobs a claim would take over.
        takeovers = {r["job_id"]: int(r["open_attempts"] or 0) for r in (yield rows(
            "takeovers_among", job_ids=[c[2] for c in candidates]))} if candidates else {}
        # Tenants take turns only when there are several to choose between.
        several = per_tenant is not None or len(set(tenant_of.values())) > 1
        chosen, next_send, waiting = choose_with_takeovers(
            candidates, set(takeovers), request, rates=rates, now_s=now,
            tenants=tenant_of if several else None, per_tenant=per_tenant)
        for destination_id, next_send_at in next_send.items():
            yield count("advance_next_send", destination_id=destination_id,
                        next_send_at=next_send_at)
        if not chosen:
            return [], waiting
        # Every chosen job is still due (write lock, or row locks): one UPDATE leases them.
        by_id = {r["id"]: r for r in (yield rows("claim_job", job_ids=chosen,
                                                  worker=request.worker,
                                                  lease_s=float(request.lease_s)))}
        leased = [by_id[job_id] for job_id in chosen if job_id in by_id]
        job_ids = [r["id"] for r in leased]
        tokens = [r["lease_token"] for r in leased]
        # A job whose previous claim's attempt never finished (its worker was lost: an expired
        # lease, or a replay of a job that died so) is taken over, and is sent in quarantine.
        taken_over = {r["job_id"] for r in (yield rows("mark_attempt_lost", job_ids=job_ids,
                                                        lease_tokens=tokens))}
        for r in leased:
            deltas.jobs(r["destination_id"], status_of[r["id"]], "running")
            deltas.attempts(r["destination_id"], None, IN_FLIGHT)
            if r["id"] in taken_over:  # its lost attempts were closed just now
                deltas.attempts(r["destination_id"], IN_FLIGHT, "worker_lost",
                                takeovers.get(r["id"], 0))
        yield count("insert_attempt", worker=request.worker, claims=Rows(
            ("job_ids", "attempts", "lease_tokens"),
            [(r["id"], r["attempts"], r["lease_token"]) for r in leased]))
        details = {d["job_id"]: d for d in (yield rows("claim_details", job_ids=job_ids))}
        return [_claim_from(r, details[r["id"]], request.worker, r["id"] in taken_over, now)
                for r in leased], waiting

    def _claim_window(self, request: ClaimRequest) -> Tx[list[int]]:
        """The destinations this claim considers (ids, ascending): at most `CLAIM_WINDOW`
        (or `request.limit` if larger) that offer work now, walked in id order from where
        this process's previous claim stopped, wrapping around; plus every destination
        holding an expired lease.

        Why a window: a claim takes at most `limit` jobs, but reading every live
        destination's slots and due jobs made its cost follow the destinations that exist
        (30,003 live destinations: p50 1.1 s against 29 ms with 3). The walk (claim_window)
        leapfrogs the live destinations and the pending jobs' destinations, one index search
        in each per step, so it never visits a paused destination or one without jobs one by
        one, and stops at the window's last offering destination: its cost follows the work
        it can take.
        Destinations the claim could not take from are left out before they cost a read or
        a lock: paused, nothing due, no free in-flight slot, rate limit not allowing, full
        for this worker (per_destination), their tenant at its share (per_tenant; on
        PostgreSQL a claim therefore never locks a capped tenant's destinations).

        Fairness: with no more offering destinations than the window (every installation
        below 64 busy destinations) the claim sees all of them and chooses exactly as before
        (tenants' turns, then destinations' turns, oldest first). With more, each claim sees
        the next window of the ring, and the next claim starts after it: every destination
        with due work is considered at least once every ceil(offering / window) claims of a
        worker, whatever its id, its tenant or its age, and within a window the choice is
        the usual one, so a destination left out of a claim keeps its oldest job as its head
        while the served ones move on to younger jobs, and wins its turn in a later pass (no
        starvation: tests/unit/test_claim_window.py). Oldest-first
        across the whole installation is given up beyond the window: finding the oldest due
        job of every destination is the per-destination read this removes (a maintained
        per-destination next-due instant would cost ingest a destination write per job).
        """
        window = max(self.CLAIM_WINDOW, request.limit)
        full = ([d for d, n in request.held.items() if n >= request.per_destination]
                if request.per_destination is not None else [])
        capped = ([t for t, n in request.held_tenants.items() if n >= request.per_tenant]
                  if request.per_tenant is not None else [])

        def walk(after: int, upto: int, most: int, expired: bool) -> Query:
            return rows("claim_window", after=after, upto=upto, window=most, expired=expired,
                        full_destinations=full, capped_tenants=capped)

        start = self._claim_cursor
        found = list((yield walk(start, _NO_ID_BOUND, window, True)))
        walked = [r["id"] for r in found if r["walked"]]
        expired = [r["id"] for r in found if not r["walked"]]
        last = max(walked, default=0)
        if len(walked) < window and start > 0:  # the ring's end: go on from its start
            wrapped = [r["id"] for r in (yield walk(0, start, window - len(walked), False))]
            walked += wrapped
            last = max(wrapped, default=0)
        # A full window: more may offer beyond it, and the next claim starts there.
        self._claim_cursor = last if len(walked) >= window else 0
        return sorted({*walked, *expired})

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        """See :meth:`hookline.shared.store.Store.extend`."""
        if not claims:
            return []
        kept = await self._transact(_extend_tx(claims, lease_s), write=True)
        return [c for c in claims if c.lease_token not in kept]

    async def finish(self, items: Items, breaker: BreakerPolicy | None = None) -> list[bool]:
        """See :meth:`hookline.shared.store.Store.finish`."""
        return await self._transact(_finish_tx(items, breaker), write=True)

    async def finish_and_claim(self, items: Items, breaker: BreakerPolicy | None,
                               request: ClaimRequest
                               ) -> tuple[list[bool], list[Claim], bool]:
        """See :meth:`hookline.shared.store.Store.finish_and_claim` (one transaction or two: see the
        class docstring; either way the results are durable before a claim is returned)."""
        if not self.FINISH_AND_CLAIM_TOGETHER:
            kept = await self.finish(items, breaker) if items else []
            if request.limit <= 0:
                return kept, [], False
            return kept, *(await self._transact(self._claim_tx(request), write=False))
        return await self._transact(self._finish_and_claim_tx(items, breaker, request),
                                    write=False)

    def _finish_and_claim_tx(self, items: Items, breaker: BreakerPolicy | None,
                             request: ClaimRequest
                             ) -> Tx[tuple[list[bool], list[Claim], bool]]:
        if not items and not (yield one("claim_probe",
                                        max_attempts=request.max_attempts))["claimable"]:
            return [], [], False  # a claim alone, with nothing to take: no write (see claim)
        yield BEGIN_WRITE
        deltas = MetricDeltas()
        kept = yield from _finish_all(items, breaker, deltas)
        claimed: tuple[list[Claim], bool] = ([], False)
        if request.limit > 0:
            claimed = yield from self._claim_in(request, deltas)
        yield from deltas.apply()  # one statement for the finishes and the claim
        return kept, *claimed

    async def hand_back(self, claims: Sequence[Claim]) -> int:
        """See :meth:`hookline.shared.store.Store.hand_back`."""
        if not claims:
            return 0
        return await self._transact(_hand_back_tx(claims), write=True)

    # -- destinations ----------------------------------------------------------------------

    async def add_destination(self, *, name: str, url: str, secret: str,
                              event_types: Sequence[str], max_in_flight: int,
                              headers: Mapping[str, str] | None = None,
                              timeout_s: float | None = None,
                              rate_limit_per_s: float | None = None,
                              ordered: bool = False,
                              tenant: str = DEFAULT_TENANT) -> Destination:
        """See :meth:`hookline.shared.store.Store.add_destination`."""
        new = rules.new_destination(name=name, url=url, secret=secret, event_types=event_types,
                                    max_in_flight=max_in_flight, headers=headers,
                                    timeout_s=timeout_s, rate_limit_per_s=rate_limit_per_s,
                                    ordered=ordered)
        query = Query("insert_destination", {
            "tenant": tenant, "name": new.name, "url": new.url, "secret": new.secret,
            "max_in_flight": new.max_in_flight, "event_types": json.dumps(new.event_types),
            "headers": json.dumps(new.headers), "timeout_s": new.timeout_s,
            "rate_limit_per_s": new.rate_limit_per_s, "ordered": int(new.ordered)},
            want="one", taken=f"a destination named {name!r} already exists")
        return Destination.from_row(await self._transact(add_destination_tx(tenant, query),
                                                         write=True))

    async def list_destinations(self, tenant: str | None = None) -> list[Destination]:
        """See :meth:`hookline.shared.store.Store.list_destinations`."""
        query = (rows("live_destinations") if tenant is None
                 else rows("live_destinations_of_tenant", tenant=tenant))
        found = await self._transact(_single(query), write=False)
        return [Destination.from_row(r) for r in found]

    async def get_destination(self, name: str, *, tenant: str = DEFAULT_TENANT) -> Destination:
        """See :meth:`hookline.shared.store.Store.get_destination`."""
        row = await self._transact(_single(one("get_destination", tenant=tenant, name=name)),
                                   write=False)
        if row is None:
            raise NotFound(f"no destination named {name!r}")
        return Destination.from_row(row)

    async def set_paused(self, name: str, paused: bool, reason: str | None = None, *,
                         tenant: str = DEFAULT_TENANT) -> None:
        """See :meth:`hookline.shared.store.Store.set_paused` (a resume wakes waiting workers)."""
        await self._transact(set_paused_tx(tenant, name, paused, reason), write=True)

    async def rotate_secret(self, name: str, new_secret: str, overlap_s: float, *,
                            tenant: str = DEFAULT_TENANT) -> Destination:
        """See :meth:`hookline.shared.store.Store.rotate_secret`."""
        secret, overlap = rules.destination_secret(new_secret), rules.rotation_overlap(overlap_s)
        return Destination.from_row(await self._transact(
            rotate_tx(tenant, name, secret, overlap), write=True))

    async def expire_previous_secret(self, name: str, *,
                                     tenant: str = DEFAULT_TENANT) -> tuple[Destination, bool]:
        """See :meth:`hookline.shared.store.Store.expire_previous_secret`."""
        row, expired = await self._transact(expire_previous_tx(tenant, name), write=True)
        return Destination.from_row(row), expired

    async def update_destination(self, name: str, *, tenant: str = DEFAULT_TENANT,
                                 **changes: Any) -> Destination:
        """See :meth:`hookline.shared.store.Store.update_destination`."""
        values = rules.destination_changes(changes)
        # Column names come only from the validated DESTINATION_UPDATERS keys, never input.
        assignments = ", ".join(f"{column} = :{column}" for column in values)
        sql = (f"UPDATE destinations SET {assignments} "  # noqa: S608  (columns from DESTINATION_UPDATERS keys only)
               "WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL RETURNING *")
        params = {k: json.dumps(v if isinstance(v, dict) else list(v))
                  if isinstance(v, list | tuple | dict) else v for k, v in values.items()}
        query = Query("update_destination", {**params, "tenant": tenant, "name": name},
                      want="one", sql=sql)
        row = await self._transact(_single(query), write=True)
        if row is None:
            raise NotFound(f"no destination named {name!r}")
        return Destination.from_row(row)

    async def remove_destination(self, name: str, *, tenant: str = DEFAULT_TENANT) -> int:
        """See :meth:`hookline.shared.store.Store.remove_destination`."""
        return await self._transact(remove_destination_tx(tenant, name), write=True)

    # -- operator views and controls -------------------------------------------------------

    async def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        """See :meth:`hookline.shared.store.Store.list_jobs`."""
        found = await self._transact(_single(rows("list_jobs", status=status, limit=limit)),
                                     write=False)
        return [Job.from_row(r) for r in found]

    async def list_attempts(self, job_id: int | None = None, limit: int = 10_000) -> list[Attempt]:
        """See :meth:`hookline.shared.store.Store.list_attempts`."""
        found = await self._transact(_single(rows("list_attempts", job_id=job_id,
                                                  limit=limit)), write=False)
        return [Attempt.from_row(r) for r in found]

    async def list_dead(self, destination: str | None = None, since_s: float | None = None,
                        limit: int = 100, *, tenant: str | None = None) -> list[DeadLetter]:
        """See :meth:`hookline.shared.store.Store.list_dead`."""
        return await self._transact(list_dead_tx(
            destination, None if since_s is None else float(since_s), limit,
            scope_tenant(destination, tenant)), write=False)

    async def replay(self, *, job_id: int | None = None, all_dead: bool = False,
                     destination: str | None = None, since_s: float | None = None,
                     dry_run: bool = False, tenant: str | None = None) -> int:
        """See :meth:`hookline.shared.store.Store.replay` (wakes waiting workers on commit)."""
        if (job_id is None) == (not all_dead):
            raise ConfigError("replay needs exactly one of a job id or all_dead")
        since = None if since_s is None else float(since_s)
        return await self._transact(replay_tx(job_id, destination, since, dry_run,
                                              scope_tenant(destination, tenant)), write=True)

    async def purge(self, *, bodies_before_s: float, metadata_before_s: float,
                    dedupe_before_s: float, dead_before_s: float | None = None) -> PurgeResult:
        """See :meth:`hookline.shared.store.Store.purge`."""
        rules.purge_cutoffs(bodies_before_s, metadata_before_s, dedupe_before_s)
        dead = metadata_before_s if dead_before_s is None else dead_before_s
        return await self._transact(purge_tx(float(bodies_before_s), float(metadata_before_s),
                                             float(dedupe_before_s), float(dead)), write=True)

    async def get_job(self, job_id: int, *, tenant: str | None = None) -> JobStory:
        """See :meth:`hookline.shared.store.Store.get_job`."""
        row, attempts = await self._transact(get_job_tx(job_id, tenant), write=False)
        if row is None:
            raise NotFound(f"no job with id {job_id}")
        return JobStory(
            job=Job.from_row(row), replays=row["replays"], source=row["source"],
            source_event_id=row["source_event_id"], received_at=row["received_at"],
            body_bytes=row["body_bytes"], body_purged_at=row["body_purged_at"],
            attempts=tuple(Attempt.from_row(a) for a in attempts))

    async def stats(self) -> Stats:
        """See :meth:`hookline.shared.store.Store.stats` (ages by the store's clock)."""
        await self.fold_metric_deltas()
        return await self._transact(stats_tx(), write=False)

    async def metric_figures(self, series_max: int) -> MetricFigures:
        """See :meth:`hookline.shared.store.Store.metric_figures`."""
        await self.fold_metric_deltas()
        return await self._transact(shown_figures_tx(max(0, int(series_max))), write=False)

    async def destination_figures(self, *, after_id: int = 0, limit: int = 100
                                  ) -> tuple[list[DestinationFigures], int | None]:
        """See :meth:`hookline.shared.store.Store.destination_figures`."""
        await self.fold_metric_deltas()
        return await self._transact(destination_page_tx(int(after_id), max(1, int(limit))),
                                    write=False)

    async def fold_metric_deltas(self) -> int:
        """See :meth:`hookline.shared.store.Store.fold_metric_deltas`."""
        return await self._transact(fold_tx(), write=False)

    async def recount_metrics(self) -> list[GaugeCorrection]:
        """See :meth:`hookline.shared.store.Store.recount_metrics`."""
        return await self._transact(recount_tx(), write=False)

    # -- dashboard views -------------------------------------------------------------------

    async def destination_summaries(self, *, latency_window_s: float = 900.0,
                                    latency_scan_limit: int = 20_000
                                    ) -> list[DestinationSummary]:
        """See :meth:`hookline.shared.store.Store.destination_summaries` (the store's clock)."""
        return await self._transact(summaries_tx(float(latency_window_s),
                                                  int(latency_scan_limit)), write=False)

    async def throughput(self, *, window_s: float, bucket_s: int = 60,
                         failed_scan_limit: int = 100_000) -> list[ThroughputBucket]:
        """See :meth:`hookline.shared.store.Store.throughput` (the store's clock)."""
        rules.throughput_args(window_s, bucket_s)
        return await self._transact(throughput_tx(window_s, bucket_s, int(failed_scan_limit)),
                                    write=False)

    async def event_body(self, job_id: int, max_bytes: int) -> EventBody:
        """See :meth:`hookline.shared.store.Store.event_body`."""
        row = await self._transact(_single(one("event_body_of_job", job_id=job_id,
                                               max_bytes=max(1, int(max_bytes)))), write=False)
        if row is None:
            raise NotFound(f"no job with id {job_id}")
        return EventBody(event_id=row["event_id"], type=row["type"],
                         size_bytes=row["size_bytes"] or 0, head=bytes(row["head"] or b""),
                         body_purged_at=row["body_purged_at"])

    # -- inbound sources -------------------------------------------------------------------

    async def add_source(self, *, name: str, scheme: str, secret: str) -> Source:
        """See :meth:`hookline.shared.store.Store.add_source`."""
        check_source(name, scheme, secret)
        query = Query("insert_source", {"name": name, "scheme": scheme, "secret": secret},
                      want="one", taken=f"a source named {name!r} already exists")
        return Source.from_row(await self._transact(_single(query), write=True))

    async def get_source(self, name: str) -> Source:
        """See :meth:`hookline.shared.store.Store.get_source`."""
        row = await self._transact(_single(one("get_source", name=name)), write=False)
        if row is None:
            raise NotFound(f"no source named {name!r}")
        return Source.from_row(row)

    async def list_sources(self) -> list[Source]:
        """See :meth:`hookline.shared.store.Store.list_sources`."""
        found = await self._transact(_single(rows("live_sources")), write=False)
        return [Source.from_row(r) for r in found]

    async def remove_source(self, name: str) -> None:
        """See :meth:`hookline.shared.store.Store.remove_source`."""
        if await self._transact(_single(one("remove_source", name=name)), write=True) is None:
            raise NotFound(f"no source named {name!r}")


# -- transactions --------------------------------------------------------------------------

def _now_tx() -> Tx[float]:
    now: float = yield NOW
    return now


def _single(query: Query) -> Tx[Any]:
    """A transaction of one query."""
    return (yield query)


def _extend_tx(claims: Sequence[Claim], lease_s: float) -> Tx[set[str]]:
    # One statement for every lease: the worker's heartbeat.
    return {r["lease_token"] for r in (yield rows("extend_lease", lease_s=float(lease_s),
                                                  claims=_claim_keys(claims)))}


def _claim_keys(claims: Sequence[Claim]) -> Rows:
    return Rows(("job_ids", "lease_tokens"), [(c.job_id, c.lease_token) for c in claims])


def _hand_back_tx(claims: Sequence[Claim]) -> Tx[int]:
    handed = 0
    deltas = MetricDeltas()
    for c in claims:
        if (yield count("hand_back", job_id=c.job_id, lease_token=c.lease_token)):
            deltas.jobs(c.destination_id, "running", "pending")
            closed = yield count("mark_attempt_handed_back", lease_token=c.lease_token)
            deltas.attempts(c.destination_id, IN_FLIGHT, "handed_back", closed)
            handed += 1
    yield from deltas.apply()
    if handed:
        yield NOTIFY
    return handed


def _finish_tx(items: Items, breaker: BreakerPolicy | None) -> Tx[list[bool]]:
    deltas = MetricDeltas()
    kept = yield from _finish_all(items, breaker, deltas)
    yield from deltas.apply()
    return kept


def _finish_all(items: Items, breaker: BreakerPolicy | None,
                deltas: MetricDeltas) -> Tx[list[bool]]:
    """Every item's fenced finish, then the failure runs of their destinations in id order
    (as claims lock them: two hosts finishing batches over the same destinations cannot
    deadlock); a destination the breaker pauses is logged after the commit."""
    if (all(isinstance(outcome, Done) and not is_failure(result) for _, outcome, result in items)
            and len({claim.job_id for claim, _, _ in items}) == len(items)):
        return (yield from _finish_delivered(items, deltas))
    kept = []
    for claim, outcome, result in items:
        kept.append((yield from _finish_one(claim, outcome, result, deltas)))
    for claim, _, result in sorted(items, key=lambda item: item[0].destination_id):
        yield from _track_failure_run(claim, result, breaker)
    return kept


def _finish_delivered(items: Items, deltas: MetricDeltas) -> Tx[list[bool]]:
    """The common batch, every attempt acknowledged with a 2xx and no job twice: each step
    one statement for the whole batch (attempt rows, done jobs), then one failure-run reset
    per destination. Same effect as finishing them one by one."""
    recorded = yield rows("record_attempts", attempts=Rows(
        ("lease_tokens", "started_ats", "durations_s", "status_codes", "errors",
         "response_excerpts", "response_headers", "locations"),
        [(claim.lease_token, r.started_at, r.duration_s, r.status_code, r.error,
          r.response_excerpt, r.response_headers, r.location) for claim, _, r in items]))
    # An attempt already closed as lost (its job taken over) keeps that outcome class.
    closed_now = {r["lease_token"] for r in recorded if not r["was_lost"]}
    for claim, _, result in items:
        if claim.lease_token in closed_now:
            deltas.attempts(claim.destination_id, IN_FLIGHT,
                            outcome_class(result.error, result.status_code))
    done = {r["id"] for r in (yield rows("finish_delivered",
                                         claims=_claim_keys([c for c, _, _ in items])))}
    if done:
        now = yield NOW
        for claim, _, _ in items:
            if claim.job_id in done:
                _delivered(deltas, claim, now)
    for destination_id in sorted({claim.destination_id for claim, _, _ in items}):
        yield count("destination_succeeded", destination_id=destination_id)
    return [claim.job_id in done for claim, _, _ in items]


def _delivered(deltas: MetricDeltas, claim: Claim, now: float) -> None:
    """Count a claim's job becoming done at `now` (running -> done, and its latency)."""
    deltas.jobs(claim.destination_id, "running", "done")
    if claim.received_at is not None:
        deltas.delivered(claim.destination_id, now - claim.received_at)


def _finish_one(claim: Claim, outcome: Outcome, result: AttemptResult,
                deltas: MetricDeltas) -> Tx[bool]:
    fence = {"job_id": claim.job_id, "lease_token": claim.lease_token}
    recorded = yield rows("record_attempt", lease_token=claim.lease_token,
                          started_at=result.started_at, duration_s=result.duration_s,
                          status_code=result.status_code, error=result.error,
                          response_excerpt=result.response_excerpt,
                          response_headers=result.response_headers, location=result.location)
    for r in recorded:  # a row already closed as lost keeps that outcome class
        if not r["was_lost"]:
            deltas.attempts(claim.destination_id, IN_FLIGHT,
                            outcome_class(result.error, result.status_code))
    if isinstance(outcome, Done):
        changed = yield count("finish_done", **fence)
        if changed == 1:
            _delivered(deltas, claim, (yield NOW))
    elif isinstance(outcome, Retry):  # due `delay_s` after now, on the store's clock
        changed = yield count("finish_retry", **fence, error=outcome.error,
                              delay_s=max(0.0, float(outcome.delay_s)))
        if changed == 1:
            deltas.jobs(claim.destination_id, "running", "pending")
    elif isinstance(outcome, Dead):
        changed = yield count("finish_dead", **fence, error=outcome.error)
        if changed == 1:
            deltas.jobs(claim.destination_id, "running", "dead")
    else:
        raise TypeError(f"unknown outcome {outcome!r}")
    return bool(changed == 1)


def _track_failure_run(claim: Claim, result: AttemptResult,
                       breaker: BreakerPolicy | None) -> Tx[None]:
    """Update the destination's failure run; pause it when the breaker says so."""
    if not is_failure(result):
        yield count("destination_succeeded", destination_id=claim.destination_id)
        return
    run = yield one("destination_failed", destination_id=claim.destination_id)
    if run is None or breaker is None or run["paused"]:
        return
    now = yield NOW
    reason = auto_pause_reason(result, run["url"], run["failure_streak"], run["failing_since"],
                               now, breaker)
    if reason is None or not (yield count("auto_pause", destination_id=claim.destination_id,
                                          reason=reason)):
        return
    name, streak = run["name"], run["failure_streak"]
    yield AfterCommit(lambda: log.warning("destination_auto_paused", destination=name,
                                          reason=reason, failure_streak=streak))


# -- helpers -------------------------------------------------------------------------------

def _due_of(offers: Mapping[int, int]) -> Tx[list[tuple[int, float, int, int, str]]]:
    """(job id, due since, attempts made, destination id, status) of the claimable jobs of
    the destinations in `offers` (destination id -> most jobs it offers), each one's oldest
    due first, in one query (due_jobs reads up to the largest offer of each; the rest is
    dropped here)."""
    if not offers:
        return []
    found = yield rows("due_jobs", limit=max(offers.values()), offers=Rows(
        ("destination_ids", "limits"), sorted(offers.items())))
    by_destination: dict[int, list[tuple[float, int, int, str]]] = {}
    for r in found:
        by_destination.setdefault(r["destination_id"], []).append(
            (r["due_at"], r["id"], r["attempts"], r["status"]))
    due = []
    for destination_id, jobs in by_destination.items():
        for due_at, job_id, attempts, status in sorted(jobs)[:offers[destination_id]]:
            due.append((job_id, due_at, attempts, destination_id, status))
    return due


def _ordered_due(destination_id: int, now: float) -> Tx[list[tuple[int, float, int, int, str]]]:
    """(job id, due since, attempts made, destination id, status) of an ordered
    destination's claimable job: only its oldest unfinished job, and only when that job is
    due (pending with run_at passed, or running with an expired lease)."""
    head = yield one("ordered_head", destination_id=destination_id)
    if head is None:
        return []
    if head["status"] == "pending" and head["run_at"] <= now:
        return [(head["id"], head["run_at"], head["attempts"], destination_id, "pending")]
    if head["status"] == "running" and head["lease_until"] <= now:
        return [(head["id"], head["lease_until"], head["attempts"], destination_id, "running")]
    return []


def _claim_from(row: Any, details: Any, worker: str, taken_over: bool, now: float) -> Claim:
    """A Claim from its leased job row and its claim_details row."""
    secrets: tuple[str, ...] = (details["secret"],)
    if details["previous_secret"] and (details["previous_secret_until"] or 0) > now:
        secrets += (details["previous_secret"],)
    return Claim(
        job_id=row["id"], event_id=row["event_id"], message_id=details["message_id"],
        event_type=details["type"], destination_id=row["destination_id"],
        destination_name=details["name"], url=details["url"], secret=details["secret"],
        body=bytes(details["body"]), attempt=row["attempts"], lease_token=row["lease_token"],
        lease_owner=worker, lease_until=row["lease_until"], taken_over=taken_over,
        secrets=secrets, timeout_s=details["timeout_s"],
        headers=parse_headers(details["headers"]),
        forwarded_headers=forwarding.decode(details["forwarded_headers"]),
        tenant_id=details["tenant_id"], received_at=details["received_at"])

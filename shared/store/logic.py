"""Every store transaction, written once for both backends (see :mod:`hookline.shared.store.ops`).

:class:`StoreLogic` implements the :class:`hookline.shared.store.Store` operations as generators of
named-query operations; a backend subclass supplies `_transact` (how one transaction is
driven), the connection, the clock, wake-ups and maintenance. The named queries of both
backends take the same parameters and return the same columns.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from hookline.shared.endpoint_models import Destination, Source
from hookline.shared.errors import ConfigError, DestinationMissing, NotFound
from hookline.shared.logs import get_logger
from hookline.shared.models import (
    DEFAULT_TENANT,
    Accepted,
    Claim,
    ClaimRequest,
    HandedBack,
    NewEvent,
    StoreResult,
)
from hookline.shared.operator_models import scope_tenant
from hookline.shared.policy import rules
from hookline.shared.policy.delivery import (
    BreakerPolicy,
)
from hookline.shared.policy.filters import check_filter
from hookline.shared.policy.notify import NotifyPolicy
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
from hookline.shared.store.catalogue_tx import CatalogueOperations
from hookline.shared.store.claim_tx import ClaimOperations
from hookline.shared.store.events_tx import EventOperations
from hookline.shared.store.fan_out_view import FanOutMemory
from hookline.shared.store.figures_tx import (
    destination_page_tx,
    fold_tx,
    recount_tx,
    shown_figures_tx,
    stats_tx,
)
from hookline.shared.store.filter_tx import FilterTestRow, filter_test_tx
from hookline.shared.store.finish_tx import (
    Items,
    extend_tx,
    finish_all,
    finish_tx,
    hand_back_tx,
    hand_back_unheld_tx,
)
from hookline.shared.store.ingest_tx import add_events_tx
from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.operator_tx import (
    bring_forward_tx,
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
    CHANGES_ORDERED,
    NOW,
    Query,
    Tx,
    count,
    one,
    retried_giving_way,
    rows,
)
from hookline.shared.store.tenant_counts_tx import TenantCounts
from hookline.shared.store.tenant_reads_tx import TenantReadOperations
from hookline.shared.store.tenants_tx import TenantOperations, add_destination_tx

T = TypeVar("T")
_NO_CAP = 2**31 - 1  # an attempt count no job reaches (see _due_work_exists)
log = get_logger()


class StoreLogic(ClaimOperations, EventOperations, TenantOperations, TenantCounts,
                 TenantReadOperations, CatalogueOperations):
    """The store operations once; subclasses drive transactions (see module docstring).

    `LOCKS_DESTINATIONS`: see :class:`ClaimOperations`. `FINISH_AND_CLAIM_TOGETHER`:
    finish_and_claim is one transaction (SQLite: one turn of the write lock and one fsync
    instead of two), or two, the finish first (PostgreSQL, whose writers do not queue on one lock).
    """

    FINISH_AND_CLAIM_TOGETHER = True
    SHARED_WRITE_LOCK = False
    """Every writer of the database takes one lock (SQLite): work that can be done before it
    is (shared/store/fan_out_view.py, refresh_fan_out)."""
    notify: NotifyPolicy = NotifyPolicy()
    """When operational events are made (store_for sets the Config's; shared/policy/notify.py)."""
    migrated_from: int | None = None
    """See :attr:`hookline.shared.store.Store.migrated_from`."""

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
        return await self._transact(add_events_tx(events, create_tenants=create_tenants,
                                                  memory=self.fan_out_memory,
                                                  shared_lock=self.SHARED_WRITE_LOCK),
                                    write=False)  # see BEGIN_WRITE

    @functools.cached_property
    def fan_out_memory(self) -> FanOutMemory:
        """This store's remembered fan-out answers (shared/store/fan_out_view.py)."""
        return FanOutMemory()

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
        """Whether a job is claimable now (asked when a waiter starts listening, since work
        committed before it listened woke nobody): claim_probe's walk, its at-cap clause
        left out by an attempt cap no job reaches."""
        found = await self._transact(_single(one("claim_probe", max_attempts=_NO_CAP)),
                                     write=False)
        return bool(found["claimable"])

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

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        """See :meth:`hookline.shared.store.Store.extend`."""
        if not claims:
            return []
        kept = await self._transact(extend_tx(claims, lease_s), write=True)
        return [c for c in claims if c.lease_token not in kept]

    async def finish(self, items: Items, breaker: BreakerPolicy | None = None) -> list[bool]:
        """See :meth:`hookline.shared.store.Store.finish`."""
        return await self._transact(finish_tx(items, breaker, self.notify), write=True)

    async def finish_and_claim(self, items: Items, breaker: BreakerPolicy | None,
                               request: ClaimRequest
                               ) -> tuple[list[bool], list[Claim], bool]:
        """See :meth:`hookline.shared.store.Store.finish_and_claim` (one transaction or two: see the
        class docstring; either way the results are committed before a claim is returned)."""
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
        kept = yield from finish_all(items, breaker, deltas, self.notify)
        claimed: tuple[list[Claim], bool] = ([], False)
        if request.limit > 0:
            claimed = yield from self._claim_in(request, deltas)
        yield from deltas.apply()  # one statement for the finishes and the claim
        return kept, *claimed

    async def hand_back(self, claims: Sequence[Claim]) -> int:
        """See :meth:`hookline.shared.store.Store.hand_back`."""
        if not claims:
            return 0
        return await self._transact(hand_back_tx(claims), write=True)

    async def hand_back_unheld(self, worker: str, tag: str, newer_than: str,
                               held: Sequence[str]) -> list[HandedBack]:
        """See :meth:`hookline.shared.store.Store.hand_back_unheld`."""
        return await self._transact(hand_back_unheld_tx(worker, tag, newer_than, held),
                                    write=True)

    # -- destinations ----------------------------------------------------------------------

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
        """See :meth:`hookline.shared.store.Store.add_destination`."""
        new = rules.new_destination(name=name, url=url, secret=secret, event_types=event_types,
                                    max_in_flight=max_in_flight, headers=headers,
                                    timeout_s=timeout_s, rate_limit_per_s=rate_limit_per_s,
                                    ordered=ordered, filter=filter,
                                    propagate_trace=propagate_trace)
        query = Query("insert_destination", {
            "tenant": tenant, "name": new.name, "url": new.url, "secret": new.secret,
            "max_in_flight": new.max_in_flight, "event_types": json.dumps(new.event_types),
            "headers": json.dumps(new.headers), "timeout_s": new.timeout_s,
            "rate_limit_per_s": new.rate_limit_per_s, "ordered": int(new.ordered),
            "filter": None if new.filter is None else json.dumps(new.filter),
            "propagate_trace": int(new.propagate_trace)},
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
            raise DestinationMissing(name, tenant)
        return Destination.from_row(row)

    async def set_paused(self, name: str, paused: bool, reason: str | None = None, *,
                         tenant: str = DEFAULT_TENANT) -> int:
        """See :meth:`hookline.shared.store.Store.set_paused` (a resume wakes waiting workers;
        a backlog past one selection is brought forward in transactions of its own)."""
        total, more = await self._transact(
            set_paused_tx(tenant, name, paused, reason, self.notify), write=True)
        while more:
            count, more = await self._transact(bring_forward_tx(tenant, name), write=True)
            total += count
        return total

    async def rotate_secret(self, name: str, new_secret: str, overlap_s: float, *,
                            tenant: str = DEFAULT_TENANT) -> Destination:
        """See :meth:`hookline.shared.store.Store.rotate_secret`."""
        secret, overlap = rules.destination_secret(new_secret), rules.rotation_overlap(overlap_s)
        return Destination.from_row(await self._transact(
            rotate_tx(tenant, name, secret, overlap, self.notify), write=True))

    async def expire_previous_secret(self, name: str, *,
                                     tenant: str = DEFAULT_TENANT) -> tuple[Destination, bool]:
        """See :meth:`hookline.shared.store.Store.expire_previous_secret`."""
        row, expired = await self._transact(expire_previous_tx(tenant, name), write=True)
        return Destination.from_row(row), expired

    async def update_destination(self, name: str, *, tenant: str = DEFAULT_TENANT,
                                 **changes: Any) -> Destination:
        """See :meth:`hookline.shared.store.Store.update_destination`."""
        values = rules.destination_changes(changes)
        query = _update_destination_query(values, tenant, name)
        if values.get("ordered"):  # turning ordered marks the destination's jobs
            others = {k: v for k, v in values.items() if k != "ordered"}
            tx = _turn_ordered_tx(query, _update_destination_query(others, tenant, name)
                                  if others else None, tenant, name)
        else:  # turning unordered is the row alone
            tx = _single(query)
        row = await self._transact(tx, write=True)
        if row is None:
            raise DestinationMissing(name, tenant)
        return Destination.from_row(row)

    async def filter_test(self, name: str, *, tenant: str = DEFAULT_TENANT,
                          filter: Mapping[str, Any] | None = None, use_stored: bool = True,
                          last: int = 50) -> list[FilterTestRow]:
        """See :meth:`hookline.shared.store.Store.filter_test`."""
        dest = await self.get_destination(name, tenant=tenant)
        value = dest.filter if use_stored else check_filter(filter)
        return await self._transact(filter_test_tx(tenant, dest.event_types, value,
                                                   max(1, int(last))), write=False)

    async def remove_destination(self, name: str, *, tenant: str = DEFAULT_TENANT) -> int:
        """See :meth:`hookline.shared.store.Store.remove_destination`."""
        return await retried_giving_way(functools.partial(self._transact, write=True),
                                        lambda: remove_destination_tx(tenant, name))

    # -- operator views and controls -------------------------------------------------------

    async def list_jobs(self, status: str | None = None, limit: int = 100, *,
                        tenant: str | None = None, before_id: int | None = None) -> list[Job]:
        """See :meth:`hookline.shared.store.Store.list_jobs`."""
        found = await self._transact(_single(rows("list_jobs", status=status, limit=limit,
                                                  tenant=tenant, before=before_id)),
                                     write=False)
        return [Job.from_row(r) for r in found]

    async def list_attempts(self, job_id: int | None = None, limit: int = 10_000) -> list[Attempt]:
        """See :meth:`hookline.shared.store.Store.list_attempts`."""
        found = await self._transact(_single(rows("list_attempts", job_id=job_id,
                                                  limit=limit)), write=False)
        return [Attempt.from_row(r) for r in found]

    async def list_dead(self, destination: str | None = None, since_s: float | None = None,
                        limit: int = 100, *, tenant: str | None = None,
                        before_id: int | None = None) -> list[DeadLetter]:
        """See :meth:`hookline.shared.store.Store.list_dead`."""
        return await self._transact(list_dead_tx(
            destination, None if since_s is None else float(since_s), limit,
            scope_tenant(destination, tenant), before_id), write=False)

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

    async def stats(self, tenant: str = DEFAULT_TENANT) -> Stats:
        """See :meth:`hookline.shared.store.Store.stats` (ages by the store's clock)."""
        await self.fold_metric_deltas()
        return await self._transact(stats_tx(tenant), write=False)

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
        return await self._transact(fold_tx(), write=True)

    async def recount_metrics(self) -> list[GaugeCorrection]:
        """See :meth:`hookline.shared.store.Store.recount_metrics`."""
        return await self._transact(recount_tx(), write=False)

    # -- dashboard views -------------------------------------------------------------------

    async def destination_summaries(self, *, latency_window_s: float = 900.0,
                                    latency_scan_limit: int = 20_000,
                                    tenant: str | None = None) -> list[DestinationSummary]:
        """See :meth:`hookline.shared.store.Store.destination_summaries` (the store's clock)."""
        return await self._transact(summaries_tx(float(latency_window_s),
                                                  int(latency_scan_limit), tenant), write=False)

    async def throughput(self, *, window_s: float, bucket_s: int = 60,
                         failed_scan_limit: int = 100_000) -> list[ThroughputBucket]:
        """See :meth:`hookline.shared.store.Store.throughput` (the store's clock)."""
        rules.throughput_args(window_s, bucket_s)
        return await self._transact(throughput_tx(window_s, bucket_s, int(failed_scan_limit)),
                                    write=False)

    async def event_body(self, job_id: int, max_bytes: int, *,
                         tenant: str | None = None) -> EventBody:
        """See :meth:`hookline.shared.store.Store.event_body`."""
        row = await self._transact(_single(one("event_body_of_job", job_id=job_id,
                                               max_bytes=max(1, int(max_bytes)),
                                               tenant=tenant)), write=False)
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


def _update_destination_query(values: Mapping[str, Any], tenant: str, name: str) -> Query:
    """The UPDATE of a live destination's `values` (validated columns), returning its row."""
    # Column names come only from the validated DESTINATION_UPDATERS keys, never input.
    assignments = ", ".join(f"{column} = :{column}" for column in values)
    sql = (f"UPDATE destinations SET {assignments} "  # noqa: S608  (columns from DESTINATION_UPDATERS keys only)
           "WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL RETURNING *")
    params = {k: json.dumps(v if isinstance(v, dict) else list(v))
              if isinstance(v, list | tuple | dict) else v for k, v in values.items()}
    return Query("update_destination", {**params, "tenant": tenant, "name": name},
                 want="one", sql=sql)


def _turn_ordered_tx(update: Query, others: Query | None, tenant: str, name: str) -> Tx[Any]:
    """A destination's new settings with `ordered` true (`update`; `others`: the same
    without `ordered`, None when nothing else changes); its row, or None when it is not
    live.

    Already ordered, its unfinished jobs are marked: `others` alone, or the row as it is,
    without the guard (a turn-off committed meanwhile stands). Otherwise, under the
    exclusive guard (ops.OrderedMarks), which keeps jobs from being written until this
    commits, it reads the destination again and, still unordered, marks its unfinished
    jobs (jobs.ordered, read by ordered_head), then writes `update`. The jobs are marked
    before the destination's row is written, as a finish writes its jobs before its
    destinations; a lock cycle the change is in anyway (a claim's kill_lost_at_cap, an
    operational event written under a claim's or finish's locks) ends when its waits reach
    the store's `give_way_lock_timeout_s` (StoreBusy: nothing changed). (Turning
    unordered needs none of this: a mark left on an unordered destination's job is never
    read.)"""
    current = yield one("get_destination", tenant=tenant, name=name)
    if current is not None and current["ordered"]:
        return current if others is None else (yield others)
    yield CHANGES_ORDERED
    current = yield one("get_destination", tenant=tenant, name=name)
    if current is not None and not current["ordered"]:
        yield count("mark_ordered_jobs", destination_id=current["id"])
    return (yield update)


def log_migrated(from_version: int, to_version: int, database: str) -> None:
    """Log `schema_migrated`: a store's open moved an existing database's schema forward
    (from_version and to_version: schema numbers; database: a path or a redacted URL)."""
    get_logger().info("schema_migrated", from_version=from_version, to_version=to_version,
                      database=database)

"""The operator's event lookup, event listing, resend and retry now: transactions written
once as generators of :mod:`hookline.shared.store.ops` operations, and the :class:`EventOperations`
mixin that gives :class:`hookline.shared.store.logic.StoreLogic` their methods."""

from __future__ import annotations

from typing import Any, TypeVar

from hookline.shared.errors import Conflict, NotFound
from hookline.shared.models import DEFAULT_TENANT, FINISHED_STATUSES
from hookline.shared.operator_models import (
    SAMPLE_IDS,
    BulkResult,
    EventFilter,
    EventMatch,
    EventRecord,
    EventRef,
    JobSelection,
    parse_event_ref,
    scope_tenant,
)
from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.ops import NOTIFY, WRITES_JOBS, Query, Tx, one, rows
from hookline.shared.tenant_views import SHOWN_TENANTS, listed_tenants

T = TypeVar("T")


class EventOperations:
    """Store methods for finding events and resending or hurrying their jobs (see
    :class:`hookline.shared.store.Store`); the backend supplies `_transact`."""

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive `tx` as one transaction (the backend's)."""
        raise NotImplementedError

    async def find_event(self, ref: str, source: str | None = None, *,
                         tenant: str | None = None) -> EventMatch:
        """See :meth:`hookline.shared.store.Store.find_event`."""
        return await self._transact(find_event_tx(parse_event_ref(ref, source), tenant),
                                    write=False)

    async def list_events(self, flt: EventFilter) -> list[EventRecord]:
        """See :meth:`hookline.shared.store.Store.list_events`."""
        return await self._transact(list_events_tx(flt.check()), write=False)

    async def resend(self, selection: JobSelection, *, dry_run: bool = False) -> BulkResult:
        """See :meth:`hookline.shared.store.Store.resend`."""
        return await self._transact(resend_tx(selection.check(resend=True), dry_run),
                                    write=not dry_run)

    async def retry_now(self, selection: JobSelection, *, dry_run: bool = False) -> BulkResult:
        """See :meth:`hookline.shared.store.Store.retry_now`."""
        return await self._transact(retry_now_tx(selection.check(resend=False), dry_run),
                                    write=not dry_run)


def scoped(name: str, tenant: str | None, *, want: str = "all", **params: Any) -> Query:
    """The named query over every tenant (`tenant` None: the operator's view), or its
    `tenant_` twin, which takes `tenant` as a required SQL parameter and reads that tenant's
    rows only (the tenant API's isolation is in the query, not a filter afterwards)."""
    if tenant is None:
        return Query(name, params, want=want)
    return Query(f"tenant_{name}", {**params, "tenant": tenant}, want=want)


def find_event_tx(ref: EventRef, tenant: str | None = None) -> Tx[EventMatch]:
    """The event `ref` names (its candidates in order; of `tenant` only, unless None: then
    internal and webhook ids of every tenant, a sender's id in the default tenant, else in
    the one other tenant that has it), with its jobs.

    Raises:
        NotFound: no such event; or, with `tenant` None, a sender's id that the default
            tenant has not and several others have (the message names them)."""
    found: Any = None
    matched: Any = None
    if ref.internal_id is not None:
        found = yield scoped("find_event_by_id", tenant, want="one", event_id=ref.internal_id)
        matched = "id"
    if found is None and ref.message_id is not None:
        found = yield scoped("find_event_by_message_id", tenant, want="one",
                             message_id=ref.message_id)
        matched = "message_id"
    if found is None:
        # Sender's ids repeat across tenants: this one is looked up within one.
        found = yield one("find_event_by_source_id", tenant=tenant or DEFAULT_TENANT,
                          source=ref.source, source_event_id=ref.text)
        matched = "source_event_id"
    if found is None and tenant is None:
        # The operator's view: another tenant's event, when only one tenant has that id.
        others = list((yield rows("tenants_with_source_id", source=ref.source,
                                  source_event_id=ref.text, tenant=DEFAULT_TENANT,
                                  limit=SHOWN_TENANTS)))
        if len(others) == 1 and others[0]["total"] == 1:
            found = yield one("find_event_by_source_id", tenant=others[0]["tenant_id"],
                              source=ref.source, source_event_id=ref.text)
        elif others:
            listed = listed_tenants([r["tenant_id"] for r in others], others[0]["total"])
            raise NotFound(f"no event with {ref.describe()} in the default tenant's events; "
                           f"tenants {listed} have one: name the tenant (--tenant, tenant= "
                           "or the dashboard's Tenant box)")
    if found is None:
        raise NotFound(f"no event with {ref.describe()}" + (
            f" in tenant {tenant}'s events" if tenant is not None else " in any tenant"))
    jobs = yield rows("event_jobs", event_id=found["id"])
    return EventMatch(event=EventRecord.from_rows(found, jobs), matched_by=matched)


def list_events_tx(flt: EventFilter) -> Tx[list[EventRecord]]:
    """Events newest first per `flt`, each with its jobs."""
    found = yield rows("list_events", destination=flt.destination,
                       tenant=scope_tenant(flt.destination, flt.tenant), status=flt.status,
                       type=flt.type, since=flt.since_s, until=flt.until_s,
                       before=flt.before_id, limit=flt.limit)
    if not found:
        return []
    jobs: dict[int, list[Any]] = {}
    for job in (yield rows("jobs_of_events", event_ids=[r["id"] for r in found])):
        jobs.setdefault(job["event_id"], []).append(job)
    return [EventRecord.from_rows(r, jobs.get(r["id"], [])) for r in found]


def resend_tx(sel: JobSelection, dry_run: bool) -> Tx[BulkResult]:
    """Done or dead jobs back to pending, due now, with a fresh attempt budget."""
    if sel.job_id is not None:
        check_resendable(sel.job_id, (yield scoped("replay_job_state", sel.tenant, want="one",
                                                   job_id=sel.job_id)))
    found = yield rows(
        "resend_candidates", job_id=sel.job_id, destination=sel.destination,
        tenant=scope_tenant(sel.destination, sel.tenant),
        status=sel.status, since=sel.since_s, until=sel.until_s, limit=sel.limit + 1)
    yield WRITES_JOBS  # resend_jobs gives each its destination's `ordered` now
    return (yield from _apply("resend_jobs", found, sel.limit, dry_run))


def retry_now_tx(sel: JobSelection, dry_run: bool) -> Tx[BulkResult]:
    """Pending jobs not yet due become due now (their attempt count is kept)."""
    if sel.job_id is not None:
        state = yield scoped("replay_job_state", sel.tenant, want="one", job_id=sel.job_id)
        if state is None:
            raise NotFound(f"no job with id {sel.job_id}")
        if state["status"] != "pending":
            raise Conflict(f"job {sel.job_id} is {state['status']}, not pending; only a "
                           "pending job's next attempt can be brought forward"
                           + ("; resend it instead" if state["status"] in FINISHED_STATUSES
                              else ""))
    found = yield rows(
        "retry_now_candidates", job_id=sel.job_id, destination=sel.destination,
        tenant=scope_tenant(sel.destination, sel.tenant),
        since=sel.since_s, until=sel.until_s, limit=sel.limit + 1)
    return (yield from _apply("retry_now_jobs", found, sel.limit, dry_run))


def _apply(query: str, found: list[Any], limit: int, dry_run: bool) -> Tx[BulkResult]:
    """Run the update `query` on the first `limit` of the candidate rows `found` (id,
    status, destination_id; unless `dry_run`), making them pending and waking workers;
    `found` holds one more than `limit` when more jobs matched."""
    more = len(found) > limit
    chosen = [r["id"] for r in found[:limit]]
    candidate = {r["id"]: r for r in found[:limit]}
    changed = len(chosen)
    if chosen and not dry_run:
        updated = yield rows(query, job_ids=chosen)
        deltas = MetricDeltas()  # candidates read in this transaction: their status holds
        for r in updated:
            was = candidate[r["id"]]
            deltas.jobs(was["destination_id"], was["status"], "pending")
            deltas.pending_moved(was["destination_id"])
        yield from deltas.apply()
        changed = len(updated)
        if changed:
            yield NOTIFY
    return BulkResult(count=changed, job_ids=tuple(chosen[:SAMPLE_IDS]), more=more,
                      dry_run=dry_run)


def check_resendable(job_id: int, row: Any) -> None:
    """Raise NotFound or Conflict when one job cannot be resent (see Store.resend)."""
    if row is None:
        raise NotFound(f"no job with id {job_id}")
    if row["status"] not in FINISHED_STATUSES:
        raise Conflict(f"job {job_id} is {row['status']}: it has not finished, so it cannot "
                       "be resent; use retry now to bring its next attempt forward")
    if row["body_purged_at"] is not None:
        raise Conflict(f"job {job_id} cannot be resent: its event body was purged by "
                       "retention")
    if row["deleted_at"] is not None:
        raise Conflict(f"job {job_id} cannot be resent: its destination was removed")

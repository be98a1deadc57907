"""The tenant API's own store transactions, written once as generators of
:mod:`hookline.shared.store.ops` operations, and the :class:`TenantReadOperations` mixin that
gives :class:`hookline.shared.store.logic.StoreLogic` their methods: the tenant token key and
a tenant's token state, a tenant's jobs, whether it has a destination of a name, a
destination's delivery figures, a test delivery, and the event types a tenant's portal offers.

Every query here that reads tenant rows takes the tenant as a required SQL parameter (a
destination is found by (tenant, name) first), so another tenant's rows are never read.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, TypeVar

from hookline.shared.endpoint_models import subscribes
from hookline.shared.errors import DestinationMissing, InvalidInput, StoreError
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.policy import forwarding
from hookline.shared.record_models import Job
from hookline.shared.signing import new_message_ids
from hookline.shared.store.catalogue_tx import list_event_types_tx
from hookline.shared.store.jobs_tx import insert_jobs_tx
from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.ops import BEGIN_WRITE, NOTIFY, NOW, Query, Rows, Tx, one, rows

T = TypeVar("T")
TEST_EVENT_TYPE = "hookline.ping"
"""The type of a test delivery's event when no other is chosen (:func:`choose_test_payload_tx`)."""
TEST_SOURCE = "_test"
"""The source of test events (a `_` name no configured source can have)."""
STATS_SCAN_LIMIT = 10_000
"""A destination's figures are taken over at most its newest this many attempts."""
EVENT_TYPES_SCAN = 10_000
"""The event-type list reads the types of a tenant's newest this many events."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantTokenState:
    """What checking a tenant token needs from the store, read in one query.

    Attributes:
        now_s: the store's time now, unix seconds (tokens expire on this clock).
        exists: the tenant exists.
        disabled: it is disabled (its tokens stop working).
        token_epoch: its current epoch (None when it does not exist).
    """

    now_s: float
    exists: bool
    disabled: bool
    token_epoch: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationStats:
    """A destination's state and delivery figures over a window.

    Attributes:
        window_s: the window, seconds back from `now_s` (the store's clock).
        in_flight, pending, dead: its jobs now (leases not expired; waiting; dead).
        oldest_pending_at: run_at of its longest-waiting due job (None: none due).
        attempts: finished attempts started in the window (a lost worker's or a hand-back
            is no outcome), at most STATS_SCAN_LIMIT (`sampled` says so).
        delivered: those that got a 2xx.
        success_rate: delivered / attempts (None without attempts).
        p50_s, p99_s: nearest-rank percentiles of their durations, seconds.
        last_failure: the newest failed attempt in the window: job_id, started_at,
            status_code, error, response_excerpt (None: no failure).
    """

    name: str
    window_s: float
    now_s: float
    in_flight: int
    pending: int
    dead: int
    oldest_pending_at: float | None
    attempts: int
    delivered: int
    success_rate: float | None
    p50_s: float | None
    p99_s: float | None
    last_failure: dict[str, Any] | None
    sampled: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TestDelivery:
    """The event and the one job a test delivery stored."""

    event_id: int
    message_id: str
    job_id: int
    destination: str
    type: str


class TenantReadOperations:
    """Store methods for the tenant API (see :class:`hookline.shared.store.Store`); the
    backend supplies `_transact`."""

    _token_keys: dict[str, bytes]

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive `tx` as one transaction (the backend's)."""
        raise NotImplementedError

    async def token_signing_key(self, purpose: str) -> bytes:
        """See :meth:`hookline.shared.store.Store.token_signing_key` (kept once read: a
        purpose's key never changes)."""
        cache = self.__dict__.setdefault("_token_keys", {})
        if purpose not in cache:
            found = await self._transact(_key_tx(purpose, read_only=True), write=False)
            if found is None:
                found = await self._transact(_key_tx(purpose, read_only=False), write=True)
            if found is None:  # cannot happen: the insert-or-skip left a row
                raise StoreError(f"no {purpose} signing key after making one")
            cache[purpose] = bytes.fromhex(found)
        key: bytes = cache[purpose]
        return key

    async def tenant_token_state(self, tenant: str) -> TenantTokenState:
        """See :meth:`hookline.shared.store.Store.tenant_token_state`."""
        row = await self._transact(_one(one("tenant_token_state", tenant=tenant)), write=False)
        return TenantTokenState(now_s=float(row["now"]), exists=row["id"] is not None,
                                disabled=bool(row["disabled"]),
                                token_epoch=None if row["token_epoch"] is None
                                else int(row["token_epoch"]))

    async def list_tenant_jobs(self, tenant: str, *, destination: str | None = None,
                               status: str | None = None, before_id: int | None = None,
                               limit: int = 100) -> list[Job]:
        """See :meth:`hookline.shared.store.Store.list_tenant_jobs`."""
        found = await self._transact(_one(rows(
            "tenant_list_jobs", tenant=tenant, destination=destination, status=status,
            before=before_id, limit=limit)), write=False)
        return [Job.from_row(r) for r in found]

    async def has_destination(self, name: str, *, tenant: str) -> bool:
        """See :meth:`hookline.shared.store.Store.has_destination`."""
        found = await self._transact(_one(one("tenant_has_destination", tenant=tenant,
                                              name=name)), write=False)
        return found is not None

    async def destination_stats(self, name: str, *, tenant: str,
                                window_s: float) -> DestinationStats:
        """See :meth:`hookline.shared.store.Store.destination_stats`."""
        return await self._transact(_stats_tx(tenant, name, float(window_s)), write=False)

    async def send_test_event(self, name: str, *, tenant: str,
                              event_type: str | None = None) -> TestDelivery:
        """See :meth:`hookline.shared.store.Store.send_test_event`."""
        return await self._transact(_test_delivery_tx(tenant, name, event_type), write=False)

    async def tenant_event_types(self, tenant: str) -> list[str]:
        """See :meth:`hookline.shared.store.Store.tenant_event_types`."""
        return await self._transact(_event_types_tx(tenant), write=False)


def _one(query: Query) -> Tx[Any]:
    return (yield query)


def _key_tx(purpose: str, *, read_only: bool) -> Tx[str | None]:
    """The purpose's key (hex); unless `read_only`, made first when there is none. Two
    processes making it at once both insert-or-skip, then read the one that won."""
    if not read_only:
        yield Query("insert_signing_key", {"purpose": purpose, "key": secrets.token_hex(32)},
                    want="count")
    row = yield one("signing_key", purpose=purpose)
    return None if row is None else str(row["key"])


def _destination(tenant: str, name: str) -> Tx[Any]:
    row = yield one("get_destination", tenant=tenant, name=name)
    if row is None:
        raise DestinationMissing(name, tenant)
    return row


def _stats_tx(tenant: str, name: str, window_s: float) -> Tx[DestinationStats]:
    now = yield NOW
    dest = yield from _destination(tenant, name)
    counts = yield one("destination_job_counts", destination_id=dest["id"])
    recent = yield rows("destination_recent_attempts", destination_id=dest["id"],
                        since=float(now - window_s), limit=STATS_SCAN_LIMIT)
    durations = sorted(float(r["duration_s"]) for r in recent)
    delivered = sum(1 for r in recent if _delivered(r["status_code"]))
    failure = next((r for r in recent if not _delivered(r["status_code"])), None)
    return DestinationStats(
        name=dest["name"], window_s=window_s, now_s=float(now),
        in_flight=int(counts["in_flight"]), pending=int(counts["pending"]),
        dead=int(counts["dead"]), oldest_pending_at=counts["oldest_pending_at"],
        attempts=len(recent), delivered=delivered,
        success_rate=delivered / len(recent) if recent else None,
        p50_s=_nearest_rank(durations, 50), p99_s=_nearest_rank(durations, 99),
        last_failure=None if failure is None else {
            k: failure[k] for k in ("job_id", "started_at", "status_code", "error",
                                    "response_excerpt")},
        sampled=len(recent) >= STATS_SCAN_LIMIT)


def _delivered(status_code: int | None) -> bool:
    return status_code is not None and 200 <= status_code <= 299


def _nearest_rank(ordered: list[float], percent: int) -> float | None:
    """The nearest-rank percentile of sorted values (as the dashboard's latency query)."""
    if not ordered:
        return None
    return ordered[(len(ordered) * percent + 99) // 100 - 1]


@dataclass(frozen=True, slots=True, kw_only=True)
class TestPayload:
    """What a test delivery sends: the event's type and its `data`."""

    type: str
    data: Any


def choose_test_payload_tx(destination: Any, event_type: str | None) -> Tx[TestPayload]:
    """THE choice of a test delivery's payload (the one place to change it).

    The event-type catalogue's example of a type the destination subscribes to: of
    `event_type` when given, else of the first such type by name that has an example (an
    archived type is never chosen; a type's example of its latest version that has one).
    Without one: `event_type` (or `hookline.ping`) with data naming the destination.

    Args:
        destination: the destination's row (`name`, `event_types` JSON text, `tenant_id`).
        event_type: the type asked for (`--type`), checked already; None: choose one.

    Returns:
        The type and the data to send.
    """
    patterns = json.loads(destination["event_types"])
    for known in (yield from list_event_types_tx()):
        if known.archived or not known.examples or not subscribes(patterns, known.name):
            continue
        if event_type is None or known.name == event_type:
            return TestPayload(type=known.name, data=known.examples[max(known.examples)])
    return TestPayload(type=event_type or TEST_EVENT_TYPE,
                       data={"destination": destination["name"],
                             "note": "a test delivery from hookline"})


def _test_delivery_tx(tenant: str, name: str, event_type: str | None) -> Tx[TestDelivery]:
    """A test event of `tenant` (source `_test`, `"test": true` in its body, and `tenant`
    unless it is the default tenant's, as in a published event's) and one job for
    its destination `name` only (not fanned out, no payload filter), in one transaction;
    workers are woken after the commit. A paused destination's job waits for its resume, as
    any other. Raises NotFound; InvalidInput("type") when `event_type` is not one the
    destination subscribes to."""
    now = yield NOW
    [message_id] = new_message_ids(1, now)
    source_event_id = "test_" + secrets.token_hex(8)
    yield BEGIN_WRITE
    dest = yield from _destination(tenant, name)
    if event_type is not None and not subscribes(json.loads(dest["event_types"]), event_type):
        raise InvalidInput("type", f"destination {name!r} does not subscribe to "
                                   f"{event_type!r}")
    payload = yield from choose_test_payload_tx(dest, event_type)
    # Shaped like an event published for the tenant: `tenant` too, unless the default's.
    envelope = {"type": payload.type, "id": source_event_id, "data": payload.data,
                **({} if tenant == DEFAULT_TENANT else {"tenant": tenant}), "test": True}
    body = json.dumps(envelope, separators=(",", ":")).encode()
    [event] = yield Query("insert_event", {"events": Rows(
        ("message_id", "tenant_id", "source", "source_event_id", "type", "body",
         "forwarded_headers", "trace_context", "schema_problem"),
        [(message_id, tenant, TEST_SOURCE, source_event_id, payload.type, body,
          forwarding.encode(()), None, None)])}, per_row=True)
    deltas = MetricDeltas()  # the figures /metrics reads, as ingest keeps them
    written = yield from insert_jobs_tx([(event["id"], dest["id"])], deltas)
    if not written:  # removed since it was read (PostgreSQL): nothing is kept
        raise DestinationMissing(name, tenant)
    [job] = written
    deltas.events(1)
    yield from deltas.apply()
    yield NOTIFY
    return TestDelivery(event_id=int(event["id"]), message_id=str(event["message_id"]),
                        job_id=int(job["id"]), destination=name, type=payload.type)


def _event_types_tx(tenant: str) -> Tx[list[str]]:
    """The types of the tenant's newest events and its destinations' subscription patterns,
    sorted, each once."""
    seen = {r["type"] for r in (yield rows("tenant_event_types", tenant=tenant,
                                           limit=EVENT_TYPES_SCAN))}
    seen |= {r["pattern"] for r in (yield rows("tenant_subscription_patterns", tenant=tenant))}
    return sorted(seen)

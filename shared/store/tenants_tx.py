"""Tenant transactions (create-or-update, read, list, delete, token revocation), written once
as generators of :mod:`hookline.shared.store.ops` operations, and the :class:`TenantOperations`
mixin that gives :class:`hookline.shared.store.logic.StoreLogic` their methods."""

from __future__ import annotations

import functools
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hookline.shared.errors import Conflict, NotFound
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.policy import inputs
from hookline.shared.store.operator_tx import kill_jobs_of_destination_tx
from hookline.shared.store.ops import GIVE_WAY, Query, Tx, count, one, retried_giving_way, rows
from hookline.shared.tenant_models import Tenant, TenantFields, tenant_id

T = TypeVar("T")
MAX_TENANT_PAGE = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantRemoval:
    """What deleting a tenant removes (or would, for a dry run).

    Attributes:
        destinations: its live destinations, removed (names freed, history kept).
        unfinished_jobs: their pending and running jobs, which end dead.
    """

    tenant: str
    destinations: int
    unfinished_jobs: int
    dry_run: bool


class TenantOperations:
    """Store methods for tenants (see :class:`hookline.shared.store.Store`); the backend
    supplies `_transact`."""

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive `tx` as one transaction (the backend's)."""
        raise NotImplementedError

    async def put_tenant(self, tenant: str, fields: TenantFields) -> tuple[Tenant, bool]:
        """See :meth:`hookline.shared.store.Store.put_tenant`."""
        checked = tenant_id(tenant, field="id")
        return await self._transact(_put_tenant_tx(checked, fields), write=True)

    async def get_tenant(self, tenant: str) -> Tenant:
        """See :meth:`hookline.shared.store.Store.get_tenant`."""
        row, history_kept = await self._transact(_get_tenant_tx(tenant), write=False)
        if row is None and not history_kept:
            raise NotFound(f"no tenant {inputs.clip(tenant)!r}")
        if row is None:
            # Its events, jobs and attempts stay until retention: say how to reach them (what
            # asks for a live tenant is a change, its destinations or its stats).
            raise NotFound(f"no tenant {inputs.clip(tenant)!r}: it was deleted, so it has no "
                           "destinations or stats and nothing can be changed for it; its "
                           "events and jobs are kept until "
                           "retention, read-only: the dead letter, job and event listings "
                           "filtered by this tenant still show them")
        return Tenant.from_row(row)

    async def tenant_was_deleted(self, tenant: str) -> bool:
        """See :meth:`hookline.shared.store.Store.tenant_was_deleted`."""
        row, history_kept = await self._transact(_get_tenant_tx(tenant), write=False)
        if row is None and not history_kept:
            raise NotFound(f"no tenant {inputs.clip(tenant)!r}")  # as get_tenant says it
        return row is None

    async def deleted_tenants(self, tenants: Sequence[str]) -> set[str]:
        """See :meth:`hookline.shared.store.Store.deleted_tenants`."""
        if not tenants:
            return set()
        return await self._transact(_deleted_tenants_tx(list(dict.fromkeys(tenants))),
                                    write=False)

    async def list_tenants(self, *, after: str | None = None, prefix: str | None = None,
                           limit: int = 100) -> list[Tenant]:
        """See :meth:`hookline.shared.store.Store.list_tenants`."""
        size = inputs.whole_number("limit", limit, high=MAX_TENANT_PAGE)
        found = await self._transact(_one_tx(rows("list_tenants", after=after, prefix=prefix,
                                                  limit=size)), write=False)
        return [Tenant.from_row(r) for r in found]

    async def delete_tenant(self, tenant: str, *, dry_run: bool = False) -> TenantRemoval:
        """See :meth:`hookline.shared.store.Store.delete_tenant`."""
        if tenant == DEFAULT_TENANT:
            raise Conflict("the default tenant cannot be deleted")
        return await retried_giving_way(functools.partial(self._transact, write=not dry_run),
                                        lambda: _delete_tenant_tx(tenant, dry_run))

    async def revoke_tenant_tokens(self, tenant: str) -> Tenant:
        """See :meth:`hookline.shared.store.Store.revoke_tenant_tokens`."""
        row = await self._transact(_one_tx(one("revoke_tenant_tokens", id=tenant,
                                               epoch=new_token_epoch())), write=True)
        if row is None:
            raise NotFound(f"no tenant {inputs.clip(tenant)!r}")
        return Tenant.from_row(row)


def new_token_epoch() -> int:
    """A fresh token epoch: random (62 bits), so it never repeats a tenant's earlier one."""
    return secrets.randbits(62)


def _one_tx(query: Query) -> Tx[Any]:
    return (yield query)


def _get_tenant_tx(tenant: str) -> Tx[tuple[Any, bool]]:
    """(the tenant's row or None, whether a deleted tenant's history is kept under that id
    when there is no row)."""
    row = yield one("get_tenant", id=tenant)
    if row is not None:
        return row, False
    return None, bool((yield one("tenant_history", id=tenant))["kept"])


def _deleted_tenants_tx(tenants: list[str]) -> Tx[set[str]]:
    # One indexed read per id: the callers pass a message's few ids (at most 100).
    deleted: set[str] = set()
    for tenant in tenants:
        if (yield one("get_tenant", id=tenant)) is None:
            deleted.add(tenant)
    return deleted


def _put_tenant_tx(tenant: str, fields: TenantFields) -> Tx[tuple[Tenant, bool]]:
    # Locked: a DELETE committed between this read and the upsert would otherwise let the
    # upsert insert the tenant afresh, past the history check (PostgreSQL, READ COMMITTED).
    existed = (yield one("lock_tenant", id=tenant)) is not None
    if (not existed and not fields.adopt_history
            and (yield one("tenant_history", id=tenant))["kept"]):
        # The tenant views read events, jobs and attempts by tenant id: a new tenant under
        # the id would be shown its predecessor's (another customer's) deliveries.
        raise Conflict(f"tenant {inputs.clip(tenant)!r} was deleted and its events are kept "
                       "for their history until retention purges them (retention_dedupe_s); "
                       "a tenant created under the same id is shown them: choose another id, "
                       "or, if it is the same customer, say adopt_history (hookline tenants "
                       "put --adopt-history)")
    row = yield one("put_tenant", id=tenant, name=fields.name, metadata=fields.metadata,
                    max_destinations=fields.max_destinations,
                    clear_max=fields.clear_max_destinations, disabled=fields.disabled,
                    epoch=new_token_epoch())
    return Tenant.from_row(row), not existed


def _delete_tenant_tx(tenant: str, dry_run: bool) -> Tx[TenantRemoval]:
    # Locked (PostgreSQL), as a destination's insert locks it (check_destination_room): one
    # added while the tenant is deleted would be left live, and inherited by the next tenant
    # of the id. Every lock of a deletion is waited for briefly (ops.GiveWay).
    if not dry_run:
        yield GIVE_WAY  # and none for a job row (unfinished_jobs_of_destination)
    if (yield one("get_tenant" if dry_run else "lock_tenant", id=tenant)) is None:
        raise NotFound(f"no tenant {inputs.clip(tenant)!r}")
    destinations = int((yield one("tenant_destination_count", tenant=tenant))["n"])
    unfinished = int((yield one("tenant_unfinished_jobs", tenant=tenant))["n"])
    if not dry_run:
        for row in (yield rows("remove_tenant_destinations", tenant=tenant)):
            yield from kill_jobs_of_destination_tx(row["id"])
        yield count("delete_tenant", id=tenant)
    return TenantRemoval(tenant=tenant, destinations=destinations,
                         unfinished_jobs=unfinished, dry_run=dry_run)


def check_destination_room(tenant: str) -> Tx[None]:
    """Inside a destination's insert: the tenant exists and is below its `max_destinations`.
    Its row is locked until the insert commits (PostgreSQL; SQLite's writer is alone), so
    concurrent inserts for one tenant count each other's destinations, and a delete of the
    tenant either waits for the insert (and removes its destination) or goes first (and the
    insert finds no tenant).

    Raises:
        NotFound: no such tenant.
        Conflict: the tenant has its maximum number of live destinations.
    """
    if tenant == DEFAULT_TENANT:
        return
    row = yield one("lock_tenant", id=tenant)
    if row is None:
        raise NotFound(f"no tenant {inputs.clip(tenant)!r}")
    limit = row["max_destinations"]
    if limit is not None:
        live = int((yield one("tenant_destination_count", tenant=tenant))["n"])
        if live >= limit:
            raise Conflict(f"tenant {inputs.clip(tenant)!r} already has {live} destinations "
                           f"(its max_destinations is {limit})")


def add_destination_tx(tenant: str, insert: Query) -> Tx[Any]:
    """Insert a destination (`insert`) once the tenant has room for it; returns the row."""
    yield from check_destination_room(tenant)
    return (yield insert)

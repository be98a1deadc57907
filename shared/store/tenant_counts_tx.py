"""Per-tenant figures the operator's tenant list shows, and which tenants have a destination
of a name (the :class:`TenantCounts` mixin of :class:`hookline.shared.store.logic.StoreLogic`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from hookline.shared.errors import InvalidInput
from hookline.shared.store.ops import Tx, rows

T = TypeVar("T")


class TenantCounts:
    """Store methods counting per tenant; the backend supplies `_transact`."""

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive `tx` as one transaction (the backend's)."""
        raise NotImplementedError

    async def tenant_destination_counts(self, tenants: Sequence[str]) -> dict[str, int]:
        """See :meth:`hookline.shared.store.Store.tenant_destination_counts`."""
        if not tenants:
            return {}
        found = await self._transact(_rows_tx(min(tenants), max(tenants)), write=False)
        wanted = set(tenants)
        counts = {t: 0 for t in tenants}
        counts.update({r["tenant_id"]: int(r["n"]) for r in found if r["tenant_id"] in wanted})
        return counts

    async def destination_tenants(self, name: str, *, first: str | None = None,
                                  limit: int = 100) -> tuple[list[str], int]:
        """See :meth:`hookline.shared.store.Store.destination_tenants`."""
        if limit < 1:
            raise InvalidInput("limit", f"must be at least 1, not {limit}")
        found = await self._transact(_named_tx(name, first, limit), write=False)
        return [r["tenant_id"] for r in found], int(found[0]["n"]) if found else 0

    async def removed_destination_names(self, name: str, *, tenant: str,
                                        limit: int = 3) -> tuple[list[str], int]:
        """See :meth:`hookline.shared.store.Store.removed_destination_names`."""
        if limit < 1:
            raise InvalidInput("limit", f"must be at least 1, not {limit}")
        found = await self._transact(_removed_tx(name, tenant, limit), write=False)
        return [r["name"] for r in found], int(found[0]["n"]) if found else 0


def _removed_tx(name: str, tenant: str, limit: int) -> Tx[Any]:
    # As remove_destination renames it (both dialects' queries).
    return (yield rows("removed_destination_names", prefix=f"{name}~removed-",
                       tenant=tenant, limit=limit))


def _named_tx(name: str, first: str | None, limit: int) -> Tx[Any]:
    return (yield rows("destination_tenants", name=name, first=first, limit=limit))


def _rows_tx(first: str, last: str) -> Tx[Any]:
    return (yield rows("tenant_destination_counts", first=first, last=last))

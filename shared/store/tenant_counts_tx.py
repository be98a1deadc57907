"""Per-tenant figures the operator's tenant list shows (the :class:`TenantCounts` mixin of
:class:`hookline.shared.store.logic.StoreLogic`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

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


def _rows_tx(first: str, last: str) -> Tx[Any]:
    return (yield rows("tenant_destination_counts", first=first, last=last))

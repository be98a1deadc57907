"""The JSON shapes of tenants, as the admin API answers them and the CLI prints with
`--json` (the rest of the shapes are in shared/views.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hookline.shared.store.tenants_tx import TenantRemoval
from hookline.shared.tenant_models import Tenant


def tenant_view(tenant: Tenant, destinations: int | None = None) -> dict[str, Any]:
    """One tenant (its token epoch is internal), with its live destination count when known.
    """
    view = tenant.public()
    if destinations is not None:
        view["destinations"] = destinations
    return view


def tenants_page_view(tenants: Sequence[Tenant], counts: Mapping[str, int],
                      limit: int) -> dict[str, Any]:
    """A page of tenants in id order; `next_after` is the `after` of the next page (None on
    the last page)."""
    return {"tenants": [tenant_view(t, counts.get(t.id, 0)) for t in tenants],
            "next_after": tenants[-1].id if len(tenants) == limit and tenants else None}


def tenant_removal_view(removal: TenantRemoval) -> dict[str, Any]:
    """What deleting a tenant removed (or, with `dry_run`, would remove)."""
    return {"tenant": removal.tenant, "destinations": removal.destinations,
            "unfinished_jobs": removal.unfinished_jobs, "dry_run": removal.dry_run}

"""The JSON shapes of tenants, as the admin API answers them and the CLI prints with
`--json` (the rest of the shapes are in shared/views.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from hookline.shared.tenant_models import Tenant


class RemovalCounts(Protocol):
    """What a tenant's deletion reports (the store's TenantRemoval; a protocol, so this
    module stays below shared/store/ in the import graph)."""

    @property
    def tenant(self) -> str:
        """The tenant deleted."""

    @property
    def destinations(self) -> int:
        """Its live destinations removed."""

    @property
    def unfinished_jobs(self) -> int:
        """Their pending and running jobs, ended dead."""

    @property
    def dry_run(self) -> bool:
        """Nothing was changed."""


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


def tenant_removal_view(removal: RemovalCounts) -> dict[str, Any]:
    """What deleting a tenant removed (or, with `dry_run`, would remove)."""
    return {"tenant": removal.tenant, "destinations": removal.destinations,
            "unfinished_jobs": removal.unfinished_jobs, "dry_run": removal.dry_run}

"""The JSON shapes of tenants, as the admin API answers them and the CLI prints with
`--json` (the rest of the shapes are in shared/views.py), and the message both give when a
destination filter names a destination its tenant has none of."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from hookline.shared.errors import InvalidInput
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.tenant_models import Tenant, destination_label

SHOWN_TENANTS = 3
"""Other tenants a "no destination named" message lists by id before `and N more`."""


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


def no_destination_message(name: str, tenant: str, others: Sequence[str], total: int, *,
                           option: str, removed: Sequence[str] = (),
                           removed_total: int = 0, deleted: Collection[str] = ()) -> str:
    """`no destination named 'NAME' in tenant T`, then which other tenants have one and how
    to name one of them: the operator's message (CLI and admin API) for a destination filter
    its tenant has no destination of.

    Args:
        name: the destination name looked for.
        tenant: the tenant looked in.
        others: ids of tenants that have one, in id order (the first
            :data:`SHOWN_TENANTS` are listed).
        total: how many tenants have one in all.
        option: how a tenant is named where the message is read, before the id:
            `--tenant ` on the command line, `tenant=` in the admin API.
        removed: the names the tenant's removed destinations once named `name` keep, newest
            first, and `removed_total` how many there are in all
            (:meth:`Store.removed_destination_names`), said at the end.
        deleted: which of `others` are deleted tenants (:meth:`Store.deleted_tenants`),
            marked `(deleted)`: passing such an id lists its kept history, read-only, so
            the hint is followed by an answer, not by "it was deleted".

    Returns:
        e.g. `no destination named 'billing' in the default tenant (_default); tenant acme
        has one: pass --tenant acme`, or `...; tenants a, b, c and 2 more have one: pass
        --tenant ID`, or `..., nor in any other tenant`; `tenant acme (deleted) has one:
        pass --tenant acme` when acme was deleted; with `removed`, then e.g. `; one
        was removed: its jobs are under 'billing~removed-7'`, or `; 5 were removed: their
        jobs are under 'billing~removed-9', 'billing~removed-8', 'billing~removed-7' and 2
        more`; for a label `acme~billing` (no destination has a `~` in its name) `...;
        a destination label 'acme~billing' means tenant acme's destination 'billing': name
        'billing' and pass --tenant acme`.
    """
    where = (f"the default tenant ({DEFAULT_TENANT})" if tenant == DEFAULT_TENANT
             else f"tenant {tenant}")
    label_hint = _label_hint(name, option)
    if label_hint is not None and not others:  # no name holds the mark: none ever has one
        text = f"no destination named {name!r} in {where}; {label_hint}"
    else:
        text = _others(f"no destination named {name!r} in {where}", others, total, option,
                       deleted)
    if not removed:
        return text
    count = max(removed_total, len(removed))
    if count == 1:
        return f"{text}; one was removed: its jobs are under {removed[0]!r}"
    names = ", ".join(map(repr, removed))
    more = f" and {count - len(removed)} more" if count > len(removed) else ""
    return f"{text}; {count} were removed: their jobs are under {names}{more}"


def listed_tenants(others: Sequence[str], total: int, deleted: Collection[str] = ()) -> str:
    """Tenant ids for a message: `acme`, `acme and globex`, or `a, b, c and 2 more` (the first
    :data:`SHOWN_TENANTS` of `others`, `total` in all); those in `deleted` are followed by
    `(deleted)`."""
    shown = [f"{t} (deleted)" if t in deleted else t for t in others[:SHOWN_TENANTS]]
    if total > len(shown):
        return f"{', '.join(shown)} and {total - len(shown)} more"
    if len(shown) > 1:
        return f"{', '.join(shown[:-1])} and {shown[-1]}"
    return shown[0]


def deleted_tenant_note(tenant: str) -> str:
    """What a listing filtered by a deleted tenant's id says before its rows (the CLI, on
    stderr): whose history it is, and that it can only be read."""
    return (f"tenant {tenant} was deleted: listing its history, kept until retention "
            "(read-only: nothing can be changed for it)")


def _label_hint(name: str, option: str) -> str | None:
    """How to name the destination `name` means when it is a label, `TENANT~NAME` (as
    /metrics and the alerts write another tenant's destination; a route or filter takes the
    name and the tenant apart), or None when it is not one."""
    try:
        labelled, own = destination_label(name, field="name")
    except InvalidInput:
        return None
    if labelled is None:
        return None
    return (f"a destination label {name!r} means tenant {labelled}'s destination {own!r}: "
            f"name {own!r} and pass {option}{labelled}")


def _others(text: str, others: Sequence[str], total: int, option: str,
            deleted: Collection[str]) -> str:
    """`text`, then which other tenants have a destination of the name (see
    :func:`no_destination_message`)."""
    if not others:
        return f"{text}, nor in any other tenant"
    listed = listed_tenants(others, total, deleted)
    if total == 1:
        return f"{text}; tenant {listed} has one: pass {option}{others[0]}"
    return f"{text}; tenants {listed} have one: pass {option}ID"

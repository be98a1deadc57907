"""`hookline tenants list|show|put|delete|disable|enable`: the SaaS's customers (see
docs/tenants.md), read and changed in the store directly, so they work whether or not the
service runs. `--json` prints what the admin API answers for the same thing
(shared/tenant_views.py). Exit codes: 0 ok, 1 not found or refused (the default tenant
deleted), 2 bad input (the rule book's message, naming the field's flag).

`--tenant ID` on the destination and event commands comes from :func:`add_tenant_flag` and
:func:`tenant_arg` here, and the check that `--destination NAME` names one of that tenant's
destinations from :func:`destination_tenant`. Other modules add actions to the `tenants`
group by listing themselves in ACTION_MODULES: each has `add_actions(group)`
(`group.add_parser(...)`, as below).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

from hookline.shared.config import Config
from hookline.shared.errors import InvalidInput, InvalidSetting, NotFound
from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.store import Store
from hookline.shared.store.tenants_tx import MAX_TENANT_PAGE
from hookline.shared.tenant_models import (
    Tenant,
    TenantFields,
    destination_label,
    tenant_fields,
    tenant_id,
)
from hookline.shared.tenant_views import (
    SHOWN_TENANTS,
    deleted_tenant_note,
    no_destination_message,
    tenant_removal_view,
    tenant_view,
    tenants_page_view,
)
from hookline.supervisor.cli.common import (
    async_command,
    operator,
    print_json,
    print_record,
    print_table,
    with_store,
)

ACTION_MODULES: tuple[str, ...] = ("hookline.supervisor.cli.tenant_tokens",)
"""Modules adding more `hookline tenants` actions (each: `add_actions(group)`)."""
TENANT_HELP = ("the tenant (customer) the destination belongs to (default: the default tenant; "
               "a destination named by its label TENANT~NAME names its tenant too)")


def register(sub: Any) -> None:
    """Add the `tenants` group to the CLI."""
    group = sub.group("tenants", help="manage tenants (your customers, each owning "
                                      "destinations)")
    lst = group.add_parser("list", help="tenants in id order, with their destination counts")
    lst.add_argument("--prefix", help="only ids starting with PREFIX")
    lst.add_argument("--after", metavar="ID", help="only ids after ID (paging)")
    lst.add_argument("--limit", type=int, default=100,
                     help=f"most tenants shown (1 to {MAX_TENANT_PAGE}, default 100)")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(handler=async_command(list_cmd))

    show = group.add_parser("show", help="one tenant")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=async_command(show_cmd))

    put = group.add_parser("put", help="create a tenant, or change the fields given")
    put.add_argument("id")
    put.add_argument("--name")
    put.add_argument("--metadata", metavar="JSON", help="a JSON object kept with it")
    put.add_argument("--max-destinations", metavar="N",
                     help="most live destinations (`none`: no limit)")
    put.add_argument("--adopt-history", action="store_true",
                     help="create it under a deleted tenant's id whose events are still "
                          "stored, showing it them (only for the same customer)")
    put.add_argument("--json", action="store_true")
    put.set_defaults(handler=async_command(put_cmd))

    for action, disabled, text in (
            ("disable", True, "refuse its events and tokens (queued jobs still deliver)"),
            ("enable", False, "accept its events again")):
        flip = group.add_parser(action, help=text)
        flip.add_argument("id")
        flip.add_argument("--json", action="store_true")
        flip.set_defaults(handler=async_command(put_cmd), name=None, metadata=None,
                          max_destinations=None, disabled=disabled)

    delete = group.add_parser("delete", help="remove a tenant and its destinations (their "
                                             "unfinished jobs end dead)")
    delete.add_argument("id")
    delete.add_argument("--dry-run", action="store_true", help="only count what would go")
    delete.add_argument("--json", action="store_true")
    delete.set_defaults(handler=async_command(delete_cmd))

    for module in ACTION_MODULES:
        importlib.import_module(module).add_actions(group)


def add_tenant_flag(parser: argparse.ArgumentParser, help_text: str = TENANT_HELP) -> None:
    """`--tenant ID` on a command naming a destination or event."""
    parser.add_argument("--tenant", metavar="ID", help=help_text)


def named(name: str, tenant: str | None) -> str:
    """A destination's name for a confirmation line: `billing`, or `billing (tenant acme)`
    when it is not the default tenant's (two tenants may each have a `billing`)."""
    return name if tenant in (None, DEFAULT_TENANT) else f"{name} (tenant {tenant})"


DESTINATION_ARGS = ("name", "destination")
"""The attributes a command taking `--tenant` names its destination by: the argument NAME,
or `--destination NAME`."""


def tenant_arg(args: argparse.Namespace) -> str | None:
    """The tenant the command names, checked: `--tenant ID`, or the TENANT of a destination
    given by the label metrics and alerts show, `TENANT~NAME` (see
    :func:`hookline.shared.tenant_models.destination_label`): the one place the CLI reads
    both, so every command naming a destination takes the label. A label is taken apart in
    `args` (NAME left as the destination, TENANT as `--tenant`), so the command goes on as
    if given `NAME --tenant TENANT`; a removed destination's `NAME~removed-ID` stays a name.
    None when neither names a tenant.

    Raises:
        InvalidSetting (exit 2): `--tenant` is no tenant id; the label is malformed, or its
            tenant is no tenant id, or `--tenant` names another tenant.
    """
    given = getattr(args, "tenant", None)
    for attribute in DESTINATION_ARGS:
        text = getattr(args, attribute, None)
        if not isinstance(text, str):
            continue
        try:
            labelled, name = destination_label(text, field=attribute)
        except InvalidInput as exc:
            raise InvalidSetting(exc.field, exc.detail) from None
        if labelled is None:
            continue
        if given is not None and given != labelled:
            raise InvalidSetting("tenant", f"{text!r} is tenant {labelled}'s destination "
                                           f"{name!r}, but --tenant says {given}: give one "
                                           "of them")
        setattr(args, attribute, name)
        args.tenant = given = labelled
    if given is None:
        return None
    try:
        return tenant_id(given, reserved_ok=True)
    except InvalidInput as exc:
        raise InvalidSetting("tenant", exc.detail) from None


async def existing_tenant(store: Store, tenant: str | None) -> str:
    """`tenant` (default: the default tenant) once it is known to exist. Raises NotFound
    naming it (exit 1)."""
    if tenant is None:
        return DEFAULT_TENANT
    if tenant != DEFAULT_TENANT:
        await store.get_tenant(tenant)
    return tenant


async def listed_tenant(store: Store, tenant: str) -> str:
    """`tenant`, named by `--tenant` to filter a listing (dead letters, jobs, events), once
    it is known to exist or to be a deleted tenant whose history is kept
    (:meth:`Store.tenant_was_deleted`); for a deleted one a note on stderr says whose history
    is listed and that it is read-only (stdout, `--json` too, stays the listing).

    Raises:
        NotFound (exit 1): no tenant of that id, nor any history of one.
    """
    if tenant != DEFAULT_TENANT and await store.tenant_was_deleted(tenant):
        print(f"hookline: note: {deleted_tenant_note(tenant)}", file=sys.stderr)
    return tenant


async def destination_tenant(store: Store, name: str, tenant: str | None, *,
                             listing: bool = False) -> str:
    """The tenant whose destination `--destination NAME` names (`tenant`, default: the
    default tenant), once it is known to have a destination of that name: a live one, or a
    removed one by the name it keeps (`NAME~removed-ID`, as `hookline dead` lists it). A
    filter that names no destination must fail, not answer with an empty list.

    With `listing` (a read-only listing), `tenant` may be a deleted tenant whose history is
    kept (:func:`listed_tenant`); else it must exist (a write).

    Raises:
        NotFound (exit 1): the tenant does not exist (nor, with `listing`, its history);
            or it has no destination of that name, in a message naming the destination,
            the tenant looked in and the other tenants that have one (the first
            :data:`SHOWN_TENANTS` ids, a deleted one marked so, then how many more), with
            the hint to pass `--tenant ID`.
    """
    if listing and tenant is not None:
        scope = await listed_tenant(store, tenant)
    else:
        scope = await existing_tenant(store, tenant)
    owners, total = await store.destination_tenants(name, first=scope, limit=SHOWN_TENANTS)
    if owners[:1] == [scope]:
        return scope
    removed, removed_total = await store.removed_destination_names(name, tenant=scope)
    raise NotFound(no_destination_message(name, scope, owners, total, option="--tenant ",
                                          removed=removed, removed_total=removed_total,
                                          deleted=await store.deleted_tenants(owners)))


async def listing_scope(store: Store, destination: str | None, tenant: str | None
                        ) -> str | None:
    """A read-only listing's filters (dead letters, jobs, events) checked: with
    `--destination NAME`, the tenant that has it (:func:`destination_tenant` with
    `listing`); else `tenant` as given, a deleted one's kept history too
    (:func:`listed_tenant`), or None for no tenant filter.

    Raises:
        NotFound (exit 1): as :func:`destination_tenant` and :func:`listed_tenant`.
    """
    if destination is not None:  # none of that name there: NotFound, exit 1
        return await destination_tenant(store, destination, tenant, listing=True)
    if tenant is not None:
        await listed_tenant(store, tenant)
    return tenant


def _id(args: argparse.Namespace) -> str:
    """The tenant id argument, checked (InvalidInput: exit 2)."""
    return tenant_id(args.id, field="id", reserved_ok=True)


def _fields(args: argparse.Namespace) -> tuple[TenantFields, list[str]]:
    """The put flags as the admin API's body, checked by its rule book (exit 2)."""
    body: dict[str, Any] = {}
    if args.name is not None:
        body["name"] = args.name
    if args.metadata is not None:
        try:
            body["metadata"] = json.loads(args.metadata)
        except ValueError as exc:
            raise InvalidSetting("metadata", f"is not valid JSON: {exc}") from None
    if args.max_destinations is not None:
        text = args.max_destinations
        if text == "none":
            body["max_destinations"] = None
        elif text.isdigit():
            body["max_destinations"] = int(text)
        else:
            raise InvalidSetting("max_destinations", "must be a whole number or none")
    if getattr(args, "disabled", None) is not None:
        body["disabled"] = args.disabled
    if getattr(args, "adopt_history", False):
        body["adopt_history"] = True
    try:
        return tenant_fields(body), sorted(body)
    except InvalidInput as exc:  # InvalidSetting: the message names the flag
        raise InvalidSetting(exc.field, exc.detail) from None


async def list_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline tenants list [--prefix P] [--after ID] [--limit N]`."""
    async def page(store: Store) -> tuple[list[Tenant], dict[str, int]]:
        found = await store.list_tenants(after=args.after, prefix=args.prefix,
                                         limit=args.limit)
        return found, await store.tenant_destination_counts([t.id for t in found])

    found, counts = await with_store(config, page)  # a bad limit: InvalidInput, exit 2
    view = tenants_page_view(found, counts, args.limit)
    if args.json:
        print_json(view)
        return 0
    print_table(view["tenants"], ["id", "name", "destinations", "max_destinations",
                                  "disabled", "created_at"])
    if view["next_after"] is not None:
        print(f"(more: --after {view['next_after']})")
    return 0


async def show_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline tenants show ID`."""
    tenant = _id(args)

    async def one(store: Store) -> dict[str, Any]:
        found = await store.get_tenant(tenant)
        return tenant_view(found, (await store.tenant_destination_counts([tenant]))[tenant])

    view = await with_store(config, one)
    if args.json:
        print_json(view)
    else:
        print_record({**view, "metadata": json.dumps(view["metadata"])})
    return 0


async def put_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline tenants put ID [--name] [--metadata] [--max-destinations]`, and `disable`,
    `enable` (the same change of one field)."""
    tenant = _id(args)
    fields, changed = _fields(args)
    if tenant == DEFAULT_TENANT and fields.disabled:
        raise InvalidSetting("disabled", "the default tenant cannot be disabled: events "
                                         "published without a tenant belong to it")

    async def put(store: Store) -> tuple[Tenant, bool, int]:
        stored, created = await store.put_tenant(tenant, fields)  # a reserved id: exit 2
        return stored, created, (await store.tenant_destination_counts([tenant]))[tenant]

    stored, created, destinations = await with_store(config, put)
    get_logger().info("tenant_put", tenant=tenant, created=created, fields=changed,
                      disabled=stored.disabled, **operator())
    if args.json:
        print_json(tenant_view(stored, destinations))
    else:
        state = "disabled" if stored.disabled else "enabled"
        print(f"{'created' if created else 'updated'} tenant {tenant} ({state})")
    return 0


async def delete_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline tenants delete ID [--dry-run]`: removes its destinations (their unfinished
    jobs end dead) and forgets it; the default tenant is refused (exit 1)."""
    tenant = _id(args)
    removal = await with_store(config, lambda s: s.delete_tenant(tenant,
                                                                  dry_run=args.dry_run))
    if not args.dry_run:
        get_logger().info("tenant_deleted", tenant=tenant,
                          destinations=removal.destinations,
                          unfinished_jobs=removal.unfinished_jobs, **operator())
    if args.json:
        print_json(tenant_removal_view(removal))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} tenant {tenant}: {removal.destinations} destination(s), "
          f"{removal.unfinished_jobs} unfinished job(s) ending dead")
    return 0

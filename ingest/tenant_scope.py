"""Which tenant a request about destinations, jobs or events means. A tenant API request (a
tenant token, ingest/tenant_auth.py) means the token's tenant, always: `?tenant=` or a body's
`"tenant"` is refused there (400, field `tenant`), so no input can even name another tenant.
An admin request means `?tenant=ID` (or `"tenant"` in the body), the default tenant when
absent. Names are unique within a tenant only, so a destination name always comes with its
tenant, and a destination filter naming none of that tenant's destinations is a 404, never
an empty list (:func:`check_destination_filter`). A listing may name a deleted tenant whose
history is kept (:func:`listed_tenant_filter`); a write may not."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hookline.ingest.app_state import request_claims, request_store
from hookline.shared.errors import InvalidInput, NotFound
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.policy import filters
from hookline.shared.tenant_models import tenant_id
from hookline.shared.tenant_views import no_destination_message

TENANT_PARAM = "tenant"
DESTINATION_FIELD = "destination"
"""The query parameter (or body field) of a destination filter, a 404's `field`."""
LISTED_TENANTS = 100
"""An admin 404 for a destination filter lists at most this many other tenants' ids."""


class DestinationNotFound(NotFound):
    """A destination filter names no destination of the tenant it means: 404 `not_found`
    with `field` "destination" and, on the admin API, whose destinations of that name exist
    (:attr:`fields`, added to the answer by ingest/admin_api.py `answering_errors`)."""

    def __init__(self, detail: str, **fields: Any) -> None:
        super().__init__(detail)
        self.fields: dict[str, Any] = {"field": DESTINATION_FIELD, **fields}


def tenant_filter(request: web.Request, body: dict[str, Any] | None = None) -> str | None:
    """The tenant the request names (query `tenant`, or `"tenant"` in `body`), checked;
    None when it names none.

    Raises:
        InvalidInput("tenant"): not a tenant id, or query and body name different tenants.
    """
    given = [value for value in (request.query.get(TENANT_PARAM),
                                 None if body is None else body.get(TENANT_PARAM))
             if value is not None]
    if not given:
        return None
    checked = [tenant_id(value, reserved_ok=True) for value in given]
    if len(set(checked)) > 1:
        raise InvalidInput(TENANT_PARAM, "the query and the body name different tenants")
    return checked[0]


async def request_tenant(request: web.Request, body: dict[str, Any] | None = None) -> str:
    """The tenant a destination route acts in (default: the default tenant), which must exist.

    Raises:
        InvalidInput("tenant"): see :func:`tenant_filter`.
        NotFound: no such tenant (the message names it).
    """
    claims = request_claims(request)
    if claims is not None:
        return _token_tenant(request, body, claims.tenant)
    tenant = tenant_filter(request, body)
    if tenant is None:
        return DEFAULT_TENANT
    if tenant != DEFAULT_TENANT:
        await request_store(request).get_tenant(tenant)  # NotFound names it
    return tenant


async def existing_tenant_filter(request: web.Request,
                                 body: dict[str, Any] | None = None) -> str | None:
    """:func:`tenant_filter`, and the tenant named must exist (NotFound names it); the
    token's tenant for a tenant API request."""
    claims = request_claims(request)
    if claims is not None:
        return _token_tenant(request, body, claims.tenant)
    tenant = tenant_filter(request, body)
    if tenant is not None and tenant != DEFAULT_TENANT:
        await request_store(request).get_tenant(tenant)
    return tenant


async def listed_tenant_filter(request: web.Request) -> str | None:
    """:func:`tenant_filter` for a read-only listing or lookup (dead letters, jobs, events):
    the tenant named must exist, or be a deleted tenant whose events, jobs and attempts are
    kept until retention (:meth:`Store.tenant_was_deleted`), whose history is then listed
    as a live tenant's is, in the same answer shape. The token's tenant for a tenant API
    request.

    Raises:
        InvalidInput("tenant"): see :func:`tenant_filter`.
        NotFound: no tenant of that id, nor any history of one (the message names it).
    """
    claims = request_claims(request)
    if claims is not None:
        return _token_tenant(request, None, claims.tenant)
    tenant = tenant_filter(request)
    if tenant is not None and tenant != DEFAULT_TENANT:
        await request_store(request).tenant_was_deleted(tenant)
    return tenant


async def check_destination_filter(request: web.Request, name: str | None,
                                   tenant: str | None) -> None:
    """A destination filter (`?destination=NAME`, a body's `"destination"`) must name one of
    the tenant's destinations: a live one, or a removed one by the name it keeps
    (`NAME~removed-ID`, as dead letters and jobs show it). Else the list it filters would
    answer nothing, as if there were nothing there. Call it once the rest of the input is
    checked (a bad input is 400 before any lookup).

    Args:
        request: an admin or tenant API request.
        name: the filter's destination name (None: no filter, nothing to check).
        tenant: the tenant the request means (:func:`listed_tenant_filter`: the token's
            on the tenant API; None on the admin API is the default tenant).

    Raises:
        DestinationNotFound: the tenant has no destination of that name. On the tenant API
            the answer is `no destination named 'NAME'` and nothing more, from a read of
            that tenant's rows only, so it is the same whether another tenant has one or
            not. On the admin API it names the tenant looked in (`tenant`) and the tenants
            that have one (`other_tenants`, the first :data:`LISTED_TENANTS` in id order;
            `other_tenants_total`), with the hint to pass `tenant=ID` (a deleted tenant
            marked `(deleted)` in the detail: its kept history is what `tenant=ID` lists).
    """
    if name is None:
        return
    store = request_store(request)
    claims = request_claims(request)
    if claims is not None:
        if not await store.has_destination(name, tenant=claims.tenant):
            raise DestinationNotFound(f"no destination named {name!r}")
        return
    scope = DEFAULT_TENANT if tenant is None else tenant
    if await store.has_destination(name, tenant=scope):  # the common case: one indexed read
        return
    others, total = await store.destination_tenants(name, first=scope, limit=LISTED_TENANTS)
    if others[:1] == [scope]:  # added since the read above
        return
    removed, removed_total = await store.removed_destination_names(name, tenant=scope)
    raise DestinationNotFound(
        no_destination_message(name, scope, others, total, option=f"{TENANT_PARAM}=",
                               removed=removed, removed_total=removed_total,
                               deleted=await store.deleted_tenants(others)),
        tenant=scope, other_tenants=others, other_tenants_total=total)


def _token_tenant(request: web.Request, body: dict[str, Any] | None, tenant: str) -> str:
    """The token's tenant, once the request is seen to name none itself (see
    :func:`refuse_named_tenant`)."""
    refuse_named_tenant(request, body)
    return tenant


def refuse_named_tenant(request: web.Request, body: dict[str, Any] | None = None) -> None:
    """On a tenant API request: refuse a query (or a `body`) that names a tenant, never
    ignore it (the tenant is the token's). ingest/tenant_auth.py checks every route's query;
    handlers shared with the admin API check their body here too.

    Raises:
        InvalidInput("tenant"): the query or the body names a tenant.
    """
    if TENANT_PARAM in request.query or (body is not None and TENANT_PARAM in body):
        raise InvalidInput(TENANT_PARAM, "a tenant token acts for its own tenant only; "
                                         "remove `tenant`")


def refuse_metadata_filter(request: web.Request, value: Any) -> None:
    """On a tenant API request, refuse a (checked) payload filter that tests the tenant's
    metadata: it is the operator's, and which events a filter lets through would spell it out
    (a `$startsWith` at a time). The operator's own routes may.

    Raises:
        InvalidInput("filter"): a tenant token's filter tests `tenant.metadata` or `tenant`.
    """
    if (request_claims(request) is not None and isinstance(value, dict) and value
            and filters.reads_tenant_metadata(value)):
        raise InvalidInput(filters.FIELD, "a tenant token's filter cannot test `tenant` or "
                                          "`tenant.metadata` (the metadata is the "
                                          "operator's); test data, type, source or tenant.id")

"""The admin API's tenant routes (under `/v1/admin/`, behind the same bearer token and error
mapping as ingest/admin_api.py). A tenant is one of the SaaS's customers: see docs/tenants.md.

Routes (JSON shapes in shared/tenant_views.py; input errors are 400 `invalid_request` with
`"field"`):
    PUT    /v1/admin/tenants/{id}        create (201) or change (200) {name?, metadata?,
                                         max_destinations?, disabled?}: the fields given
                                         change, the others stay; `{"disabled": true}`
                                         disables it (publishing refused, tokens stop
                                         working, queued jobs still deliver)
    GET    /v1/admin/tenants/{id}        one tenant, with its live destination count
    GET    /v1/admin/tenants?after=&prefix=&limit=
                                         tenants in id order (keyset paging: pass the
                                         answer's `next_after` as `after`), ids starting
                                         with `prefix` only when given; limit 1 to 1000
                                         (default 100)
    DELETE /v1/admin/tenants/{id}?dry_run=true|false
                                         its live destinations are removed (their unfinished
                                         jobs end dead) and it is forgotten; answers the
                                         counts; `dry_run=true` only counts

The default tenant `_default` can be read, never changed, disabled (400, field `disabled`)
nor deleted (409): events published without a tenant must always have somewhere to go.
Every create, change and delete (not a dry run) logs one audit line (`tenant_put`,
`tenant_deleted`) with who asked (the client address and the optional `X-Hookline-Actor`
header).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hookline.ingest.admin_api import guarded, json_body
from hookline.ingest.app_state import request_store
from hookline.ingest.http_common import requester
from hookline.shared.errors import InvalidInput
from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.policy import inputs
from hookline.shared.store.tenants_tx import MAX_TENANT_PAGE
from hookline.shared.tenant_models import TENANT_FIELDS, tenant_fields, tenant_id
from hookline.shared.tenant_views import tenant_removal_view, tenant_view, tenants_page_view

DEFAULT_PAGE = 100
"""Tenants one list call answers when no `limit` is given."""
_BOOLEAN_TEXT = {"true": True, "false": False}


def register(app: web.Application) -> None:
    """Add the routes of the module docstring to the ingest app."""
    routes = [
        ("GET", "/v1/admin/tenants", list_tenants),
        ("PUT", "/v1/admin/tenants/{id}", put_tenant),
        ("GET", "/v1/admin/tenants/{id}", get_tenant),
        ("DELETE", "/v1/admin/tenants/{id}", delete_tenant),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, guarded(handler))


def query_flag(request: web.Request, name: str) -> bool:
    """A `true`/`false` query parameter (absent: false). Raises InvalidInput(name)."""
    text = request.query.get(name)
    if text is None:
        return False
    if text not in _BOOLEAN_TEXT:
        raise InvalidInput(name, "must be true or false")
    return _BOOLEAN_TEXT[text]


def _path_id(request: web.Request) -> str:
    return tenant_id(request.match_info["id"], field="id", reserved_ok=True)


async def put_tenant(request: web.Request) -> web.Response:
    """`PUT /v1/admin/tenants/{id}`: 201 with the tenant created, 200 with it changed."""
    tenant = _path_id(request)
    body = await json_body(request)
    fields = tenant_fields(body)
    if tenant == DEFAULT_TENANT and fields.disabled:
        raise InvalidInput("disabled", "the default tenant cannot be disabled: events "
                                       "published without a tenant belong to it")
    store = request_store(request)
    stored, created = await store.put_tenant(tenant, fields)  # reserved ids: 400 "id"
    get_logger().info("tenant_put", tenant=tenant, created=created,
                      fields=sorted(k for k in TENANT_FIELDS if k in body),
                      disabled=stored.disabled, **requester(request))
    counts = await store.tenant_destination_counts([tenant])
    return web.json_response(tenant_view(stored, counts[tenant]), status=201 if created else 200)


async def get_tenant(request: web.Request) -> web.Response:
    """`GET /v1/admin/tenants/{id}`: the tenant and its live destination count."""
    tenant = _path_id(request)
    store = request_store(request)
    found = await store.get_tenant(tenant)
    counts = await store.tenant_destination_counts([tenant])
    return web.json_response(tenant_view(found, counts[tenant]))


async def list_tenants(request: web.Request) -> web.Response:
    """`GET /v1/admin/tenants?after=&prefix=&limit=`: a page in id order."""
    query = request.query
    after = query.get("after")
    prefix = query.get("prefix")
    if after is not None:
        inputs.token("after", after, inputs.EVENT_ID_RE)
    if prefix is not None:
        inputs.token("prefix", prefix, inputs.EVENT_ID_RE)
    limit = inputs.whole_number("limit", query.get("limit"), default=DEFAULT_PAGE,
                                high=MAX_TENANT_PAGE)
    store = request_store(request)
    page = await store.list_tenants(after=after, prefix=prefix, limit=limit)
    counts = await store.tenant_destination_counts([t.id for t in page])
    return web.json_response(tenants_page_view(page, counts, limit))


async def delete_tenant(request: web.Request) -> web.Response:
    """`DELETE /v1/admin/tenants/{id}?dry_run=`: the counts of what goes (or would)."""
    tenant = _path_id(request)
    dry_run = query_flag(request, "dry_run")
    removal = await request_store(request).delete_tenant(tenant, dry_run=dry_run)
    view: dict[str, Any] = tenant_removal_view(removal)
    if not dry_run:
        get_logger().info("tenant_deleted", tenant=tenant, destinations=removal.destinations,
                          unfinished_jobs=removal.unfinished_jobs, **requester(request))
    return web.json_response(view)

"""The tenant API under `/v1/tenant/`: what one tenant's token may see and do (docs/tenants.md).

The tenant is the token's (ingest/tenant_auth.py checks it on every request), never the
path's or the body's; every store read and action takes it as a SQL parameter, so another
tenant's destination, event or job answers 404 exactly like one that does not exist. Where the
admin API has the same route, its handler serves here too: it acts on the request's tenant
(:func:`hookline.ingest.app_state.token_tenant`, `tenant_scope`) and audits with the actor
`tenant:<id>` (:func:`hookline.ingest.http_common.requester`).

Routes (JSON; errors `{"error", "detail"}` as in ingest/admin_api.py, plus the token refusals
of ingest/tenant_auth.py), each with the capability it needs (TENANT_ROUTES):
    GET    /v1/tenant                           the tenant, the token's capabilities, expiry
    GET    /v1/tenant/destinations              its live destinations (secrets redacted)
    POST   /v1/tenant/destinations              add one (admin fields; SSRF guard;
                                                409 at max_destinations)
    GET    /v1/tenant/destinations/{name}       one, with `health` (its stats, last hour)
    PATCH  /v1/tenant/destinations/{name}       change fields; DELETE: remove it
    POST   .../{name}/pause, .../{name}/resume
    POST   .../{name}/test                      {type?}: a test event (`hookline.ping`) to it
                                                alone; 200 with its first attempt's outcome
                                                (202 with the job's state: not done in time,
                                                or ?wait=false)
    POST   .../{name}/filter-test               {filter?, last?}: which of the newest events
                                                a filter lets through (changes nothing)
    GET    .../{name}/secret                    its signing secret (audited)
    POST   .../{name}/rotate-secret             a new secret (audited)
    GET    .../{name}/stats?window_s=3600       success rate, p50/p99, last failure
    POST   .../{name}/recover                   {since?, until?, limit?, dry_run?, reason?}:
                                                its dead jobs in the window again (audited)
    GET    /v1/tenant/events?...                its events, keyset paging (as the admin's)
    GET    /v1/tenant/events/{ref}?source=      one event and its jobs
    GET    /v1/tenant/jobs?destination=&status=&before=&limit=   its jobs, newest first
    GET    /v1/tenant/jobs/{id}                 one job and every attempt
    GET    /v1/tenant/jobs/{id}/event?max_bytes=   the start of its event's body (the payload
                                                it was sent), as text (ingest/admin_views.py)
    POST   /v1/tenant/jobs/{id}/resend          {reason?, dry_run?} (audited)
    GET    /v1/tenant/event-types               types the portal's picker offers: the
                                                catalogue's (archived hidden), else recent
                                                (ingest/catalogue_admin.py)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from hookline.ingest import (
    admin_api,
    admin_secrets,
    admin_views,
    catalogue_admin,
    destination_checks,
    events_admin,
    tenant_api_deliveries,
)
from hookline.ingest.app_state import request_store, token_tenant
from hookline.ingest.tenant_api_deliveries import stats_view
from hookline.ingest.tenant_auth import tenant_claims, tenant_route
from hookline.shared.views import destination_view

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HEALTH_WINDOW_S = 3600
"""The window of the `health` a destination is shown with, seconds."""


@dataclass(frozen=True, slots=True)
class TenantRoute:
    """One route of the tenant API and what a token needs for it."""

    method: str
    path: str
    handler: Handler
    capability: str
    writes: bool = False


async def whoami(request: web.Request) -> web.Response:
    """`GET /v1/tenant`: the tenant (id, name, max_destinations) and the token's grant."""
    claims = tenant_claims(request)
    tenant = await request_store(request).get_tenant(claims.tenant)
    return web.json_response({
        "tenant": {"id": tenant.id, "name": tenant.name,
                   "max_destinations": tenant.max_destinations},
        "capabilities": list(claims.capabilities), "read_only": claims.read_only,
        "expires_at": claims.expires_at})


async def list_destinations(request: web.Request) -> web.Response:
    """`GET /v1/tenant/destinations`: the tenant's live destinations, secrets redacted."""
    found = await request_store(request).list_destinations(token_tenant(request))
    return web.json_response([destination_view(d) for d in found])


async def get_destination(request: web.Request) -> web.Response:
    """`GET /v1/tenant/destinations/{name}`: one destination and its `health`."""
    store, name, tenant = request_store(request), request.match_info["name"], token_tenant(
        request)
    dest = await store.get_destination(name, tenant=tenant)
    health = await store.destination_stats(name, tenant=tenant, window_s=HEALTH_WINDOW_S)
    return web.json_response({**destination_view(dest), "health": stats_view(health)})


_DEST = "/v1/tenant/destinations/{name}"
_MANAGE = "manage_destinations"
TENANT_ROUTES: tuple[TenantRoute, ...] = (
    TenantRoute("GET", "/v1/tenant", whoami, "view"),
    TenantRoute("GET", "/v1/tenant/destinations", list_destinations, "view"),
    TenantRoute("POST", "/v1/tenant/destinations", admin_api.add_destination, _MANAGE, True),
    TenantRoute("GET", _DEST, get_destination, "view"),
    TenantRoute("PATCH", _DEST, admin_api.update_destination, _MANAGE, True),
    TenantRoute("DELETE", _DEST, admin_api.remove_destination, _MANAGE, True),
    TenantRoute("POST", f"{_DEST}/pause", admin_api.pause, _MANAGE, True),
    TenantRoute("POST", f"{_DEST}/resume", admin_api.resume, _MANAGE, True),
    TenantRoute("POST", f"{_DEST}/test", destination_checks.send_test, _MANAGE, True),
    TenantRoute("POST", f"{_DEST}/filter-test", destination_checks.filter_test, "view"),
    TenantRoute("GET", f"{_DEST}/secret", admin_secrets.reveal_secret, "view_secret"),
    TenantRoute("POST", f"{_DEST}/rotate-secret", admin_secrets.rotate_secret,
                "manage_secret", True),
    TenantRoute("GET", f"{_DEST}/stats", tenant_api_deliveries.destination_stats, "view"),
    TenantRoute("POST", f"{_DEST}/recover", tenant_api_deliveries.recover, "resend", True),
    TenantRoute("GET", "/v1/tenant/events", events_admin.list_events, "view"),
    TenantRoute("GET", "/v1/tenant/events/{ref}", events_admin.get_event, "view"),
    TenantRoute("GET", "/v1/tenant/jobs", tenant_api_deliveries.list_jobs, "view"),
    TenantRoute("GET", "/v1/tenant/jobs/{id}", tenant_api_deliveries.get_job, "view"),
    TenantRoute("GET", "/v1/tenant/jobs/{id}/event", admin_views.job_event, "view"),
    TenantRoute("POST", "/v1/tenant/jobs/{id}/resend", events_admin.resend_job, "resend",
                True),
    TenantRoute("GET", "/v1/tenant/event-types", catalogue_admin.tenant_event_types, "view"),
)
"""Every tenant API route: method, path, handler, capability, whether it writes."""


def register(app: web.Application) -> None:
    """Add every route of TENANT_ROUTES to the ingest app, behind the tenant token checks."""
    for route in TENANT_ROUTES:
        app.router.add_route(route.method, route.path,
                             tenant_route(route.handler, route.capability, writes=route.writes))

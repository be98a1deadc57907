"""The event-type catalogue's admin API, the tenant API's read-only list, and the subscription
check every destination create and edit goes through.

Routes (admin token; errors as the admin API's, ingest/admin_api.py):
    GET    /v1/admin/event-types                 {"event_types": [type, ...]} by name, with
                                                 their schemas and examples
    GET    /v1/admin/event-types/{name}          one type
    PUT    /v1/admin/event-types/{name}          create (201) or replace (200) a type:
                                                 {description?, schemas?: {"1": schema},
                                                 examples?: {"1": data}, validation?,
                                                 deprecated?, archived?}
    POST   /v1/admin/event-types/{name}/archive  {archived?: true}: archive (or restore)
    DELETE /v1/admin/event-types/{name}          remove it and its schemas
    POST   /v1/admin/event-types/import          an OpenAPI 3.1 document (JSON): its
                                                 `webhooks` into the catalogue
                                                 (shared/catalogue_openapi.py)
    GET    /v1/admin/event-types/export          the catalogue as an OpenAPI 3.1 document
Tenant API (a tenant token with `view`):
    GET    /v1/tenant/event-types                with a catalogue: its types that are not
                                                 archived (`event_types`: names, `catalogue`:
                                                 name, description, deprecated, latest
                                                 schema and example); without one: the types
                                                 of the tenant's recent events and its
                                                 subscriptions, as before the catalogue.

Each change reloads this process's catalogue copy at once; other processes and hosts pick
it up within ingest/catalogue_cache.py's CATALOGUE_POLL_S.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hookline.ingest.admin_api import guarded
from hookline.ingest.app_state import request_store, token_tenant
from hookline.ingest.catalogue_cache import CATALOGUE_KEY
from hookline.ingest.http_common import acting, bounded_body
from hookline.shared.catalogue import (
    event_type_fields,
    event_type_view,
)
from hookline.shared.catalogue_openapi import export_openapi, plan_import
from hookline.shared.errors import InvalidInput
from hookline.shared.logs import get_logger
from hookline.shared.policy import inputs

MAX_CATALOGUE_BODY = 1024 * 1024
"""Largest PUT or import body, bytes (schemas and OpenAPI documents outgrow the admin API's
usual 64 KiB)."""
_TYPES = "/v1/admin/event-types"


def register(app: web.Application) -> None:
    """Add the catalogue's admin routes (the tenant route is in ingest/tenant_api.py)."""
    for method, path, handler in (
            ("GET", _TYPES, list_types),
            ("GET", f"{_TYPES}/export", export_types),
            ("POST", f"{_TYPES}/import", import_types),
            ("GET", f"{_TYPES}/{{name}}", get_type),
            ("PUT", f"{_TYPES}/{{name}}", put_type),
            ("POST", f"{_TYPES}/{{name}}/archive", archive_type),
            ("DELETE", f"{_TYPES}/{{name}}", remove_type)):
        app.router.add_route(method, path, guarded(handler))


async def _body(request: web.Request) -> Any:
    """The request's JSON body ({} when empty), at most MAX_CATALOGUE_BODY bytes."""
    raw = await bounded_body(request, MAX_CATALOGUE_BODY)
    if not raw.strip():
        return {}
    return inputs.json_document("body", raw)


async def _changed(request: web.Request) -> None:
    """Reload this process's catalogue copy after a change (others poll)."""
    await request.app[CATALOGUE_KEY].refresh(request_store(request), force=True)


async def list_types(request: web.Request) -> web.Response:
    """`GET /v1/admin/event-types`: every type, by name, with schemas and examples."""
    found = await request_store(request).list_event_types()
    return web.json_response({"event_types": [event_type_view(t) for t in found]})


async def get_type(request: web.Request) -> web.Response:
    """`GET /v1/admin/event-types/{name}`: one type. 404 when it is not in the catalogue."""
    found = await request_store(request).get_event_type(request.match_info["name"])
    return web.json_response(event_type_view(found))


async def put_type(request: web.Request) -> web.Response:
    """`PUT /v1/admin/event-types/{name}`: create (201) or replace (200) one type."""
    body = await _body(request)
    if not isinstance(body, dict):
        raise InvalidInput("body", "must be a JSON object")
    checked = event_type_fields(request.match_info["name"], body)
    [(stored, created)] = await request_store(request).put_event_types([checked])
    await _changed(request)
    get_logger().info("event_type_put", event_type=stored.name, created=created,
                      versions=sorted(stored.schemas), by=acting(request))
    return web.json_response(event_type_view(stored), status=201 if created else 200)


async def archive_type(request: web.Request) -> web.Response:
    """`POST /v1/admin/event-types/{name}/archive`: {archived?: true} (false restores)."""
    body = await _body(request)
    if not isinstance(body, dict):
        raise InvalidInput("body", "must be a JSON object")
    inputs.refuse_unknown(body, ("archived",))
    archived = inputs.flag("archived", body.get("archived"), default=True)
    stored = await request_store(request).archive_event_type(request.match_info["name"],
                                                             archived)
    await _changed(request)
    get_logger().info("event_type_archived", event_type=stored.name, archived=archived,
                      by=acting(request))
    return web.json_response(event_type_view(stored))


async def remove_type(request: web.Request) -> web.Response:
    """`DELETE /v1/admin/event-types/{name}`: remove it and its schemas (events stay)."""
    name = request.match_info["name"]
    await request_store(request).remove_event_type(name)
    await _changed(request)
    get_logger().info("event_type_removed", event_type=name, by=acting(request))
    return web.json_response({"name": name, "removed": True})


async def import_types(request: web.Request) -> web.Response:
    """`POST /v1/admin/event-types/import`: an OpenAPI 3.1 document's `webhooks` into the
    catalogue; answers the names `created`, given a `new_version`, and `unchanged`."""
    store = request_store(request)
    plan = plan_import(await _body(request), await store.list_event_types())
    if plan.writes:
        await store.put_event_types(plan.writes)
        await _changed(request)
    get_logger().info("event_types_imported", created=len(plan.created),
                      new_version=len(plan.new_version), by=acting(request))
    return web.json_response({"created": plan.created, "new_version": plan.new_version,
                              "unchanged": plan.unchanged})


async def export_types(request: web.Request) -> web.Response:
    """`GET /v1/admin/event-types/export`: the catalogue as an OpenAPI 3.1 `webhooks`
    document (archived types left out)."""
    return web.json_response(export_openapi(await request_store(request).list_event_types()))


async def tenant_event_types(request: web.Request) -> web.Response:
    """`GET /v1/tenant/event-types`: the catalogue's types that are not archived; without a
    catalogue, the types of the tenant's recent events and its subscriptions (see module
    docstring)."""
    store = request_store(request)
    everything = await store.list_event_types()
    catalogue = [t for t in everything if not t.archived]
    if not everything:
        found = await store.tenant_event_types(token_tenant(request))
        return web.json_response({"event_types": found, "source": "events"})
    entries = []
    for event_type in catalogue:
        latest = event_type.latest_version
        entries.append({
            "name": event_type.name, "description": event_type.description,
            "deprecated": event_type.deprecated, "latest_version": latest,
            "schema": event_type.schemas.get(latest) if latest is not None else None,
            "example": event_type.examples.get(latest) if latest is not None else None})
    return web.json_response({"event_types": [t.name for t in catalogue],
                              "source": "catalogue", "catalogue": entries})

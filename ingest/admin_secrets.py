"""Admin routes for a destination's signing secret: rotate it, reveal it, end a rotation's
overlap early. Each call is audited: one log line naming the destination and who asked (the
client address and the optional `X-Hookline-Actor` header; the secret itself never).

Routes (JSON; the admin token is required, errors as in ingest/admin_api.py; each takes
`?tenant=ID`, default the default tenant):
    POST /v1/admin/destinations/{name}/rotate-secret   {"secret"?: "whsec_...",
             "overlap_s"?: 86400} -> the new secret, whole, once; the previous one keeps
             signing (both signatures on every request) for overlap_s seconds, 0 to 7 days
    GET  /v1/admin/destinations/{name}/secret          the current secret, whole
    POST /v1/admin/destinations/{name}/expire-previous-secret  -> {"name", "expired"}
Answers carrying a secret are sent with `Cache-Control: no-store`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hookline.ingest import admin_api
from hookline.ingest.app_state import request_store
from hookline.ingest.http_common import requester
from hookline.ingest.tenant_scope import request_tenant
from hookline.shared.endpoint_models import Destination
from hookline.shared.errors import InvalidSetting
from hookline.shared.logs import get_logger
from hookline.shared.policy import rules
from hookline.shared.policy.inputs import refuse_unknown
from hookline.shared.signing import generate_secret
from hookline.shared.views import destination_secret_view, previous_secret_expired_view

ROTATE_FIELDS = ("secret", "overlap_s")
NO_STORE = {"Cache-Control": "no-store"}


def register(app: web.Application) -> None:
    """Add the secret routes (module docstring) to the ingest app."""
    base = "/v1/admin/destinations/{name}"
    for method, path, handler in (
            ("POST", f"{base}/rotate-secret", rotate_secret),
            ("GET", f"{base}/secret", reveal_secret),
            ("POST", f"{base}/expire-previous-secret", expire_previous_secret)):
        app.router.add_route(method, path, admin_api.guarded(handler))


async def rotate_secret(request: web.Request) -> web.Response:
    """`POST .../rotate-secret`: the new secret (given or generated) and its overlap."""
    body = await admin_api.json_body(request)
    refuse_unknown(body, ROTATE_FIELDS, error=InvalidSetting)
    given = body.get("secret")
    tenant = await request_tenant(request)
    dest = await request_store(request).rotate_secret(
        request.match_info["name"], generate_secret() if given is None else given,
        body.get("overlap_s", rules.DEFAULT_ROTATION_OVERLAP_S), tenant=tenant)
    _audit("secret_rotated", dest, request, generated=given is None,
           previous_secret_until=dest.previous_secret_until)
    return web.json_response(destination_secret_view(dest), headers=NO_STORE)


async def reveal_secret(request: web.Request) -> web.Response:
    """`GET .../secret`: the current secret, whole."""
    dest = await request_store(request).get_destination(request.match_info["name"],
                                                        tenant=await request_tenant(request))
    _audit("secret_revealed", dest, request)
    return web.json_response(destination_secret_view(dest), headers=NO_STORE)


async def expire_previous_secret(request: web.Request) -> web.Response:
    """`POST .../expire-previous-secret`: the previous secret signs no more."""
    body = await admin_api.json_body(request)
    refuse_unknown(body, (), error=InvalidSetting)
    dest, expired = await request_store(request).expire_previous_secret(
        request.match_info["name"], tenant=await request_tenant(request))
    _audit("previous_secret_expired", dest, request, expired=expired)
    return web.json_response(previous_secret_expired_view(dest, expired))


def _audit(event: str, dest: Destination, request: web.Request, **facts: Any) -> None:
    get_logger().info(event, destination=dest.name, tenant=dest.tenant, **requester(request),
                      **facts)

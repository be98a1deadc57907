"""Admin routes that mint and revoke tenant tokens (behind the admin token, errors as in
ingest/admin_api.py; tokens: shared/tenant_tokens.py, docs/tenants.md).

Routes:
    POST /v1/admin/tenants/{id}/tokens         {"ttl_s"?: 3600 (1 to 86400), "read_only"?:
             false, "capabilities"?: [...] (default: all)} -> 201 {"token", "expires_at",
             "capabilities", "read_only", "portal_url"}; 404 unknown tenant, 409 disabled
    POST /v1/admin/tenants/{id}/revoke-tokens  -> {"tenant", "revoked": true}: every token
             minted for it before stops working at its next request, on every host
Both log an audit line (`tenant_token_minted` without the token, `tenant_tokens_revoked`)
with who asked. The portal URL's base is the address this request reached ingest at.
"""

from __future__ import annotations

from aiohttp import web

from hookline.ingest.admin_api import guarded, json_body
from hookline.ingest.app_state import app_config, request_store
from hookline.ingest.http_common import requester
from hookline.shared.logs import get_logger
from hookline.shared.policy.inputs import refuse_unknown
from hookline.shared.tenant_models import tenant_id
from hookline.shared.tenant_tokens import grant, issue, issued_view, ttl_seconds

MINT_FIELDS = ("ttl_s", "read_only", "capabilities")
NO_STORE = {"Cache-Control": "no-store"}


def register(app: web.Application) -> None:
    """Add the token routes (module docstring) to the ingest app."""
    base = "/v1/admin/tenants/{id}"
    app.router.add_post(f"{base}/tokens", guarded(mint_token))
    app.router.add_post(f"{base}/revoke-tokens", guarded(revoke_tokens))


async def mint_token(request: web.Request) -> web.Response:
    """`POST /v1/admin/tenants/{id}/tokens`: a new token for the tenant, and its portal URL."""
    body = await json_body(request)
    refuse_unknown(body, MINT_FIELDS)
    tenant = tenant_id(request.match_info["id"], field="id", reserved_ok=True)
    ttl_s = ttl_seconds(body.get("ttl_s"))
    capabilities, read_only = grant(body.get("capabilities"), body.get("read_only"))
    token, claims = await issue(request_store(request), tenant, ttl_s=ttl_s,
                                capabilities=capabilities, read_only=read_only)
    get_logger().info("tenant_token_minted", tenant=tenant, expires_at=claims.expires_at,
                      capabilities=list(capabilities), read_only=read_only,
                      **requester(request))
    # public_url when set: behind a TLS-terminating proxy the request's own scheme is http.
    base_url = app_config(request.app).public_url or f"{request.scheme}://{request.host}"
    return web.json_response(issued_view(token, claims, base_url), status=201,
                             headers=NO_STORE)


async def revoke_tokens(request: web.Request) -> web.Response:
    """`POST /v1/admin/tenants/{id}/revoke-tokens`: a new token epoch for the tenant."""
    body = await json_body(request)
    refuse_unknown(body, ())
    tenant = tenant_id(request.match_info["id"], field="id", reserved_ok=True)
    await request_store(request).revoke_tenant_tokens(tenant)
    get_logger().info("tenant_tokens_revoked", tenant=tenant, **requester(request))
    return web.json_response({"tenant": tenant, "revoked": True})

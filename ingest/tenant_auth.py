"""Tenant token checks for the tenant API (`/v1/tenant/...`).

Every request is checked in full, with no cache: the signature (shared/tenant_tokens.py, in
constant time) before anything else, then ONE store read (Store.tenant_token_state: the
store's clock and the tenant's row) for the expiry, the tenant's existence, its disabled flag
and its token epoch, then the route's capability and, for a route that writes, the read-only
flag. A revoke, a disable or a delete therefore takes effect on the very next request, on
every host of a shared database.

Refusals (JSON `{"error", "detail"}`; 401s carry `WWW-Authenticate: Bearer`):
    401 token_missing      no `Authorization: Bearer ...` header
    401 token_invalid      not a tenant token (an admin token is not one), another
                           database's, or tampered with
    401 token_expired      past its expiry
    401 token_revoked      the tenant's epoch changed (revoke-tokens), or the tenant was
                           deleted or disabled
    403 read_only          a read-only token on a route that writes
    403 capability_missing the token lacks the route's capability (`capability` names it)
    400 invalid_request    the query names a tenant (`?tenant=`, field `tenant`): the
                           tenant is the token's, on every route

The tenant comes from the token alone; handlers read it with
:func:`hookline.ingest.app_state.request_tenant` / :func:`~hookline.ingest.app_state.tenant_scope`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from hookline.ingest.admin_api import answering_errors
from hookline.ingest.app_state import TENANT_CLAIMS, request_claims, request_store
from hookline.ingest.http_common import error_response
from hookline.ingest.tenant_scope import refuse_named_tenant
from hookline.shared.tenant_tokens import (
    CAPABILITIES,
    SIGNING_KEY_PURPOSE,
    TokenClaims,
    TokenRefused,
    check_expiry,
    verify_signature,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_CHALLENGE = {hdrs.WWW_AUTHENTICATE: "Bearer"}


def tenant_route(handler: Handler, capability: str, *, writes: bool) -> Handler:
    """Wrap a handler of the tenant API: the token checks of the module docstring, then
    the handler with hookline errors mapped to JSON (as the admin API maps them).

    Args:
        handler: the route's handler; it finds the claims through the request.
        capability: what the route needs (one of CAPABILITIES).
        writes: the route changes something (a read-only token is refused).

    Returns:
        The wrapped handler.
    """
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}")

    async def own_tenant_only(request: web.Request) -> web.StreamResponse:
        refuse_named_tenant(request)  # every route alike: `?tenant=` is refused, not ignored
        return await handler(request)

    answer = answering_errors(own_tenant_only)

    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            claims = await authenticate(request)
        except TokenRefused as exc:
            return error_response(401, exc.code, exc.detail, headers=_CHALLENGE)
        if writes and claims.read_only:
            return error_response(403, "read_only", "this tenant token is read-only; this "
                                  "route changes something")
        if capability not in claims.capabilities:
            return error_response(403, "capability_missing", f"this tenant token lacks the "
                                  f"{capability!r} capability", capability=capability)
        request[TENANT_CLAIMS] = claims
        return await answer(request)

    wrapped.__doc__ = handler.__doc__
    return wrapped


async def authenticate(request: web.Request) -> TokenClaims:
    """The claims of the request's tenant token, checked against the store now.

    Raises:
        TokenRefused: `token_missing`, `token_invalid`, `token_expired` or `token_revoked`
            (the module docstring says when).
    """
    scheme, _, given = request.headers.get(hdrs.AUTHORIZATION, "").partition(" ")
    token = given.strip()
    if scheme.lower() != "bearer" or not token:
        raise TokenRefused("token_missing", "the tenant API requires a tenant token: "
                           "Authorization: Bearer hlt_...")
    store = request_store(request)
    claims = verify_signature(await store.token_signing_key(SIGNING_KEY_PURPOSE), token)
    state = await store.tenant_token_state(claims.tenant)
    check_expiry(claims, state.now_s)
    if not state.exists or state.disabled or state.token_epoch != claims.epoch:
        why = ("was deleted" if not state.exists else "is disabled" if state.disabled
               else "had its tokens revoked")
        raise TokenRefused("token_revoked",
                           f"the token's tenant {why}; ask for a new token")
    return claims


def tenant_claims(request: web.Request) -> TokenClaims:
    """The verified claims of a request that :func:`tenant_route` let through.

    Raises:
        RuntimeError: the handler was registered without :func:`tenant_route` (a bug).
    """
    claims = request_claims(request)
    if claims is None:
        raise RuntimeError(f"{request.path} is served without the tenant token checks")
    return claims

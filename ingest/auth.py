"""Bearer-token checks for ingest's routes: `/v1/events` (ingest_token) and the admin API,
/metrics and the dashboard's data (admin_token).

Both are required by default: with no token configured the route refuses every request (403,
naming the setting), rather than trusting loopback peers, which a reverse proxy on the same
host would make of everyone. Tokens are compared in constant time (hmac.compare_digest) and
never logged. Provider sources (`/v1/sources/NAME`) authenticate with their own signatures.
"""

from __future__ import annotations

import hmac

from aiohttp import hdrs, web

from hookline.shared.config import Config
from hookline.shared.logs import get_logger

ADMIN_SETTING = "admin_token (HOOKLINE_ADMIN_TOKEN, or admin_token_file)"
INGEST_SETTING = "ingest_token (HOOKLINE_INGEST_TOKEN, or ingest_token_file)"


def check_bearer(request: web.Request, token: str | None, *, what: str,
                 setting: str) -> web.Response | None:
    """None when `request` carries `Authorization: Bearer <token>`, else the JSON refusal.

    Args:
        request: the incoming request.
        token: the configured token, or None when none is configured.
        what: the protected thing, for messages ("the admin API").
        setting: the setting that configures `token`, named in the refusal.

    Returns:
        None to proceed; 403 `auth_not_configured` when `token` is None; 401 `unauthorized`
        (with `WWW-Authenticate: Bearer`) when the header is missing or wrong.
    """
    if token is None:
        return web.json_response(
            {"error": "auth_not_configured",
             "detail": f"{what} refuses every request until {setting} is set"}, status=403)
    scheme, _, given = request.headers.get(hdrs.AUTHORIZATION, "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(),
                                                          token.encode()):
        return None
    return web.json_response(
        {"error": "unauthorized", "detail": f"{what} requires a valid Bearer token"},
        status=401, headers={hdrs.WWW_AUTHENTICATE: "Bearer"})


def warn_if_unconfigured(config: Config) -> None:
    """Log `auth_not_configured` (warning) for each route family whose token is unset;
    ingest calls this once it listens, so the operator sees why requests get 403."""
    if config.ingest_closed:
        get_logger().info("ingest_closed", route="POST /v1/events",
                          detail="closed on purpose (ingest_closed): every event is refused")
    for token, what, setting in ((config.admin_token, "admin API", ADMIN_SETTING),
                                 (config.ingest_token, "POST /v1/events", INGEST_SETTING)):
        if token is None and not (config.ingest_closed and what == "POST /v1/events"):
            get_logger().warning("auth_not_configured", route=what,
                                 detail=f"{what} refuses every request until {setting} is set")

"""The customer portal: `GET /portal/`, `GET /portal/static/{name}` and
`GET /portal/settings.json` on the ingest listener.

The portal is what a tenant (one of the operator's customers) sees: its destinations with
their health, its deliveries with every attempt, resend, recover, secret reveal and rotation,
a test delivery. The files in `ingest/static/portal/` are plain HTML, CSS and JavaScript (no
build step) and hold no data, so they are served without authentication; the page reads a
tenant token from the URL fragment (`/portal/#token=hlt_...`, never sent to any server),
removes it from the address bar, keeps it in this tab only and calls the tenant API
(`/v1/tenant/...`) with it as a Bearer header. The page also loads the dashboard's pure
helpers (`/static/dom.js`, `/static/style.css`).

Every answer carries the dashboard's strict Content-Security-Policy, except that the SaaS
may embed the portal in its own site: `frame-ancestors` lists the origins of the setting
`portal_frame_ancestors` (`'none'` when empty, then `X-Frame-Options: DENY` too). The
dashboard itself keeps refusing every frame (ingest/dashboard.py).
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

from aiohttp import hdrs, web

from hookline.ingest.app_state import app_config
from hookline.ingest.dashboard import CONTENT_TYPES
from hookline.shared.config import Config
from hookline.shared.config_checks import frame_ancestors

_BASE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
             "connect-src 'self'; base-uri 'none'; form-action 'none'")
_NO_ANCESTOR = "'none'"
PORTAL_FILES_KEY = web.AppKey("portal_files", dict[str, Traversable])
PORTAL_HEADERS_KEY = web.AppKey("portal_headers", dict[str, str])


def portal_csp(ancestors: tuple[str, ...]) -> str:
    """The portal's Content-Security-Policy.

    Args:
        ancestors: origins allowed to frame the portal (validated by
            :func:`hookline.shared.config_checks.frame_ancestors`); empty: none.

    Returns:
        The header value: the dashboard's policy with `frame-ancestors` set to `ancestors`.
    """
    return f"{_BASE_CSP}; frame-ancestors {' '.join(ancestors) or _NO_ANCESTOR}"


def portal_headers(config: Config) -> dict[str, str]:
    """The security headers of every portal answer under `config`'s
    `portal_frame_ancestors` (see the module docstring)."""
    ancestors = frame_ancestors(config.portal_frame_ancestors)
    headers = {
        "Content-Security-Policy": portal_csp(ancestors),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        hdrs.CACHE_CONTROL: "no-cache",
    }
    if not ancestors:
        # Older browsers ignore frame-ancestors; with allowed origins this header must be
        # absent (DENY would refuse them, ALLOW-FROM takes one origin and is obsolete).
        headers["X-Frame-Options"] = "DENY"
    return headers


def portal_files() -> dict[str, Traversable]:
    """name -> file of every servable file in `ingest/static/portal/` (a fixed allowlist)."""
    folder = resources.files("hookline.ingest").joinpath("static", "portal")
    return {entry.name: entry for entry in folder.iterdir()
            if entry.is_file() and any(entry.name.endswith(ext) for ext in CONTENT_TYPES)}


def register(app: web.Application) -> None:
    """Add the portal's routes (see the module docstring) to the ingest app.

    Raises:
        FileNotFoundError: `static/portal/index.html` is missing (a broken install).
    """
    files = portal_files()
    if "index.html" not in files:
        raise FileNotFoundError("ingest/static/portal/index.html is missing from the installation")
    app[PORTAL_FILES_KEY] = files
    app[PORTAL_HEADERS_KEY] = portal_headers(app_config(app))
    app.router.add_get("/portal", to_portal)
    app.router.add_get("/portal/", index)
    app.router.add_get("/portal/settings.json", settings)
    app.router.add_get("/portal/static/{name}", static)


async def to_portal(request: web.Request) -> web.Response:
    """`GET /portal`: a redirect to `/portal/` (browsers keep the URL fragment, the token)."""
    raise web.HTTPFound("/portal/", headers=request.app[PORTAL_HEADERS_KEY])


async def index(request: web.Request) -> web.Response:
    """`GET /portal/`: the portal page."""
    return _file_response(request, "index.html")


async def static(request: web.Request) -> web.Response:
    """`GET /portal/static/{name}`: one asset of the page; 404 for any name not in the
    allowlist."""
    name = request.match_info["name"]
    if name == "index.html" or name not in request.app[PORTAL_FILES_KEY]:
        raise web.HTTPNotFound()
    return _file_response(request, name)


async def settings(request: web.Request) -> web.Response:
    """`GET /portal/settings.json`: what the page needs before any token works:
    `owner_name` (the setting `portal_owner_name`, named in the "link expired" message)."""
    return web.json_response({"owner_name": app_config(request.app).portal_owner_name},
                             headers=request.app[PORTAL_HEADERS_KEY])


def _file_response(request: web.Request, name: str) -> web.Response:
    entry = request.app[PORTAL_FILES_KEY][name]
    content_type = next(ct for ext, ct in CONTENT_TYPES.items() if name.endswith(ext))
    headers = request.app[PORTAL_HEADERS_KEY].copy()
    headers[hdrs.CONTENT_TYPE] = content_type
    return web.Response(body=entry.read_bytes(), headers=headers)

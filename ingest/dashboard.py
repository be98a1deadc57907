"""The operator dashboard: `GET /` and `GET /static/{name}` on the ingest listener.

The files in `ingest/static/` are plain HTML, CSS and JavaScript (no build step), shipped as
package data. They hold no data and no secret, so they are served without authentication;
the page asks for the admin token, keeps it in sessionStorage and calls the admin API
(`/v1/admin/...`) with it as a Bearer header, exactly like any other API client.

Every answer carries a strict Content-Security-Policy (:data:`CSP`): scripts and styles only
from this origin, no inline script or style, no plugins, no framing, fetches only to this
origin. Payload text is put into the page with `textContent` only (see static/app.js), and the
policy is the second fence should a bug ever let markup through.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

from aiohttp import hdrs, web

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""The Content-Security-Policy of every dashboard answer."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Small files; revalidate each load so an upgrade is picked up at once.
    hdrs.CACHE_CONTROL: "no-cache",
}

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
STATIC_KEY = web.AppKey("dashboard_static", dict)


def static_files() -> dict[str, Traversable]:
    """name -> file of every servable file in `ingest/static/` (a fixed allowlist, so no
    request path can name anything else)."""
    folder = resources.files("hookline.ingest").joinpath("static")
    return {entry.name: entry for entry in folder.iterdir()
            if entry.is_file() and any(entry.name.endswith(ext) for ext in CONTENT_TYPES)}


def register(app: web.Application) -> None:
    """Add `GET /` (the page) and `GET /static/{name}` (its assets) to the ingest app.

    Raises:
        FileNotFoundError: `index.html` is missing from the package (a broken install).
    """
    files = static_files()
    if "index.html" not in files:
        raise FileNotFoundError("ingest/static/index.html is missing from the installation")
    app[STATIC_KEY] = files
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)


async def index(request: web.Request) -> web.Response:
    """`GET /`: the dashboard page."""
    return _file_response(request.app[STATIC_KEY]["index.html"], "index.html")


async def static(request: web.Request) -> web.Response:
    """`GET /static/{name}`: one asset of the page; 404 for any name not in the allowlist."""
    name = request.match_info["name"]
    entry = request.app[STATIC_KEY].get(name)
    if entry is None:
        raise web.HTTPNotFound()
    return _file_response(entry, name)


def _file_response(entry: Traversable, name: str) -> web.Response:
    content_type = next(ct for ext, ct in CONTENT_TYPES.items() if name.endswith(ext))
    return web.Response(body=entry.read_bytes(),
                        headers={hdrs.CONTENT_TYPE: content_type, **SECURITY_HEADERS})

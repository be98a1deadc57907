"""`GET /openapi.json`: the OpenAPI 3.1 document of every ingest route.

The document is package data of `ingest` (ingest/openapi.json), kept in step with the routes
by tests/integration/test_api_contract.py. No auth: it describes, it holds no data.
"""

from __future__ import annotations

import functools
import importlib.resources

from aiohttp import web

from hookline.ingest.http_common import JSON_TYPE

OPENAPI_RESOURCE = "openapi.json"
"""The document's file name inside the `ingest` package."""


def register(app: web.Application) -> None:
    """Add `GET /openapi.json` to the ingest app."""
    app.router.add_get("/openapi.json", openapi_document)


@functools.cache
def openapi_bytes() -> bytes:
    """The OpenAPI document's bytes (read from the installed package once).

    Raises:
        OSError: the package data is missing (a broken install).
    """
    return importlib.resources.files("hookline.ingest").joinpath(OPENAPI_RESOURCE).read_bytes()


async def openapi_document(request: web.Request) -> web.Response:
    """`GET /openapi.json`: the OpenAPI document (module docstring)."""
    return web.Response(body=openapi_bytes(), content_type=JSON_TYPE)

"""Counting ingest's requests for /metrics: by route and status, event refusals by reason,
and the accept latency of event routes.

One middleware, outermost, so it sees the final answer (the JSON error included). Counting is
a few dict updates in this process's memory (shared/process/metrics_file.py); nothing is
written per request.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from ingest.app_state import PROCESS_METRICS_KEY
from shared.metrics_catalog import (
    ACCEPT_SECONDS_BUCKETS,
    INGEST_ACCEPT_SECONDS,
    INGEST_REJECTIONS,
    INGEST_REQUESTS,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

EVENT_ROUTES = frozenset({"POST /v1/events", "POST /v1/sources/{name}"})
"""The routes that accept events: their refusals and accept latency are counted."""
UNMATCHED = "unmatched"
"""The route label of a request no route matched (404, or a method not allowed)."""
_ERROR_CODE = re.compile(r"[a-z][a-z0-9_]{0,39}")


def route_label(request: web.Request) -> str:
    """`METHOD pattern` of the route that matched, e.g. `GET /v1/admin/jobs/{id}`; bounded
    by the app's routes, never the raw path."""
    info = request.match_info
    if info.http_exception is not None:
        return UNMATCHED
    resource = info.route.resource
    if resource is None:
        return UNMATCHED
    return f"{request.method} {resource.canonical}"


def rejection_reason(response: web.StreamResponse) -> str:
    """The `error` code of a JSON error answer (a word the code defines), else
    `http_<status>`."""
    body = getattr(response, "body", None)
    if isinstance(body, bytes | bytearray) and body[:1] == b"{":
        try:
            code = json.loads(body).get("error")
        except (ValueError, AttributeError):
            code = None
        if isinstance(code, str) and _ERROR_CODE.fullmatch(code):
            return code
    return f"http_{response.status}"


@web.middleware
async def count_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count the answer by route and status; on an event route, time a 2xx and count a
    refusal by reason. An exception that escapes (a redirect, a cancelled request) is counted
    by its HTTP status, or as status 500 for anything else, and re-raised."""
    started = time.monotonic()
    metrics = request.app[PROCESS_METRICS_KEY]
    route = route_label(request)
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        metrics.inc(INGEST_REQUESTS, (route, str(exc.status)))
        raise
    except Exception:
        metrics.inc(INGEST_REQUESTS, (route, "500"))
        raise
    status = response.status
    metrics.inc(INGEST_REQUESTS, (route, str(status)))
    if route in EVENT_ROUTES:
        if 200 <= status < 300:
            metrics.observe(INGEST_ACCEPT_SECONDS, time.monotonic() - started,
                            ACCEPT_SECONDS_BUCKETS)
        elif status >= 400:
            metrics.inc(INGEST_REJECTIONS, (rejection_reason(response),))
    return response

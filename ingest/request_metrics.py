"""Counting ingest's requests for /metrics: by route and status, event refusals by reason,
and the accept latency of event routes.

Called by ingest's one middleware (ingest/app.py) once the final answer is known (the JSON
error included). Counting is a few dict updates in this process's memory
(shared/process/metrics_file.py); nothing is written per request.
"""

from __future__ import annotations

import json
import re
import time

from aiohttp import web

from hookline.shared.metrics_catalog import (
    ACCEPT_SECONDS_BUCKETS,
    INGEST_ACCEPT_SECONDS,
    INGEST_REJECTIONS,
    INGEST_REQUESTS,
)
from hookline.shared.process.metrics_file import ProcessMetrics

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


def count_answer(metrics: ProcessMetrics, route: str, status: int, started_s: float,
                 response: web.StreamResponse | None) -> None:
    """Count one answer by route and status; on an event route, time a 2xx and count a
    refusal by reason.

    Args:
        metrics: this process's counters.
        route: the request's route_label.
        status: the HTTP status answered (500 for an exception that escaped).
        started_s: time.monotonic() when the request reached the app, seconds.
        response: the answer, to read a refusal's error code; None when an exception
            escaped instead.
    """
    metrics.inc(INGEST_REQUESTS, (route, str(status)))
    if route in EVENT_ROUTES:
        if 200 <= status < 300:
            metrics.observe(INGEST_ACCEPT_SECONDS, time.monotonic() - started_s,
                            ACCEPT_SECONDS_BUCKETS)
        elif status >= 400 and response is not None:
            metrics.inc(INGEST_REJECTIONS, (rejection_reason(response),))

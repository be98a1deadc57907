"""`POST /v1/events`: events sent by callers holding the ingest token.

Requires `Authorization: Bearer <ingest_token>` (ingest/auth.py). The body is one JSON event
(ingest/validation.py); a `source` that is a configured provider source is refused, since
that source's ids belong to the provider (its events arrive at `/v1/sources/{name}`).
Answers: 202 / 200 duplicate / 503 as in ingest/accept.py; 400 `invalid_event`,
413 `body_too_large`, 415 `unsupported_media_type`, 429 `rate_limited` (per source, when
ingest_rate_per_s > 0).

With tracing on, each request is a `POST /v1/events` span continuing the publisher's
`traceparent` (or starting a trace), and its context is stored with the event
(hookline.shared.otel).

When the event-type catalogue has a schema for the event's type (ingest/catalogue_cache.py),
its `data` is checked here, before the event joins a group commit, so a refused event never
touches the other events of that commit: validation `reject` answers 400 `schema_mismatch`
with `pointer` (JSON Pointer of the first failing location, e.g. `/data/amount`), `keyword`
(the failing schema keyword), `event_type` and `schema_version`, and stores nothing; `warn`
accepts the event with the mismatch stored as its `schema_problem`. Both are counted in
`hookline_ingest_schema_mismatches_total{type, validation}`.
"""

from __future__ import annotations

from dataclasses import replace

from aiohttp import web

from hookline.ingest.accept import accept_event, traced
from hookline.ingest.app_state import CONFIG_KEY, PROCESS_METRICS_KEY
from hookline.ingest.auth import INGEST_SETTING, check_bearer
from hookline.ingest.catalogue_cache import CATALOGUE_KEY
from hookline.ingest.http_common import (
    UnsupportedMediaType,
    check_content_type,
    check_rate,
    error_response,
    read_bounded,
)
from hookline.ingest.sources_api import is_provider_source
from hookline.ingest.validation import DEFAULT_SOURCE, BodyTooLarge, parse_published
from hookline.shared.errors import InvalidEvent
from hookline.shared.logs import get_logger
from hookline.shared.metrics_catalog import SCHEMA_MISMATCHES

ROUTE = "POST /v1/events"


def register(app: web.Application) -> None:
    """Add `POST /v1/events` to the ingest app."""
    app.router.add_post("/v1/events", post_event)


async def post_event(request: web.Request) -> web.Response:
    """`POST /v1/events`: authenticate, validate, commit with its jobs, then answer (see
    module docstring); a span of its own while tracing is on."""
    return await traced(request, ROUTE, _post_event)


async def _post_event(request: web.Request, trace_context: str | None) -> web.Response:
    """The route's work; `trace_context` (the request span's, stored form) goes with the
    event."""
    config = request.app[CONFIG_KEY]
    denied = check_bearer(request, config.ingest_token, what="POST /v1/events",
                          setting=INGEST_SETTING)
    if denied is not None:
        return denied
    try:
        check_content_type(request)
        body = await read_bounded(request, config.max_body_bytes)
        event, data, schema_version = parse_published(body, config.max_body_bytes)
        mismatch = request.app[CATALOGUE_KEY].check(event.type, data, schema_version)
    except BodyTooLarge as exc:
        get_logger().info("event_rejected", error="body_too_large", detail=str(exc))
        return error_response(413, "body_too_large", str(exc))
    except UnsupportedMediaType as exc:
        get_logger().info("event_rejected", error="unsupported_media_type", detail=str(exc))
        return error_response(415, "unsupported_media_type", str(exc))
    except InvalidEvent as exc:
        get_logger().info("event_rejected", error="invalid_event", detail=str(exc))
        return error_response(400, "invalid_event", str(exc), field=exc.field)
    if event.source != DEFAULT_SOURCE and await is_provider_source(request, event.source):
        # Its ids belong to the provider: a caller here could otherwise claim them first.
        detail = (f"source {event.source!r} is a configured provider source; its events "
                  f"arrive at /v1/sources/{event.source}")
        get_logger().info("event_rejected", error="invalid_event", detail=detail)
        return error_response(400, "invalid_event", detail, field="source")
    if mismatch is not None:
        request.app[PROCESS_METRICS_KEY].inc(SCHEMA_MISMATCHES,
                                              (event.type, mismatch.validation))
        if mismatch.validation == "reject":
            get_logger().info("event_rejected", error="schema_mismatch", type=event.type,
                              detail=mismatch.mark)
            return error_response(
                400, "schema_mismatch", f"data does not match event type {event.type!r} "
                f"schema version {mismatch.version}: {mismatch.problem}", field="data",
                pointer=mismatch.problem.pointer, keyword=mismatch.problem.keyword,
                event_type=event.type, schema_version=mismatch.version)
        event = replace(event, schema_problem=mismatch.mark)
    limited = check_rate(request.app, event.source, event.tenant)
    if limited is not None:
        return limited
    if trace_context is not None:
        event = replace(event, trace_context=trace_context)
    return await accept_event(request, event)

"""The ingest HTTP application, assembled: routes, middlewares, the group committer's lifecycle.

Routes (each in its own module, which documents its answers):
    POST /v1/events      events from callers holding the ingest token (ingest/events_api.py);
                         committed and answered by ingest/accept.py: 202 once committed,
                         200 for a repeated (source, id), 429 rate_limited per source.
    POST /v1/sources/{name}  provider webhooks, verified on the raw bytes, then the same
                         accept step (ingest/sources_api.py, ingest/source_verify.py).
    GET  /healthz        200 {"status": "ok"}, or 200 {"status": "degraded", ...} while the
                         SQLite WAL is past wal_degraded_bytes (ingest/health.py)
    GET  /readyz         200 {"ready": true, ...} or 503 {"error": "not_ready", ...}
                         (ingest/health.py)
    GET  /openapi.json   the OpenAPI 3.1 document of every route (ingest/openapi.py); no
                         auth, it holds no data.
    /v1/admin/*, /metrics  the admin API and Prometheus metrics (ingest/admin_api.py), a
                         destination's secret (ingest/admin_secrets.py), the sources admin
                         API (ingest/sources_api.py), event lookup, resend and retry now
                         (ingest/events_admin.py), tenants (ingest/tenants_admin.py)
                         and the dashboard's views
                         (ingest/admin_views.py).
    /v1/admin/tenants/{id}/tokens, .../revoke-tokens  mint and revoke tenant tokens
                         (ingest/tenant_api_tokens.py).
    /v1/admin/event-types  the event-type catalogue (ingest/catalogue_admin.py).
    /v1/tenant/*         the tenant API, opened with a tenant token (ingest/tenant_api.py,
                         ingest/tenant_api_deliveries.py, ingest/tenant_auth.py).
    GET  /, /static/*    the operator dashboard (ingest/dashboard.py).
    GET  /portal/, /portal/static/*, /portal/settings.json
                         the customer portal, for tenant tokens (ingest/portal.py).

Every error is JSON `{"error": code, "detail": text}`, aiohttp's own 404/405 included. A
database that is busy answers 503 `store_busy`, one that is unreachable, restarting or
read-only 503 `store_unavailable`, both with `Retry-After` (never 500: nothing was committed;
ingest/http_common.py).

Route modules read the app's state through ingest/app_state.py and never import this module,
so the ingest modules import each other without a cycle.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from hookline.ingest import (
    admin_api,
    admin_secrets,
    admin_views,
    catalogue_admin,
    catalogue_cache,
    dashboard,
    destination_checks,
    events_admin,
    events_api,
    health,
    openapi,
    portal,
    sources_api,
    tenant_api,
    tenant_api_tokens,
    tenants_admin,
)
from hookline.ingest.app_state import (
    COMMITTER_KEY,
    CONFIG_KEY,
    IN_FLIGHT_KEY,
    OUTAGE_KEY,
    PROCESS_METRICS_KEY,
    RATE_LIMITER_KEY,
    READ_STORE_KEY,
    SNAPSHOTS_KEY,
    STORE_KEY,
    TRACING_KEY,
    InFlight,
)
from hookline.ingest.group_commit import GroupCommitter
from hookline.ingest.http_common import error_response, store_fault_response
from hookline.ingest.rate_limit import SourceRateLimiter
from hookline.ingest.request_metrics import count_answer, route_label
from hookline.shared.config import Config
from hookline.shared.errors import StoreClosing, StoreUnavailable
from hookline.shared.faults import StoreOutage
from hookline.shared.logs import get_logger
from hookline.shared.metrics_catalog import INGEST_BATCH_SIZE
from hookline.shared.process.metrics_file import ProcessMetrics, SnapshotWriter
from hookline.shared.store import Store
from hookline.shared.version import PRODUCT

if TYPE_CHECKING:
    from hookline.shared.otel import Tracing

# Codes for the HTTP errors aiohttp raises itself (routing) or we raise; others derive from
# the reason phrase ("Request Timeout" -> "request_timeout").
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large",
               415: "unsupported_media_type", 401: "unauthorized"}
# Headers of an aiohttp HTTPException worth keeping on the JSON answer (e.g. Allow on 405).
_DROP_HEADERS = frozenset({"content-type", "content-length"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(store: Store, config: Config, *,
              committer: GroupCommitter | None = None,
              snapshots: SnapshotWriter | None = None,
              read_store: Store | None = None,
              tracing: Tracing | None = None) -> web.Application:
    """Build the ingest application around an open store.

    The app starts the committer when it starts up and stops it at cleanup, which aiohttp
    runs once in-flight requests have finished or, past its shutdown timeout, been
    cancelled (a cancelled request's event still queued is dropped: it was never answered).

    Args:
        store: an open store; the caller opens and closes it.
        config: settings (`max_body_bytes`, `admin_token`, `ingest_token`,
            `ingest_rate_per_s`, `ingest_burst` are read here).
        committer: the group committer to use; a new one on `store` when None. Tests pass
            their own to read its counters; it is also at `app[COMMITTER_KEY]`.
        snapshots: this process's metrics snapshot writer (the child lifecycle's); None: a
            new one that keeps no file, so /metrics shows this app's own figures only.
        read_store: an open store on the same database for whole-table reads (/metrics,
            stats, the dashboard's summaries); None: `store`. The caller opens and closes it.
        tracing: the process's tracing (spans for `POST /v1/events`); None: off. A
            committer made here traces its commits with it.

    Returns:
        The application, ready for an AppRunner or aiohttp's TestServer.
    """
    # client_max_size bounds request.read()/post(); our handler reads with its own bound,
    # so this is a second fence should any code path use aiohttp's readers.
    app = web.Application(middlewares=[_boundary],
                          client_max_size=config.max_body_bytes)
    app[IN_FLIGHT_KEY] = InFlight()
    app[OUTAGE_KEY] = StoreOutage()
    app[STORE_KEY] = store
    app[READ_STORE_KEY] = read_store if read_store is not None else store
    app[CONFIG_KEY] = config
    app[COMMITTER_KEY] = committer = (committer if committer is not None else GroupCommitter(
        store, timeout_s=config.ingest_commit_timeout_s,
        create_tenants=config.tenants_auto_create, tracing=tracing))
    app[TRACING_KEY] = tracing
    app[SNAPSHOTS_KEY] = snapshots = (snapshots if snapshots is not None
                                      else SnapshotWriter(None, "ingest", ProcessMetrics()))
    app[PROCESS_METRICS_KEY] = snapshots.metrics
    snapshots.metrics.histogram_sources.append(
        lambda: {INGEST_BATCH_SIZE.name: {(): committer.batch_sizes.data()}})
    app[RATE_LIMITER_KEY] = SourceRateLimiter.from_config(config)
    app.cleanup_ctx.append(_run_committer)
    catalogue_cache.register(app, store)  # the catalogue copy publish checks against
    events_api.register(app)  # POST /v1/events
    health.register(app)  # GET /healthz, /readyz
    openapi.register(app)  # GET /openapi.json
    admin_api.register(app)  # /v1/admin/* and /metrics
    admin_secrets.register(app)  # a destination's secret: rotate, reveal, expire the previous
    destination_checks.register(app)  # a filter's dry run, a test delivery and its outcome
    events_admin.register(app)  # /v1/admin/events, resend, retry now
    tenants_admin.register(app)  # /v1/admin/tenants: create, change, list, delete
    catalogue_admin.register(app)  # /v1/admin/event-types: the event-type catalogue
    sources_api.register(app)  # POST /v1/sources/{name}, /v1/admin/sources
    admin_views.register(app)  # the dashboard's views under /v1/admin/
    tenant_api_tokens.register(app)  # mint and revoke tenant tokens (admin token)
    tenant_api.register(app)  # /v1/tenant/* (tenant tokens)
    dashboard.register(app)  # GET / and /static/*
    portal.register(app)  # GET /portal/, /portal/static/*, /portal/settings.json
    return app


async def _run_committer(app: web.Application) -> AsyncIterator[None]:
    committer = app[COMMITTER_KEY]
    committer.start()
    yield
    await committer.stop()


@web.middleware
async def _boundary(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Ingest's one middleware (one layer per request costs less than three on the hot path):

    * counts the request in flight while it is handled, and asks for the connection to
      close when draining;
    * turns every error into the JSON shape, never leaking a stack trace or path;
    * counts the answer for /metrics (ingest/request_metrics.py);
    * names hookline and its version in `Server` instead of aiohttp's default (set on the
      answer a handler returns; a handler that prepares a streamed answer itself must set it).

    A redirect (an HTTPException below 400) keeps aiohttp's handling and is re-raised, as is
    a cancellation (the client went away: nobody is answered).
    """
    started_s = time.monotonic()
    app = request.app
    in_flight = app[IN_FLIGHT_KEY]
    route = route_label(request)
    in_flight.enter()
    try:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                exc.headers["Server"] = PRODUCT
                count_answer(app[PROCESS_METRICS_KEY], route, exc.status, started_s, None)
                raise
            response = _json_error(request, exc)
        except (StoreUnavailable, StoreClosing) as exc:  # 503, nothing was committed
            response = store_fault_response(request, exc)
        except Exception:  # noqa: BLE001  (the boundary: log it all, tell the client nothing)
            get_logger().exception("request_failed", method=request.method, path=request.path)
            response = error_response(500, "internal_error", "an unexpected error occurred")
        if in_flight.draining:
            response.force_close()
    finally:
        in_flight.leave()
    response.headers["Server"] = PRODUCT
    count_answer(app[PROCESS_METRICS_KEY], route, response.status, started_s, response)
    return response


def _json_error(request: web.Request, exc: web.HTTPException) -> web.Response:
    """The JSON answer for an HTTP error aiohttp or a handler raised (404, 405, 413, ...)."""
    code = _HTTP_CODES.get(exc.status) or exc.reason.lower().replace(" ", "_")
    detail = exc.reason if exc.status != 404 else f"no route for {request.path}"
    if exc.status == 405:
        detail = f"{request.method} is not allowed here"
    headers = {k: v for k, v in exc.headers.items() if k.lower() not in _DROP_HEADERS}
    return error_response(exc.status, code, detail, headers=headers)

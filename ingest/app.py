"""The ingest HTTP application: routes, error shape, and the group committer's lifecycle.

Routes:
    POST /v1/events      requires `Authorization: Bearer <ingest_token>` (ingest/auth.py);
                         202 {"event_id", "message_id", "jobs"} once committed;
                         200 {..., "jobs": 0, "duplicate": true} for a repeated (source, id);
                         429 rate_limited (per source, when ingest_rate_per_s > 0).
    GET  /healthz        200 {"status": "ok"}, or 200 {"status": "degraded", ...} while the
                         SQLite WAL is past wal_degraded_bytes (ingest/wal_health.py)
    GET  /openapi.json   the OpenAPI 3.1 document of every route (ingest/openapi.json); no
                         auth, it holds no data.
    GET  /readyz         200 {"ready": true, ...} or 503 {"error": "not_ready", ...}
                         (ingest/health.py)
    /v1/admin/*, /metrics  the admin API and Prometheus metrics (ingest/admin_api.py).
    POST /v1/sources/{name}  provider webhooks, verified on the raw bytes
                         (ingest/sources_api.py, ingest/source_verify.py).
    GET  /, /static/*    the operator dashboard (ingest/dashboard.py), whose data comes from
                         the admin API, including its views (ingest/admin_views.py).

Every error is JSON `{"error": code, "detail": text}`, aiohttp's own 404/405 included. A
database that is busy answers 503 `store_busy`, one that is unreachable, restarting or
read-only 503 `store_unavailable`, both with `Retry-After` (never 500: nothing was committed).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.resources
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from aiohttp import hdrs, web

from ingest import admin_api, admin_views, dashboard, health, sources_api
from ingest.auth import INGEST_SETTING, check_bearer
from ingest.group_commit import CommitterStopped, GroupCommitter
from ingest.rate_limit import SourceRateLimiter, retry_after_s
from ingest.validation import DEFAULT_SOURCE, BodyTooLarge, parse_event
from ingest.wal_health import WalHealth
from shared.config import Config
from shared.errors import InvalidEvent, StoreBusy, StoreUnavailable
from shared.faults import StoreOutage
from shared.logs import get_logger
from shared.models import Accepted
from shared.store import Store

STORE_KEY = web.AppKey("store", Store)
CONFIG_KEY = web.AppKey("config", Config)
COMMITTER_KEY = web.AppKey("committer", GroupCommitter)
RATE_LIMITER_KEY = web.AppKey("rate_limiter", SourceRateLimiter)

RETRY_AFTER_S = 1
_JSON = "application/json"

# Codes for the HTTP errors aiohttp raises itself (routing) or we raise; others derive from
# the reason phrase ("Request Timeout" -> "request_timeout").
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large",
               415: "unsupported_media_type", 401: "unauthorized"}
# Headers of an aiohttp HTTPException worth keeping on the JSON answer (e.g. Allow on 405).
_DROP_HEADERS = frozenset({"content-type", "content-length"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class InFlight:
    """Counts requests being handled, so that a stop can let them finish first.

    aiohttp's own graceful shutdown (AppRunner.cleanup) stops reading from every connection
    before it waits for handlers, so a request still receiving its body then can never
    finish (aio-libs/aiohttp#2298). :func:`ingest.main.serve` therefore stops listening,
    calls :meth:`drain`, and only then runs the cleanup.

    Attributes:
        count: requests whose handler has started and not yet returned.
        draining: set by :meth:`drain`; answers then carry `Connection: close`, so clients
            on keep-alive connections reconnect (to the next instance) for their next request.
    """

    def __init__(self) -> None:
        self.count = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        """A request's handling starts."""
        self.count += 1
        self._idle.clear()

    def leave(self) -> None:
        """A request's handling ended (answered or failed)."""
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    async def drain(self, timeout_s: float) -> bool:
        """Wait until no request is in flight, at most `timeout_s` seconds; True if none is."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True


IN_FLIGHT_KEY = web.AppKey("in_flight", InFlight)
WAL_HEALTH_KEY: web.AppKey[WalHealth | None] = web.AppKey("wal_health")
OUTAGE_KEY = web.AppKey("store_outage", StoreOutage)
"""Logs one `store_unavailable` / `store_recovered` pair per database outage."""


def build_app(store: Store, config: Config, *,
              committer: GroupCommitter | None = None,
              wal_health: WalHealth | None = None) -> web.Application:
    """Build the ingest application around an open store.

    The app starts the committer when it starts up and stops it (committing what is queued)
    at cleanup, which aiohttp runs after in-flight requests have finished.

    Args:
        store: an open store; the caller opens and closes it.
        config: settings (`max_body_bytes`, `admin_token`, `ingest_token`,
            `ingest_rate_per_s`, `ingest_burst` are read here).
        committer: the group committer to use; a new one on `store` when None. Tests pass
            their own to read its counters; it is also at `app[COMMITTER_KEY]`.
        wal_health: the WAL state the maintenance task keeps (SQLite), read by /healthz;
            None: /healthz reports no WAL check (PostgreSQL, or no maintenance task).

    Returns:
        The application, ready for an AppRunner or aiohttp's TestServer.
    """
    # client_max_size bounds request.read()/post(); our handler reads with its own bound,
    # so this is a second fence should any code path use aiohttp's readers.
    app = web.Application(middlewares=[_track_in_flight, _json_errors],
                          client_max_size=config.max_body_bytes)
    app[IN_FLIGHT_KEY] = InFlight()
    app[OUTAGE_KEY] = StoreOutage()
    app[STORE_KEY] = store
    app[CONFIG_KEY] = config
    app[COMMITTER_KEY] = committer if committer is not None else GroupCommitter(store)
    app[RATE_LIMITER_KEY] = SourceRateLimiter.from_config(config)
    app[WAL_HEALTH_KEY] = wal_health
    app.cleanup_ctx.append(_run_committer)
    app.router.add_post("/v1/events", post_event)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/openapi.json", openapi_document)
    app.router.add_get("/readyz", health.readyz)  # ingest/health.py
    admin_api.register(app)  # /v1/admin/* and /metrics (ingest/admin_api.py)
    sources_api.register(app)  # /v1/sources/{name}, /v1/admin/sources (issue 3)
    admin_views.register(app)  # the dashboard's views under /v1/admin/ (issue 11)
    dashboard.register(app)  # GET / and /static/* (issue 11)
    return app


async def _run_committer(app: web.Application) -> AsyncIterator[None]:
    committer = app[COMMITTER_KEY]
    committer.start()
    yield
    await committer.stop()


# -- handlers ------------------------------------------------------------------------------


async def post_event(request: web.Request) -> web.Response:
    """`POST /v1/events`: authenticate, validate, commit with its jobs, then answer (see
    module docstring)."""
    config = request.app[CONFIG_KEY]
    denied = check_bearer(request, config.ingest_token, what="POST /v1/events",
                          setting=INGEST_SETTING)
    if denied is not None:
        return denied
    log = get_logger()
    try:
        _check_content_type(request)
        body = await read_bounded(request, config.max_body_bytes)
        event = parse_event(body, config.max_body_bytes)
    except BodyTooLarge as exc:
        log.info("event_rejected", error="body_too_large", detail=str(exc))
        return error_response(413, "body_too_large", str(exc))
    except _UnsupportedMediaType as exc:
        log.info("event_rejected", error="unsupported_media_type", detail=str(exc))
        return error_response(415, "unsupported_media_type", str(exc))
    except InvalidEvent as exc:
        log.info("event_rejected", error="invalid_event", detail=str(exc))
        return error_response(400, "invalid_event", str(exc), field=exc.field)
    if event.source != DEFAULT_SOURCE and await sources_api.is_provider_source(request,
                                                                               event.source):
        # Its ids belong to the provider: a caller here could otherwise claim them first.
        detail = (f"source {event.source!r} is a configured provider source; its events "
                  f"arrive at /v1/sources/{event.source}")
        log.info("event_rejected", error="invalid_event", detail=detail)
        return error_response(400, "invalid_event", detail, field="source")
    limited = check_rate(request.app, event.source)
    if limited is not None:
        return limited
    result = await request.app[COMMITTER_KEY].submit(event)
    request.app[OUTAGE_KEY].succeeded()
    ids = {"event_id": result.event_id, "message_id": result.message_id,
           "source": event.source, "source_event_id": event.source_event_id,
           "type": event.type}
    if isinstance(result, Accepted):
        log.info("event_accepted", **ids, jobs=len(result.job_ids),
                 job_ids=list(result.job_ids))
        return web.json_response({"event_id": result.event_id, "message_id": result.message_id,
                                  "jobs": len(result.job_ids)}, status=202)
    log.info("event_duplicate", **ids)
    return web.json_response({"event_id": result.event_id, "message_id": result.message_id,
                              "jobs": 0, "duplicate": True}, status=200)


async def healthz(request: web.Request) -> web.Response:
    """`GET /healthz`: the process is up and serving (does not touch the store): always 200,
    since restarting ingest would not help. The body is `{"status": "ok"}`, or `{"status":
    "degraded", "detail": ..., "checks": {"wal": ...}}` while the SQLite WAL is past
    `wal_degraded_bytes` (ingest/wal_health.py: size, limit, checkpoint result, holders)."""
    wal = request.app[WAL_HEALTH_KEY]
    if wal is None:
        return web.json_response({"status": "ok"})
    check = wal.report()
    if not wal.degraded:
        return web.json_response({"status": "ok", "checks": {"wal": check}})
    detail = (f"the SQLite WAL is {check['wal_bytes_at_check']} bytes after a checkpoint, past "
              f"wal_degraded_bytes ({wal.limit_bytes}): {check['reason']}")
    return web.json_response({"status": "degraded", "detail": detail, "checks": {"wal": check}})


OPENAPI_RESOURCE = "openapi.json"
"""The API's OpenAPI document, package data of `ingest` (kept in step with the routes by
tests/integration/test_api_contract.py)."""


@functools.cache
def openapi_bytes() -> bytes:
    """The OpenAPI document's bytes (read from the installed package once).

    Raises:
        OSError: the package data is missing (a broken install).
    """
    return importlib.resources.files("ingest").joinpath(OPENAPI_RESOURCE).read_bytes()


async def openapi_document(request: web.Request) -> web.Response:
    """`GET /openapi.json`: the OpenAPI document (no auth: it describes, it holds no data)."""
    return web.Response(body=openapi_bytes(), content_type=_JSON)


def check_rate(app: web.Application, source: str) -> web.Response | None:
    """Spend one of `source`'s rate-limit tokens (ingest/rate_limit.py).

    Returns:
        None when the event may be stored; else the 429 `rate_limited` answer, with
        `Retry-After` in whole seconds (at least 1).
    """
    limiter = app[RATE_LIMITER_KEY]
    wait_s = limiter.take(source)
    if wait_s is None:
        return None
    retry_s = retry_after_s(wait_s)
    get_logger().info("event_rejected", source=source, error="rate_limited",
                      retry_after_s=retry_s)
    return error_response(
        429, "rate_limited", f"source {source!r} sent more than {limiter.rate_per_s:g} "
        f"events/s (burst {limiter.burst}); retry in {retry_s} s",
        headers={hdrs.RETRY_AFTER: str(retry_s)})


# -- request checks ------------------------------------------------------------------------


class _UnsupportedMediaType(Exception):
    """The request's Content-Type is present and is not JSON in UTF-8."""


def _check_content_type(request: web.Request) -> None:
    """Accept `application/json` (charset utf-8 or none) or no Content-Type at all."""
    if hdrs.CONTENT_TYPE not in request.headers:
        return  # some HTTP libraries send none for raw bytes; the body must be JSON anyway
    if request.content_type != _JSON:
        raise _UnsupportedMediaType(f"Content-Type must be {_JSON}, not "
                                    f"{request.content_type or 'empty'}")
    charset = request.charset
    if charset is not None and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        raise _UnsupportedMediaType(f"charset must be utf-8, not {charset}")


async def read_bounded(request: web.Request, limit_bytes: int) -> bytes:
    """Read the whole body, but never buffer more than `limit_bytes` + 1 bytes.

    A declared Content-Length over the limit is refused before reading anything; a chunked
    body (or one whose length lies) is read piecewise and refused as soon as it passes the
    limit, so memory use stays bounded whatever the client claims.

    Args:
        request: the incoming request.
        limit_bytes: largest accepted body, in bytes.

    Returns:
        The body bytes, at most `limit_bytes` long.

    Raises:
        BodyTooLarge: the body is longer than `limit_bytes`.
    """
    if request.content_length is not None and request.content_length > limit_bytes:
        raise BodyTooLarge(limit_bytes)
    chunks: list[bytes] = []
    size = 0
    while True:
        # read(n) returns at most n bytes, possibly fewer (one buffered chunk), b"" at EOF.
        chunk = await request.content.read(limit_bytes + 1 - size)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit_bytes:
            raise BodyTooLarge(limit_bytes)
        chunks.append(chunk)


# -- errors --------------------------------------------------------------------------------


def error_response(status: int, code: str, detail: str, *,
                   headers: Mapping[str, str] | None = None, **extra: Any) -> web.Response:
    """The JSON error answer: `{"error": code, "detail": detail, **extra}`."""
    return web.json_response({"error": code, "detail": detail, **extra}, status=status,
                             headers=headers)


@web.middleware
async def _track_in_flight(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count the request while it is handled; ask for the connection to close when draining."""
    in_flight = request.app[IN_FLIGHT_KEY]
    in_flight.enter()
    try:
        response = await handler(request)
        if in_flight.draining:
            response.force_close()
        return response
    finally:
        in_flight.leave()


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every error into the JSON shape; never leak a stack trace or path to the client."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise  # redirects and other non-errors keep aiohttp's handling
        code = _HTTP_CODES.get(exc.status) or exc.reason.lower().replace(" ", "_")
        detail = exc.reason if exc.status != 404 else f"no route for {request.path}"
        if exc.status == 405:
            detail = f"{request.method} is not allowed here"
        headers = {k: v for k, v in exc.headers.items() if k.lower() not in _DROP_HEADERS}
        return error_response(exc.status, code, detail, headers=headers)
    except StoreBusy as exc:
        get_logger().warning("store_busy", path=request.path, detail=str(exc))
        detail = ("ingest is shutting down; retry shortly" if isinstance(exc, CommitterStopped)
                  else "the database is busy; retry shortly")
        return error_response(503, "store_busy", detail,
                              headers={hdrs.RETRY_AFTER: str(RETRY_AFTER_S)})
    except StoreUnavailable as exc:
        # Unreachable, restarting or read-only for a while: nothing was committed, so the
        # client may send the same event again (duplicates are recognised by id).
        request.app[OUTAGE_KEY].failed(exc, during=request.path)
        return error_response(503, "store_unavailable",
                              "the database is unavailable; retry shortly",
                              headers={hdrs.RETRY_AFTER: str(RETRY_AFTER_S)})
    except Exception:  # noqa: BLE001  (the boundary: log it all, tell the client nothing)
        get_logger().exception("request_failed", method=request.method, path=request.path)
        return error_response(500, "internal_error", "an unexpected error occurred")

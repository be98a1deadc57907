"""Inbound provider webhooks: `POST /v1/sources/{name}` and the sources admin API.

Routes:
    POST   /v1/sources/{name}         the provider's request exactly as sent. Verified by the
                                      source's scheme (ingest/source_verify.py) on the raw
                                      bytes, then stored and answered by the same accept
                                      step as POST /v1/events (ingest/accept.py):
                                      202 {"event_id", "message_id", "jobs"} once committed,
                                      200 {..., "jobs": 0, "duplicate": true} for a repeated id,
                                      503 store_busy / store_unavailable with Retry-After,
                                      401 {"error": "signature_invalid", "detail": reason},
                                      400 {"error": "invalid_event", ...} (signed, unusable),
                                      404 {"error": "source_not_found", ...}, 413 too large,
                                      429 {"error": "rate_limited", ...} with Retry-After
                                      (ingest/rate_limit.py; off by default).
    GET    /v1/admin/sources          live sources, secrets redacted.
    POST   /v1/admin/sources          {"name", "scheme", "secret"?}: 201; a generated secret is
                                      returned once.
    DELETE /v1/admin/sources/{name}   soft delete.
The admin routes share the admin API's authorization (the admin token).

Nothing is stored before the signature passes: the (source, id) dedupe key is claimed only
inside the fan-out transaction of an already verified event, so a forged request cannot
burn a real event's id. The stored body is the received bytes; what we deliver onward is
signed with the destination's secret (our signature), never the provider's. Each delivery
also says where the event came from (`webhook-source`, `webhook-source-id`) and passes the
provider's identifying headers through (e.g. `X-GitHub-Event`): shared/policy/forwarding.py.

Sources are cached per process for :data:`SOURCE_CACHE_TTL_S` (unknown names too), so a
flood of provider requests costs no store read each; an added, removed or re-keyed source
takes effect within that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aiohttp import hdrs, web

from hookline.ingest import admin_api
from hookline.ingest.accept import accept_event, traced
from hookline.ingest.app_state import CONFIG_KEY, request_store
from hookline.ingest.http_common import check_rate, error_response, read_bounded
from hookline.ingest.source_verify import DEFAULT_TOLERANCE_S, verify
from hookline.ingest.validation import BodyTooLarge
from hookline.shared.endpoint_models import Source
from hookline.shared.errors import InvalidEvent, InvalidSetting, NotFound, SignatureInvalid
from hookline.shared.logs import get_logger
from hookline.shared.models import NewEvent
from hookline.shared.policy import rules
from hookline.shared.policy.forwarding import source_headers
from hookline.shared.policy.inputs import refuse_unknown
from hookline.shared.policy.sources import check_source, generate_source_secret
from hookline.shared.store import Store
from hookline.shared.views import source_removed_view, source_view

SOURCE_FIELDS = ("name", "scheme", "secret")
"""The fields `POST /v1/admin/sources` takes."""
SOURCE_ROUTE = "POST /v1/sources/{name}"
"""The request span's name while tracing is on: the route's pattern, one name for every
source (a bounded set of span names)."""
SOURCE_CACHE_TTL_S = 1.0
"""How long a looked-up source (or its absence) is reused before reading the store again, s."""

_CACHE_MAX_ENTRIES = 1024  # names cached at once; the cache is emptied when it is full


class SourceCache:
    """Sources by name, each re-read from the store after `ttl_s` seconds.

    Args:
        ttl_s: how long an entry (a source, or "no such source") is reused, seconds.
        clock: monotonic seconds; tests may pass their own.
    """

    def __init__(self, ttl_s: float = SOURCE_CACHE_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[str, tuple[float, Source | None]] = {}

    async def get(self, store: Store, name: str) -> Source:
        """The live source named `name`.

        Raises:
            NotFound: no live source has that name (as of at most `ttl_s` seconds ago).
            StoreBusy, StoreError: the store could not be read.
        """
        now = self._clock()
        entry = self._entries.get(name)
        if entry is None or now - entry[0] >= self.ttl_s:
            try:
                source: Source | None = await store.get_source(name)
            except NotFound:
                source = None
            if len(self._entries) >= _CACHE_MAX_ENTRIES:
                self._entries.clear()  # unknown names cannot grow memory without bound
            entry = (now, source)
            self._entries[name] = entry
        if entry[1] is None:
            raise NotFound(f"no source named {name!r}")
        return entry[1]

    def forget(self, name: str) -> None:
        """Drop `name`'s entry (after this process added or removed it)."""
        self._entries.pop(name, None)


SOURCE_CACHE_KEY = web.AppKey("source_cache", SourceCache)


def register(app: web.Application) -> None:
    """Add the source routes to the ingest app (see the module docstring)."""
    app[SOURCE_CACHE_KEY] = SourceCache()
    app.router.add_post("/v1/sources/{name}", post_source_event)
    for method, path, handler in (("GET", "/v1/admin/sources", list_sources),
                                  ("POST", "/v1/admin/sources", add_source),
                                  ("DELETE", "/v1/admin/sources/{name}", remove_source)):
        app.router.add_route(method, path, admin_api.guarded(handler))


async def is_provider_source(request: web.Request, name: str) -> bool:
    """True when `name` is a live configured source (as of at most SOURCE_CACHE_TTL_S ago);
    `POST /v1/events` refuses such a `source` so its callers cannot claim a provider's ids."""
    try:
        await request.app[SOURCE_CACHE_KEY].get(request_store(request), name)
    except NotFound:
        return False
    return True


# -- the provider-facing route -------------------------------------------------------------


async def post_source_event(request: web.Request) -> web.Response:
    """`POST /v1/sources/{name}`: verify on the raw bytes, commit with jobs, then answer; a
    span of its own while tracing is on (as POST /v1/events)."""
    return await traced(request, SOURCE_ROUTE, _post_source_event)


async def _post_source_event(request: web.Request, trace_context: str | None
                             ) -> web.Response:
    """The route's work; `trace_context` (the request span's, stored form) goes with the
    event."""
    name = request.match_info["name"]
    log = get_logger()
    try:
        source = await request.app[SOURCE_CACHE_KEY].get(request_store(request), name)
    except NotFound as exc:
        log.info("event_rejected", source=name, error="source_not_found")
        return error_response(404, "source_not_found", str(exc))
    max_body_bytes = request.app[CONFIG_KEY].max_body_bytes
    try:
        body = await read_bounded(request, max_body_bytes)
        event_id, event_type = verify(source, body, request.headers, time.time(),
                                      DEFAULT_TOLERANCE_S)
    except BodyTooLarge as exc:
        log.info("event_rejected", source=name, error="body_too_large", detail=str(exc))
        return error_response(413, "body_too_large", str(exc))
    except SignatureInvalid as exc:
        log.info("event_rejected", source=name, scheme=source.scheme,
                 error="signature_invalid", detail=str(exc))
        headers = {hdrs.WWW_AUTHENTICATE: "Bearer"} if source.scheme == "token" else None
        return error_response(401, "signature_invalid", str(exc), headers=headers)
    except InvalidEvent as exc:
        log.info("event_rejected", source=name, error="invalid_event", detail=str(exc))
        return error_response(400, "invalid_event", str(exc), field=exc.field)
    limited = check_rate(request.app, name)  # after verification: forgeries spend nothing
    if limited is not None:
        return limited

    forwarded = source_headers(name, source.scheme, event_id,
                               lambda header: request.headers.getall(header, []))
    event = NewEvent(source=name, source_event_id=event_id, type=event_type, body=body,
                     forwarded_headers=forwarded, trace_context=trace_context)
    return await accept_event(request, event)


# -- admin ---------------------------------------------------------------------------------


async def list_sources(request: web.Request) -> web.Response:
    """`GET /v1/admin/sources`: live sources, secrets redacted."""
    return web.json_response([source_view(s)
                              for s in await request_store(request).list_sources()])


async def add_source(request: web.Request) -> web.Response:
    """`POST /v1/admin/sources` {"name", "scheme", "secret"?}: 201 with the source (400 bad
    or unknown field, 409 name taken); a generated secret is in the answer, once."""
    body: dict[str, Any] = await admin_api.json_body(request)
    refuse_unknown(body, SOURCE_FIELDS, error=InvalidSetting)
    name, scheme = rules.source_name(body.get("name")), rules.source_scheme(body.get("scheme"))
    given = body.get("secret")
    secret = given if given is not None else generate_source_secret(scheme)
    check_source(name, scheme, secret)  # InvalidSetting -> 400 naming the field
    # Conflict (409) when the name is taken.
    source = await request_store(request).add_source(name=name, scheme=scheme, secret=secret)
    request.app[SOURCE_CACHE_KEY].forget(name)
    get_logger().info("source_added", source=name, scheme=scheme, by="admin_api")
    shown_once = secret if given is None else None  # like the CLI
    return web.json_response(source_view(source, generated_secret=shown_once), status=201)


async def remove_source(request: web.Request) -> web.Response:
    """`DELETE /v1/admin/sources/{name}`: soft delete (404 when there is none)."""
    name = request.match_info["name"]
    await request_store(request).remove_source(name)
    request.app[SOURCE_CACHE_KEY].forget(name)
    get_logger().info("source_removed", source=name, by="admin_api")
    return web.json_response(source_removed_view(name))

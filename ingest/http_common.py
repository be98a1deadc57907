"""Answers and request readers every ingest route shares.

Every error is JSON `{"error": code, "detail": text, ...}` (:func:`error_response`). A store
fault is never a 500, since nothing was committed: a busy database answers 503 `store_busy`,
an unreachable, restarting or read-only one 503 `store_unavailable`, both with `Retry-After`
(:func:`store_fault_response`).
"""

from __future__ import annotations

from typing import Any

from aiohttp import hdrs, web
from aiohttp.typedefs import LooseHeaders

from hookline.ingest.app_state import OUTAGE_KEY, RATE_LIMITER_KEY, request_claims
from hookline.ingest.rate_limit import retry_after_s
from hookline.ingest.validation import BodyTooLarge
from hookline.shared.errors import InvalidInput, StoreBusy, StoreClosing, StoreUnavailable
from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT

RETRY_AFTER_S = 1
"""`Retry-After` of a 503 store fault, seconds."""
JSON_TYPE = "application/json"


def error_response(status: int, code: str, detail: str, *,
                   headers: LooseHeaders | None = None, **extra: Any) -> web.Response:
    """The JSON error answer: `{"error": code, "detail": detail, **extra}`."""
    return web.json_response({"error": code, "detail": detail, **extra}, status=status,
                             headers=headers)


def store_fault_response(request: web.Request,
                         exc: StoreUnavailable | StoreClosing) -> web.Response:
    """The 503 answer to a transient store fault met while handling `request`.

    StoreBusy (the database is busy) and StoreClosing (ingest is shutting down) answer
    `store_busy`; any
    other StoreUnavailable (unreachable, restarting, read-only) answers `store_unavailable`
    and is recorded in the app's outage log. Both carry `Retry-After`: nothing was
    committed, so the client may send the same event again (duplicates are recognised by id).
    """
    retry = {hdrs.RETRY_AFTER: str(RETRY_AFTER_S)}
    if isinstance(exc, StoreBusy | StoreClosing):
        get_logger().warning("store_busy", path=request.path, detail=str(exc))
        detail = ("ingest is shutting down; retry shortly" if isinstance(exc, StoreClosing)
                  else "the database is busy; retry shortly")
        return error_response(503, "store_busy", detail, headers=retry)
    request.app[OUTAGE_KEY].failed(exc, during=request.path)
    return error_response(503, "store_unavailable", "the database is unavailable; retry shortly",
                          headers=retry)


def check_rate(app: web.Application, source: str,
               tenant: str = DEFAULT_TENANT) -> web.Response | None:
    """Spend one of `tenant`'s rate-limit tokens for `source` (ingest/rate_limit.py).

    Returns:
        None when the event may be stored; else the 429 `rate_limited` answer, with
        `Retry-After` in whole seconds (at least 1).
    """
    limiter = app[RATE_LIMITER_KEY]
    wait_s = limiter.take(source, tenant)
    if wait_s is None:
        return None
    retry_s = retry_after_s(wait_s)
    get_logger().info("event_rejected", source=source, tenant=tenant, error="rate_limited",
                      retry_after_s=retry_s)
    whose = "" if tenant == DEFAULT_TENANT else f" of tenant {tenant!r}"
    return error_response(
        429, "rate_limited", f"source {source!r}{whose} sent more than "
        f"{limiter.rate_per_s:g} events/s (burst {limiter.burst}); retry in {retry_s} s",
        headers={hdrs.RETRY_AFTER: str(retry_s)})


class UnsupportedMediaType(Exception):
    """The request's Content-Type is present and is not JSON in UTF-8."""


def check_content_type(request: web.Request) -> None:
    """Accept `application/json` (charset utf-8 or none) or no Content-Type at all.

    Raises:
        UnsupportedMediaType: another type, or another charset.
    """
    if hdrs.CONTENT_TYPE not in request.headers:
        return  # some HTTP libraries send none for raw bytes; the body must be JSON anyway
    if request.content_type != JSON_TYPE:
        raise UnsupportedMediaType(f"Content-Type must be {JSON_TYPE}, not "
                                   f"{request.content_type or 'empty'}")
    charset = request.charset
    if charset is not None and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        raise UnsupportedMediaType(f"charset must be utf-8, not {charset}")


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


ACTOR_HEADER = "X-Hookline-Actor"
"""Optional request header naming the person or system an admin call acts for (audit lines)."""
MAX_ACTOR_CHARS = 128
"""The actor is logged cut to this many characters."""


def requester(request: web.Request) -> dict[str, Any]:
    """Who made an admin or tenant API request, for its audit line: `by` "admin_api" or
    "tenant_api", `client` (the peer address; a reverse proxy's own when behind one) and
    `actor`: `tenant:<id>` for a tenant token, else the X-Hookline-Actor header (unprintable
    characters as `?`), or None."""
    claims = request_claims(request)
    if claims is not None:
        return {"by": "tenant_api", "client": request.remote, "actor": f"tenant:{claims.tenant}"}
    actor = request.headers.get(ACTOR_HEADER)
    if actor is not None:
        actor = "".join(c if c.isprintable() else "?" for c in actor[:MAX_ACTOR_CHARS])
    return {"by": "admin_api", "client": request.remote, "actor": actor}


def acting(request: web.Request) -> str:
    """Who acts, for a log line's `by`: "admin_api", or `tenant:<id>` for a tenant token."""
    claims = request_claims(request)
    return "admin_api" if claims is None else f"tenant:{claims.tenant}"


async def bounded_body(request: web.Request, limit_bytes: int) -> bytes:
    """:func:`read_bounded` for the admin and tenant APIs: the whole body however many reads
    it arrives in (one read returns only what is buffered so far), at most `limit_bytes`.

    Raises:
        InvalidInput("body"): the body is longer than `limit_bytes` (400).
    """
    try:
        return await read_bounded(request, limit_bytes)
    except BodyTooLarge:
        raise InvalidInput("body", f"larger than {limit_bytes} bytes") from None

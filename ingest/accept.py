"""The accept-and-answer step both POST routes end with (`/v1/events`, `/v1/sources/{name}`),
and the request span both run in while tracing is on (:func:`traced`).

The event is committed with its jobs through the app's group committer (the store wakes the
workers as part of that commit), and only then answered:

* 202 `{"event_id", "message_id", "jobs"}` for a new event (log `event_accepted`);
* 200 `{..., "jobs": 0, "duplicate": true}` for a repeated (tenant, source, id)
  (`event_duplicate`);
* 404 `tenant_not_found` / 403 `tenant_disabled` (field `tenant`) for an event whose tenant
  does not exist (and Config.tenants_auto_create is off) or is disabled: nothing stored;
* 503 `store_busy` / `store_unavailable` with `Retry-After` when the store could not commit
  it (ingest/http_common.py); any other error propagates to the app's 500 boundary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from hookline.ingest.app_state import COMMITTER_KEY, OUTAGE_KEY, TRACING_KEY
from hookline.ingest.http_common import JSON_TYPE, error_response, store_fault_response
from hookline.shared.errors import StoreClosing, StoreUnavailable
from hookline.shared.logs import get_logger, logs_info
from hookline.shared.models import Accepted, Duplicate, NewEvent, TenantRefused
from hookline.shared.policy.inputs import clip


async def traced(request: web.Request, route: str,
                 handle: Callable[[web.Request, str | None], Awaitable[web.Response]]
                 ) -> web.Response:
    """Run an event route's `handle(request, trace_context)`: with tracing off, with None;
    with it on, inside a request span named `route` (continuing the caller's `traceparent`,
    if any), with that span's stored context for the event (its deliveries' attempts are
    the span's children) and the answer's status recorded on it."""
    tracing = request.app[TRACING_KEY]
    if tracing is None:
        return await handle(request, None)
    with tracing.request(route, request.headers) as span:
        response = await handle(request, tracing.stored_context(span))
        tracing.answered(span, response.status)
        return response


async def accept_event(request: web.Request, event: NewEvent) -> web.Response:
    """Commit `event` (already authenticated, validated and rate-checked), then answer it.

    Args:
        request: the request that carried the event; its app holds the committer.
        event: the event to store and fan out.

    Returns:
        202 accepted, 200 duplicate, 404/403 for the tenant, or a 503 store fault answer
        (module docstring).
    """
    app = request.app
    try:
        result = await app[COMMITTER_KEY].submit(event)
    except (StoreUnavailable, StoreClosing) as exc:  # transient, nothing committed
        return store_fault_response(request, exc)
    app[OUTAGE_KEY].succeeded()
    if isinstance(result, Accepted):
        if logs_info():  # the line's fields cost more than the answer when nobody reads them
            get_logger().info("event_accepted", **_ids(result, event),
                              jobs=len(result.job_ids), job_ids=list(result.job_ids))
        return web.Response(body=accepted_body(result), status=202,
                            content_type=JSON_TYPE, charset="utf-8")
    if isinstance(result, TenantRefused):
        get_logger().info("event_refused", reason=result.reason, tenant=result.tenant,
                          source=event.source, source_event_id=event.source_event_id)
        if result.reason == "tenant_not_found":
            return error_response(404, result.reason, f"no tenant {clip(result.tenant)!r}",
                                  field="tenant")
        return error_response(403, result.reason, f"tenant {clip(result.tenant)!r} is "
                              "disabled: its events are refused", field="tenant")
    get_logger().info("event_duplicate", **_ids(result, event))
    return web.json_response({"event_id": result.event_id, "message_id": result.message_id,
                              "jobs": 0, "duplicate": True}, status=200)


def _ids(result: Accepted | Duplicate, event: NewEvent) -> dict[str, Any]:
    """The identifying fields of an accept log line."""
    return {"event_id": result.event_id, "message_id": result.message_id,
            "source": event.source, "source_event_id": event.source_event_id,
            "type": event.type, "tenant": event.tenant}


def accepted_body(result: Accepted) -> bytes:
    """The 202 body `{"event_id", "message_id", "jobs"}` as JSON bytes, written directly: the
    id is an integer and the message id holds only `msg_` and base32 letters, so nothing
    needs escaping (the encoder's per-answer cost is ingest's hot path)."""
    return b'{"event_id": %d, "message_id": "%s", "jobs": %d}' % (
        result.event_id, result.message_id.encode(), len(result.job_ids))

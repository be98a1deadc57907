"""Routes that check a destination without changing it: a payload filter's dry run over the
newest stored events, and a test delivery that answers with its first attempt's outcome. The
admin API and the tenant API share the handlers (the tenant is the token's for the latter:
ingest/tenant_scope.py).

    POST /v1/admin/destinations/{name}/filter-test   {filter?, last?} (and ?tenant=)
    POST /v1/admin/destinations/{name}/test          {type?}, ?wait=false (and ?tenant=)
    POST /v1/tenant/destinations/{name}/filter-test, .../test   the same for the token's tenant
"""

from __future__ import annotations

import dataclasses

from aiohttp import web

from hookline.ingest.admin_api import guarded, json_body
from hookline.ingest.app_state import app_config, request_store
from hookline.ingest.http_common import requester
from hookline.ingest.tenant_scope import refuse_metadata_filter, request_tenant
from hookline.shared.errors import InvalidInput
from hookline.shared.logs import get_logger
from hookline.shared.policy import filters, inputs
from hookline.shared.policy.filters import FIELD as FILTER_FIELD
from hookline.shared.store.delivery_probe import (
    CLAIM_ALLOWANCE_S,
    delivery_probe_view,
    first_outcome,
)

DEFAULT_FILTER_TEST_EVENTS = 50
MAX_FILTER_TEST_EVENTS = 1000
"""Most stored events one filter-test matches (each body is parsed once)."""
def register(app: web.Application) -> None:
    """Add the admin routes (the tenant API lists its own in ingest/tenant_api.py)."""
    app.router.add_route("POST", "/v1/admin/destinations/{name}/filter-test",
                         guarded(filter_test))
    app.router.add_route("POST", "/v1/admin/destinations/{name}/test", guarded(send_test))


async def filter_test(request: web.Request) -> web.Response:
    """`POST .../destinations/{name}/filter-test` `{"filter"?: {...} | null, "last"?: N}`:
    which of the tenant's newest `last` stored events the filter (the given one, else the
    destination's own) would let through, newest first. Changes nothing."""
    body = await json_body(request)
    inputs.refuse_unknown(body, (FILTER_FIELD, "last"))
    last = inputs.whole_number("last", body.get("last"), default=DEFAULT_FILTER_TEST_EVENTS,
                               high=MAX_FILTER_TEST_EVENTS)
    name, tenant = request.match_info["name"], await request_tenant(request)
    store = request_store(request)
    given = FILTER_FIELD in body
    if given:
        refuse_metadata_filter(request, filters.check_filter(body[FILTER_FIELD]))
    found = await store.filter_test(name, tenant=tenant, filter=body.get(FILTER_FIELD),
                                    use_stored=not given, last=last)
    used = body.get(FILTER_FIELD) if given else (
        await store.get_destination(name, tenant=tenant)).filter
    events = [dataclasses.asdict(r) for r in found]
    return web.json_response({
        "destination": name, "filter": used or None, "last": last,
        "matched": sum(1 for r in found if r.subscribed and r.matched),
        "filtered": sum(1 for r in found if r.subscribed and not r.matched),
        "not_subscribed": sum(1 for r in found if not r.subscribed), "events": events})


async def send_test(request: web.Request) -> web.Response:
    """`POST .../destinations/{name}/test` `{"type"?: T}`, `?wait=false`: a test event (a
    `hookline.ping` unless `type`) to this destination alone, delivered as any other (signed,
    retried). Waits for its first attempt (at most the attempt timeout and
    CLAIM_ALLOWANCE_S): 200 with the outcome; 202 with the job's state when it is not done
    by then, or at once with `?wait=false` or when the destination is paused (it takes no
    attempt until resumed)."""
    body = await json_body(request)
    inputs.refuse_unknown(body, ("type",))
    event_type = body.get("type")
    if event_type is not None and (not isinstance(event_type, str)
                                   or not inputs.EVENT_TYPE_RE.fullmatch(event_type)):
        raise InvalidInput("type", f"must match {inputs.EVENT_TYPE_RE.pattern}, "
                                   f"not {event_type!r}")
    wait = _wait_flag(request.query.get("wait"))
    name, tenant = request.match_info["name"], await request_tenant(request)
    store = request_store(request)
    sent = await store.send_test_event(name, tenant=tenant, event_type=event_type)
    get_logger().info("test_delivery_queued", destination=name, tenant=tenant,
                      event_id=sent.event_id, job_id=sent.job_id, **requester(request))
    if not wait:
        return web.json_response(delivery_probe_view(sent), status=202)
    dest = await store.get_destination(name, tenant=tenant)
    # A paused destination takes no attempt until resumed: answer at once (waited_s 0).
    bound_s = 0.0 if dest.paused else (
        (dest.timeout_s or app_config(request.app).attempt_timeout_s) + CLAIM_ALLOWANCE_S)
    story, attempt = await first_outcome(store, sent.job_id, tenant, bound_s)
    return web.json_response(delivery_probe_view(sent, story, attempt, bound_s),
                             status=202 if attempt is None else 200)


def _wait_flag(value: str | None) -> bool:
    if value is None or value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise InvalidInput("wait", f"must be true or false, not {inputs.clip(value)!r}")


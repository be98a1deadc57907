"""Routes that check a destination without changing it: a payload filter's dry run over the
newest stored events, and a test delivery that answers with its first attempt's outcome. The
admin API and the tenant API share the handlers (the tenant is the token's for the latter:
ingest/tenant_scope.py).

    POST /v1/admin/destinations/{name}/filter-test   {filter?, last?} (and ?tenant=)
    POST /v1/admin/destinations/{name}/test          {type?}, ?wait=false (and ?tenant=)
    POST /v1/tenant/destinations/{name}/filter-test, .../test   the same for the token's tenant
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from aiohttp import web

from hookline.ingest.admin_api import guarded, json_body
from hookline.ingest.app_state import app_config, request_store
from hookline.ingest.http_common import requester
from hookline.ingest.tenant_scope import request_tenant
from hookline.shared.errors import InvalidInput
from hookline.shared.logs import get_logger
from hookline.shared.policy import inputs
from hookline.shared.policy.filters import FIELD as FILTER_FIELD
from hookline.shared.record_models import Attempt, JobStory
from hookline.shared.store.metric_deltas import outcome_class

DEFAULT_FILTER_TEST_EVENTS = 50
MAX_FILTER_TEST_EVENTS = 1000
"""Most stored events one filter-test matches (each body is parsed once)."""
CLAIM_ALLOWANCE_S = 2.0
"""How long a test delivery may wait for a worker to claim its job, on top of the attempt
timeout, before the route answers with the job's state instead of its outcome."""
_POLL_FIRST_S, _POLL_MAX_S = 0.02, 0.25
"""How often the test route reads its job while waiting: soon at first, then less often."""
NOT_OUTCOMES = frozenset({"worker_lost", "handed_back"})
"""Attempt classes that end without the receiver's answer: the job is tried again."""


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
    by then, or at once with `?wait=false`."""
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
    out: dict[str, Any] = dataclasses.asdict(sent)
    if not wait:
        return web.json_response(out, status=202)
    dest = await store.get_destination(name, tenant=tenant)
    bound_s = (dest.timeout_s or app_config(request.app).attempt_timeout_s) + CLAIM_ALLOWANCE_S
    story, attempt = await _first_outcome(request, sent.job_id, tenant, bound_s)
    out["job_status"] = story.job.status
    if attempt is None:
        out.update(attempt=None, waited_s=bound_s)
        return web.json_response(out, status=202)
    out["attempt"] = {
        "attempt": attempt.attempt, "outcome": outcome_class(attempt.error, attempt.status_code),
        "status_code": attempt.status_code, "duration_s": attempt.duration_s,
        "error": attempt.error, "response_excerpt": attempt.response_excerpt,
        "started_at": attempt.started_at}
    return web.json_response(out)


def _wait_flag(value: str | None) -> bool:
    if value is None or value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise InvalidInput("wait", f"must be true or false, not {inputs.clip(value)!r}")


async def _first_outcome(request: web.Request, job_id: int, tenant: str,
                         bound_s: float) -> tuple[JobStory, Attempt | None]:
    """The job and its first finished attempt that got the receiver's answer (or failed to
    reach it), reading the job until one is there or `bound_s` seconds have passed."""
    store = request_store(request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    pause = _POLL_FIRST_S
    while True:
        story = await store.get_job(job_id, tenant=tenant)
        for attempt in story.attempts:
            if attempt.duration_s is not None and outcome_class(
                    attempt.error, attempt.status_code) not in NOT_OUTCOMES:
                return story, attempt
        left = deadline - loop.time()
        if left <= 0:
            return story, None
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, _POLL_MAX_S)

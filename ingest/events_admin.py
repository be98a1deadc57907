"""The admin API's event lookup, event listing, resend and retry now (under `/v1/admin/`,
behind the same bearer token and error mapping as ingest/admin_api.py).

Routes (JSON shapes in shared/views.py; errors are `{"error": code, "detail": text}`, with
`"field"` naming the input a 400 refuses, as in ingest/admin_api.py):
    GET  /v1/admin/events/{ref}?source=&tenant=  one event and its jobs; `ref` is an
                                             internal id, a `msg_` webhook-id or the
                                             sender's id (in `source`, default `api`, of
                                             `tenant`; none: `_default`'s, else the one
                                             tenant's that has it); 404 names what was
                                             looked for (and the tenants, if several)
    GET  /v1/admin/events?destination=&tenant=&status=&type=&since=&until=&limit=&before=
                                             newest first; `before` = the previous page's
                                             `next_before` (keyset paging by id)
    POST /v1/admin/jobs/{id}/resend          {reason?, dry_run?}: a done or dead job again
    POST /v1/admin/jobs/{id}/retry-now       {reason?, dry_run?}: a pending job due now
    POST /v1/admin/resend                    {destination, tenant?, status?, since?,
                                             until?, limit?, dry_run?, reason?}
    POST /v1/admin/retry-now                 {destination, tenant?, since?, until?, limit?,
                                             dry_run?, reason?}

A destination name means the default tenant's unless `tenant` is given; `tenant` alone
narrows the event list to that tenant's events. A `destination` that tenant has no
destination of (live, or removed by the name it keeps, `NAME~removed-ID`) is 404 naming the
tenants that have one (ingest/tenant_scope.py), not an empty page; on the tenant API
(`/v1/tenant/events`, same handler) a plain 404 naming only the destination.

Every resend and retry now that is not a dry run logs one audit line, `jobs_resent` or
`jobs_retried_now`, with who asked (the client's address and the optional `X-Hookline-Actor`
header), the `reason`, the filters, the count and the first job ids.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hookline.ingest.admin_api import guarded, json_body
from hookline.ingest.app_state import request_store, tenant_scope
from hookline.ingest.http_common import requester
from hookline.ingest.tenant_scope import (
    check_destination_filter,
    listed_tenant_filter,
    request_tenant,
)
from hookline.shared.operator_models import (
    BULK_DEFAULT_LIMIT,
    BULK_MAX_LIMIT,
    RESEND_STATUSES,
    EventFilter,
    JobSelection,
    audit,
)
from hookline.shared.policy import inputs
from hookline.shared.store import Store, resolve_instants
from hookline.shared.views import bulk_result_view, event_lookup_view, events_page_view

_SINGLE_FIELDS = frozenset({"reason", "dry_run"})
_BULK_FIELDS = frozenset({"destination", "tenant", "since", "until", "limit", "dry_run",
                          "reason"})


def register(app: web.Application) -> None:
    """Add the routes of the module docstring to the ingest app."""
    routes = [
        ("GET", "/v1/admin/events", list_events),
        ("GET", "/v1/admin/events/{ref}", get_event),
        ("POST", "/v1/admin/jobs/{id}/resend", resend_job),
        ("POST", "/v1/admin/jobs/{id}/retry-now", retry_job_now),
        ("POST", "/v1/admin/resend", resend_bulk),
        ("POST", "/v1/admin/retry-now", retry_now_bulk),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, guarded(handler))


async def get_event(request: web.Request) -> web.Response:
    """`GET /v1/admin/events/{ref}?source=NAME`: the event and its jobs."""
    match = await request_store(request).find_event(request.match_info["ref"],
                                                    request.query.get("source"),
                                                    tenant=await listed_tenant_filter(request))
    return web.json_response(event_lookup_view(match))


async def list_events(request: web.Request) -> web.Response:
    """`GET /v1/admin/events?...`: a page of events, newest first, with their jobs."""
    query = request.query
    status = inputs.job_status("status", query.get("status"))
    limit = inputs.list_limit(query.get("limit"), 100)
    since = inputs.instant("since", query.get("since"))
    until = inputs.instant("until", query.get("until"))
    before_id = inputs.page_before(query.get("before"))
    store = request_store(request)
    since_s, until_s = await resolve_instants(store, since, until)
    flt = EventFilter(destination=query.get("destination"),
                      tenant=await listed_tenant_filter(request), status=status,
                      type=query.get("type"), since_s=since_s, until_s=until_s,
                      before_id=before_id, limit=limit).check()  # bad input: 400 first
    await check_destination_filter(request, flt.destination, flt.tenant)  # none: 404
    events = await store.list_events(flt)
    return web.json_response(events_page_view(events, limit))


async def resend_job(request: web.Request) -> web.Response:
    """`POST /v1/admin/jobs/{id}/resend`: a done or dead job goes out again."""
    return await _single(request, "resend")


async def retry_job_now(request: web.Request) -> web.Response:
    """`POST /v1/admin/jobs/{id}/retry-now`: a pending job's next attempt is now."""
    return await _single(request, "retry_now")


async def resend_bulk(request: web.Request) -> web.Response:
    """`POST /v1/admin/resend`: a destination's done and/or dead jobs go out again."""
    return await _bulk(request, "resend")


async def retry_now_bulk(request: web.Request) -> web.Response:
    """`POST /v1/admin/retry-now`: a destination's pending jobs are due now."""
    return await _bulk(request, "retry_now")


async def _single(request: web.Request, action: str) -> web.Response:
    body = await json_body(request)
    inputs.refuse_unknown(body, _SINGLE_FIELDS)
    job_id = inputs.whole_number("id", request.match_info["id"])
    return await run_action(request, action,
                            JobSelection(job_id=job_id, tenant=tenant_scope(request)), body)


async def _bulk(request: web.Request, action: str) -> web.Response:
    body = await json_body(request)
    allowed = _BULK_FIELDS | ({"status"} if action == "resend" else set())
    inputs.refuse_unknown(body, allowed)
    destination = inputs.required_name("destination", body.get("destination"))
    status = inputs.job_status("status", body.get("status"), RESEND_STATUSES)
    selection = await window_selection(request, body, destination=destination, status=status)
    return await run_action(request, action, selection, body)


async def window_selection(request: web.Request, body: dict[str, Any], *, destination: str,
                           status: str | None) -> JobSelection:
    """The jobs of one destination (of the request's tenant) created in the body's `since` /
    `until` window, at most its `limit`, in `status` (None: any the action takes).

    Raises:
        InvalidInput: a bad `since`, `until` or `limit`.
        NotFound: no such live destination (404); on the admin API, where the body names
            it, one naming the tenants that have one when the tenant has none of that name
            (a removed one's name is a plain 404).
    """
    since = inputs.instant("since", body.get("since"))
    until = inputs.instant("until", body.get("until"))
    limit = inputs.whole_number("limit", body.get("limit"), default=BULK_DEFAULT_LIMIT,
                                high=BULK_MAX_LIMIT)
    tenant = await request_tenant(request, body)
    store = request_store(request)
    since_s, until_s = await resolve_instants(store, since, until)
    selection = JobSelection(destination=destination, tenant=tenant, status=status,
                             since_s=since_s, until_s=until_s, limit=limit)
    # a live one of the tenant, else 404 (answering_errors names who has one)
    await store.get_destination(destination, tenant=tenant)
    return selection


async def run_action(request: web.Request, action: str, selection: JobSelection,
                     body: dict[str, Any]) -> web.Response:
    """Resend or retry now (`action`) the jobs of `selection`, with the body's `dry_run`
    and `reason`; audited (who: :func:`hookline.ingest.http_common.requester`) unless a dry
    run. Answers the bulk result view."""
    dry_run = inputs.flag("dry_run", body.get("dry_run"))
    reason = inputs.optional_text("reason", body.get("reason"))
    store: Store = request_store(request)
    operation = store.resend if action == "resend" else store.retry_now
    result = await operation(selection, dry_run=dry_run)
    if not dry_run:
        audit(action, result, selection, reason, **requester(request))
    return web.json_response(bulk_result_view(action, result))

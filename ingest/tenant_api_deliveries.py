"""The tenant API's delivery routes that the admin API has no twin of: a destination's stats,
recover, and the tenant's jobs and one job's story (routes and capabilities in
ingest/tenant_api.py; the tenant is the token's; the test delivery, which the admin API has
too, is in ingest/destination_checks.py).

A tenant sees its jobs and attempts without the service's internals: no worker names
(`lease_owner`, an attempt's `worker`) and no lease tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from hookline.ingest.admin_api import json_body
from hookline.ingest.app_state import request_store, token_tenant
from hookline.ingest.events_admin import run_action, window_selection
from hookline.ingest.tenant_scope import check_destination_filter
from hookline.shared.policy import inputs
from hookline.shared.record_models import Job, JobStory
from hookline.shared.store.tenant_reads_tx import DestinationStats
from hookline.shared.views import job_story_view, job_view

DEFAULT_STATS_WINDOW_S = 3600
MAX_STATS_WINDOW_S = 30 * 86_400
RECOVER_FIELDS = ("since", "until", "limit", "dry_run", "reason")
_HIDDEN_JOB_FIELDS = ("lease_owner", "tenant")  # a tenant sees only its own jobs
_HIDDEN_ATTEMPT_FIELDS = ("worker", "lease_token")


def stats_view(stats: DestinationStats) -> dict[str, Any]:
    """A destination's stats as the tenant API answers them (schema `TenantDestinationStats`;
    fields: :class:`hookline.shared.store.tenant_reads_tx.DestinationStats`)."""
    return {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}


def tenant_job_view(job: Job) -> dict[str, Any]:
    """One job as a tenant sees it: :func:`hookline.shared.views.job_view` without worker
    names."""
    return {k: v for k, v in job_view(job).items() if k not in _HIDDEN_JOB_FIELDS}


def tenant_job_story_view(story: JobStory) -> dict[str, Any]:
    """A job and every attempt (status, duration, response excerpt) as a tenant sees them:
    :func:`hookline.shared.views.job_story_view` without worker names and lease tokens."""
    view = {k: v for k, v in job_story_view(story).items() if k not in _HIDDEN_JOB_FIELDS}
    view["attempts"] = [{k: v for k, v in a.items() if k not in _HIDDEN_ATTEMPT_FIELDS}
                        for a in view["attempts"]]
    return view


async def destination_stats(request: web.Request) -> web.Response:
    """`GET /v1/tenant/destinations/{name}/stats?window_s=3600`: its figures over the window."""
    window_s = inputs.whole_number("window_s", request.query.get("window_s"),
                                   default=DEFAULT_STATS_WINDOW_S, high=MAX_STATS_WINDOW_S)
    stats = await request_store(request).destination_stats(
        request.match_info["name"], tenant=token_tenant(request), window_s=window_s)
    return web.json_response(stats_view(stats))


async def recover(request: web.Request) -> web.Response:
    """`POST /v1/tenant/destinations/{name}/recover`: its dead jobs created in the window go
    out again (a resend; `dry_run` only counts)."""
    body = await json_body(request)
    inputs.refuse_unknown(body, RECOVER_FIELDS)
    selection = await window_selection(request, body, destination=request.match_info["name"],
                                       status="dead")
    return await run_action(request, "resend", selection, body)


async def list_jobs(request: web.Request) -> web.Response:
    """`GET /v1/tenant/jobs?destination=&status=&before=&limit=`: the tenant's jobs, newest
    first; `next_before` pages on (null on the last page). A `destination` the tenant has no
    destination of (live, or removed by the name it keeps) is 404, not an empty page."""
    query = request.query
    status = inputs.job_status("status", query.get("status"))
    limit = inputs.list_limit(query.get("limit"), 100)
    before_id = inputs.page_before(query.get("before"))
    tenant, destination = token_tenant(request), query.get("destination")
    await check_destination_filter(request, destination, tenant)  # none: 404, not []
    jobs = await request_store(request).list_tenant_jobs(
        tenant, destination=destination, status=status, before_id=before_id, limit=limit)
    return web.json_response({"jobs": [tenant_job_view(j) for j in jobs],
                              "next_before": jobs[-1].id if len(jobs) >= limit else None})


async def get_job(request: web.Request) -> web.Response:
    """`GET /v1/tenant/jobs/{id}`: one of the tenant's jobs and every attempt."""
    job_id = inputs.whole_number("id", request.match_info["id"])
    story = await request_store(request).get_job(job_id, tenant=token_tenant(request))
    return web.json_response(tenant_job_story_view(story))

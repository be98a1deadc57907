"""The admin HTTP API under `/v1/admin/`, and `GET /metrics`.

Routes (all JSON; errors are `{"error": code, "detail": text}`, and input the rule book
(shared/policy/rules.py, shared/policy/inputs.py) refuses is 400 `invalid_request` with
`"field"` naming the body field, query or path parameter (`body` for the body as a whole) and
the same `detail` text the CLI prints; a destination address the outbound guard refuses is 400
`destination_blocked` with `"field": "url"`):
    GET    /v1/admin/stats?tenant=              store.stats(tenant): per-destination counts of one
                                                tenant (default: the default tenant)
    GET    /v1/admin/destinations?tenant=       list (secrets redacted), each with its
                                                `tenant`; every tenant's when absent
    POST   /v1/admin/destinations               add {name, url, secret?, event_types?,
                                                max_in_flight?, headers?, timeout_s?,
                                                rate_limit_per_s?, ordered?, filter?,
                                                propagate_trace?, tenant?}
                                                (others: 400); a generated secret is
                                                returned once
    GET    /v1/admin/destinations/{name}        one (secret redacted)
    PATCH  /v1/admin/destinations/{name}        change fields of DESTINATION_UPDATERS
    DELETE /v1/admin/destinations/{name}        soft delete; unfinished jobs end dead
    POST   /v1/admin/destinations/{name}/pause  {reason?}
    POST   /v1/admin/destinations/{name}/resume
    POST   /v1/admin/destinations/{name}/rotate-secret, GET .../secret,
           POST .../expire-previous-secret      a destination's secret (ingest/admin_secrets.py)
    POST   /v1/admin/destinations/{name}/filter-test, .../test   a payload filter's dry run;
                                                a test delivery (ingest/destination_checks.py)
    GET    /v1/admin/jobs?status=&limit=        newest first
    GET    /v1/admin/jobs/{id}                  the job, its event facts, its attempts
    GET    /v1/admin/dead?destination=&tenant=&since=&limit=
    POST   /v1/admin/replay                     {job_id | all_dead, destination?, tenant?,
                                                since?, dry_run?}
    POST   /v1/admin/purge                      {bodies_older_than?, metadata_older_than?,
                                                dedupe_keep?} (durations like "7d")
    GET    /metrics                             Prometheus text (ingest/metrics.py)

Tenants: every route naming a destination takes `?tenant=ID` (the create body `"tenant"`):
names are unique within a tenant only, so a name means the default tenant's (`_default`)
unless a tenant is given; a tenant that does not exist is 404 naming it (ingest/tenant_scope.py).
A destination filter (`?destination=` of dead and events, the `"destination"` of replay,
resend and retry now) that tenant has no destination of is 404 `not_found`, never an empty
list or a count of 0: `field` "destination", `tenant` (the tenant looked in) and
`other_tenants` / `other_tenants_total` (the tenants that do have one), and a `detail` like
the CLI's ending in the hint `pass tenant=ID`.

Access: every route requires `Authorization: Bearer <admin_token>` (ingest/auth.py); with no
admin_token configured every request gets 403 `auth_not_configured`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import hdrs, web

from hookline.ingest import metrics
from hookline.ingest.app_state import app_config, request_claims, request_reader, request_store
from hookline.ingest.auth import ADMIN_SETTING, check_bearer
from hookline.ingest.http_common import acting, bounded_body, error_response
from hookline.ingest.subscription_check import subscription_warnings
from hookline.ingest.tenant_scope import (
    TENANT_PARAM,
    DestinationNotFound,
    check_destination_filter,
    existing_tenant_filter,
    listed_tenant_filter,
    refuse_metadata_filter,
    request_tenant,
)
from hookline.shared.catalogue import SubscriptionRefused
from hookline.shared.errors import (
    ConfigError,
    Conflict,
    DestinationBlocked,
    DestinationMissing,
    InvalidInput,
    NotFound,
)
from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.operator_models import scope_tenant
from hookline.shared.policy import inputs, rules
from hookline.shared.policy.netguard import vet_destination
from hookline.shared.signing import generate_secret
from hookline.shared.store import resolve_instants
from hookline.shared.views import (
    dead_letter_view,
    destination_removed_view,
    destination_view,
    job_story_view,
    job_view,
    paused_view,
    purge_result_view,
    replay_result_view,
    resumed_view,
    stats_view,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_MAX_ADMIN_BODY = 64 * 1024
REPLAY_FIELDS = ("job_id", "all_dead", "destination", "tenant", "since", "dry_run")


def register(app: web.Application) -> None:
    """Add the admin routes and /metrics to the ingest app (see the module docstring)."""
    routes = [
        ("GET", "/v1/admin/stats", stats),
        ("GET", "/v1/admin/destinations", list_destinations),
        ("POST", "/v1/admin/destinations", add_destination),
        ("GET", "/v1/admin/destinations/{name}", get_destination),
        ("PATCH", "/v1/admin/destinations/{name}", update_destination),
        ("DELETE", "/v1/admin/destinations/{name}", remove_destination),
        ("POST", "/v1/admin/destinations/{name}/pause", pause),
        ("POST", "/v1/admin/destinations/{name}/resume", resume),
        ("GET", "/v1/admin/jobs", list_jobs),
        ("GET", "/v1/admin/jobs/{id}", get_job),
        ("GET", "/v1/admin/dead", list_dead),
        ("POST", "/v1/admin/replay", replay),
        ("POST", "/v1/admin/purge", purge),
        ("GET", "/metrics", metrics_handler),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, guarded(handler))


# -- access and errors ---------------------------------------------------------------------


def _authorize(request: web.Request) -> web.Response | None:
    """None when the request may proceed, else the 401/403 answer (ingest/auth.py)."""
    return check_bearer(request, app_config(request.app).admin_token, what="the admin API",
                        setting=ADMIN_SETTING)


def guarded(handler: Handler) -> Handler:
    """Authorize, then map hookline errors to JSON: 400 bad input, 404, 409."""
    answer = answering_errors(handler)

    async def wrapped(request: web.Request) -> web.StreamResponse:
        denied = _authorize(request)
        if denied is not None:
            return denied
        return await answer(request)

    wrapped.__doc__ = handler.__doc__
    return wrapped


def answering_errors(handler: Handler) -> Handler:
    """Map the hookline errors `handler` raises to JSON answers: 400 `invalid_request` (with
    `field`) or `destination_blocked`, 404 `not_found` (with `field` "destination" and, on
    the admin API, the tenants that have one, for a destination filter its tenant has none
    of), 409 `conflict` (the admin and the tenant API alike)."""
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except SubscriptionRefused as exc:  # well-formed, but it would silently never match
            return error_response(422, exc.code, str(exc), field=exc.field,
                                  event_type=exc.event_type, nearest=exc.nearest)
        except InvalidInput as exc:
            return error_response(400, "invalid_request", str(exc), field=exc.field)
        except ConfigError as exc:  # a store refusal no rule names a field for
            return error_response(400, "invalid_request", str(exc))
        except DestinationBlocked as exc:  # only a destination's url is vetted
            return error_response(400, "destination_blocked", str(exc), field="url")
        except DestinationNotFound as exc:
            return error_response(404, "not_found", str(exc), **exc.fields)
        except DestinationMissing as exc:
            return await _destination_missing(request, exc)
        except NotFound as exc:
            return error_response(404, "not_found", str(exc))
        except Conflict as exc:
            return error_response(409, "conflict", str(exc))

    wrapped.__doc__ = handler.__doc__
    return wrapped


async def _destination_missing(request: web.Request, exc: DestinationMissing) -> web.Response:
    """404 for a destination the tenant has none of. On the admin API it names the tenants
    that do have one, as the CLI does (`GET /v1/admin/destinations/billing` without
    `?tenant=`); on the tenant API it says nothing of other tenants."""
    if request_claims(request) is None:
        try:
            await check_destination_filter(request, exc.name, exc.tenant)
        except DestinationNotFound as named:
            field = "name" if "name" in request.match_info else named.fields["field"]
            return error_response(404, "not_found", str(named),
                                  **{**named.fields, "field": field})
    return error_response(404, "not_found", str(exc))


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object body ({} when empty). Raises InvalidInput("body")."""
    raw = await bounded_body(request, _MAX_ADMIN_BODY)
    if not raw.strip():
        return {}
    value = inputs.json_document("body", raw)
    if not isinstance(value, dict):
        raise InvalidInput("body", "must be a JSON object")
    return value


# -- handlers ------------------------------------------------------------------------------


async def stats(request: web.Request) -> web.Response:
    """`GET /v1/admin/stats?tenant=`: the store's counts (see Store.stats), the
    per-destination ones of the tenant named (default: the default tenant)."""
    tenant = await existing_tenant_filter(request) or DEFAULT_TENANT
    return web.json_response(stats_view(await request_reader(request).stats(tenant),
                                        (await request_store(request).health()).wal_bytes))


async def list_destinations(request: web.Request) -> web.Response:
    """`GET /v1/admin/destinations?tenant=`: live destinations, secrets redacted (of one
    tenant, or of every tenant when none is named)."""
    tenant = await existing_tenant_filter(request)
    destinations = await request_store(request).list_destinations(tenant)
    return web.json_response([destination_view(d) for d in destinations])


async def add_destination(request: web.Request) -> web.Response:
    """`POST /v1/admin/destinations`: 201 with the destination; a generated secret once.
    Takes exactly rules.DESTINATION_FIELDS; an unknown field is 400 naming it."""
    body = await json_body(request)
    tenant = await request_tenant(request, body)
    fields = {k: v for k, v in body.items() if k != TENANT_PARAM}
    # The admin API takes `tenant` too; a tenant token acts for its own tenant only.
    taken_apart = (TENANT_PARAM,) if request_claims(request) is None else ()
    new = rules.destination_fields(fields, generated_secret=generate_secret(),
                                   also=taken_apart)
    refuse_metadata_filter(request, new.filter)
    warnings = await subscription_warnings(request, new.event_types)
    await vet_destination(new.url, app_config(request.app).address_policy)
    store = request_store(request)
    dest = await store.add_destination(name=new.name, url=new.url, secret=new.secret,
                                       event_types=new.event_types,
                                       max_in_flight=new.max_in_flight, headers=new.headers,
                                       timeout_s=new.timeout_s,
                                       rate_limit_per_s=new.rate_limit_per_s,
                                       ordered=new.ordered, filter=new.filter,
                                       propagate_trace=new.propagate_trace,
                                       tenant=tenant)  # Conflict: name taken or tenant full
    get_logger().info("destination_added", destination=new.name, tenant=tenant,
                      by=acting(request))
    shown_once = new.secret if body.get("secret") is None else None  # like the CLI
    return web.json_response(_warned(destination_view(dest, generated_secret=shown_once),
                                     warnings), status=201)


async def get_destination(request: web.Request) -> web.Response:
    """`GET /v1/admin/destinations/{name}`: one destination, secret redacted."""
    tenant = await request_tenant(request)
    dest = await request_store(request).get_destination(request.match_info["name"],
                                                        tenant=tenant)
    return web.json_response(destination_view(dest))


async def update_destination(request: web.Request) -> web.Response:
    """`PATCH /v1/admin/destinations/{name}`: JSON object of changeable fields."""
    changes = await json_body(request)
    name = request.match_info["name"]
    tenant = await request_tenant(request)
    checked = rules.destination_changes(changes)  # every field, before the address is resolved
    refuse_metadata_filter(request, checked.get("filter"))
    warnings: list[str] = []
    if "event_types" in changes:
        before = await request_store(request).get_destination(name, tenant=tenant)
        warnings = await subscription_warnings(request, checked["event_types"],
                                               already=before.event_types)
    if "url" in changes:
        await vet_destination(changes["url"], app_config(request.app).address_policy)
    dest = await request_store(request).update_destination(name, tenant=tenant, **changes)
    get_logger().info("destination_updated", destination=name, tenant=tenant,
                      fields=sorted(changes), by=acting(request))
    return web.json_response(_warned(destination_view(dest), warnings))


def _warned(view: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """A destination's answer with the catalogue's `warnings` (a deprecated type subscribed),
    when there are any."""
    return {**view, "warnings": warnings} if warnings else view


async def remove_destination(request: web.Request) -> web.Response:
    """`DELETE /v1/admin/destinations/{name}`: soft delete; unfinished jobs end dead."""
    name = request.match_info["name"]
    tenant = await request_tenant(request)
    ended = await request_store(request).remove_destination(name, tenant=tenant)
    get_logger().info("destination_removed", destination=name, tenant=tenant,
                      jobs_ended=ended, by=acting(request))
    return web.json_response(destination_removed_view(name, ended))


async def pause(request: web.Request) -> web.Response:
    """`POST /v1/admin/destinations/{name}/pause` with optional {"reason": text}."""
    body = await json_body(request)
    reason = body.get("reason", "paused by operator" if acting(request) == "admin_api"
                      else "paused by the tenant")
    if not isinstance(reason, str):
        raise InvalidInput("reason", "must be a string")
    name = request.match_info["name"]
    tenant = await request_tenant(request)
    await request_store(request).set_paused(name, True, reason, tenant=tenant)
    get_logger().info("destination_paused", destination=name, tenant=tenant, reason=reason,
                      by=acting(request))
    return web.json_response(paused_view(name, reason))


async def resume(request: web.Request) -> web.Response:
    """`POST /v1/admin/destinations/{name}/resume`: answers how many of its jobs waiting for
    a later retry were brought forward to now (`brought_forward`)."""
    name = request.match_info["name"]
    tenant = await request_tenant(request)
    brought_forward = await request_store(request).set_paused(name, False, tenant=tenant)
    get_logger().info("destination_resumed", destination=name, tenant=tenant,
                      jobs_brought_forward=brought_forward, by=acting(request))
    return web.json_response(resumed_view(name, brought_forward))


async def list_jobs(request: web.Request) -> web.Response:
    """`GET /v1/admin/jobs?status=S&tenant=T&destination=NAME&before=ID&limit=N`: newest
    first (a bare list; the next page is `before=` the last one's id). A destination the
    tenant (default: the default tenant) has none of is 404 naming who has one, not an
    empty list."""
    status = inputs.job_status("status", request.query.get("status"))
    limit = inputs.list_limit(request.query.get("limit"), 100)
    before_id = inputs.page_before(request.query.get("before"))
    tenant = await listed_tenant_filter(request)  # a deleted one's history too
    destination = request.query.get("destination")
    store = request_store(request)
    if destination is not None:
        await check_destination_filter(request, destination, tenant)  # none: 404, not []
        jobs = await store.list_tenant_jobs(DEFAULT_TENANT if tenant is None else tenant,
                                            destination=destination, status=status,
                                            before_id=before_id, limit=limit)
    else:
        jobs = await store.list_jobs(status=status, limit=limit, tenant=tenant,
                                     before_id=before_id)
    return web.json_response([job_view(j) for j in jobs])


async def get_job(request: web.Request) -> web.Response:
    """`GET /v1/admin/jobs/{id}`: the job's story."""
    job_id = inputs.whole_number("id", request.match_info["id"])
    story = await request_store(request).get_job(job_id)
    return web.json_response(job_story_view(story))


async def list_dead(request: web.Request) -> web.Response:
    """`GET /v1/admin/dead?destination=&tenant=&since=&before=&limit=`: most recently dead
    first, each saying whether it can be replayed (shared/views.py dead_letter_view). A
    bare list (its shape since the start); the next page is `before=` the last one's id,
    404 when that job is no longer dead."""
    since_spec = inputs.instant("since", request.query.get("since"))
    limit = inputs.list_limit(request.query.get("limit"), 100)
    before_id = inputs.page_before(request.query.get("before"))
    store = request_store(request)
    since_s, = await resolve_instants(store, since_spec)
    tenant = await listed_tenant_filter(request)  # a deleted one's history too
    destination = request.query.get("destination")
    await check_destination_filter(request, destination, tenant)  # none: 404, not []
    jobs = await store.list_dead(destination=destination, since_s=since_s, limit=limit,
                                 tenant=tenant, before_id=before_id)
    return web.json_response([dead_letter_view(j) for j in jobs])


async def replay(request: web.Request) -> web.Response:
    """`POST /v1/admin/replay`: {"job_id": N} or {"all_dead": true, "destination"?,
    "since"?}, with "dry_run"? -> {"count", "dry_run"}."""
    body = await json_body(request)
    inputs.refuse_unknown(body, REPLAY_FIELDS)
    job_id = None if body.get("job_id") is None else inputs.whole_number("job_id",
                                                                         body["job_id"])
    all_dead = inputs.flag("all_dead", body.get("all_dead"))
    dry_run = inputs.flag("dry_run", body.get("dry_run"))
    destination = body.get("destination")
    if destination is not None and not isinstance(destination, str):
        raise InvalidInput("destination", "must be a string")
    since_spec = inputs.instant("since", body.get("since"))
    tenant = await existing_tenant_filter(request, body)
    narrowing = {"destination": destination, "tenant": tenant, "since": since_spec}
    if job_id is not None and any(v is not None for v in narrowing.values()):
        raise InvalidInput(next(k for k, v in narrowing.items() if v is not None),
                           "destination, tenant and since filter all_dead, not job_id")
    if (job_id is None) == (not all_dead):
        raise InvalidInput("job_id", "replay needs exactly one of a job id or all_dead")
    if destination is not None:  # none of that name: 404 naming who has one, not a count of 0
        # a removed one's, or none: 404 (answering_errors names who has one)
        await request_store(request).get_destination(
            destination, tenant=DEFAULT_TENANT if tenant is None else tenant)
    since_s, = await resolve_instants(request_store(request), since_spec)
    count = await request_store(request).replay(job_id=job_id, all_dead=all_dead,
                                         destination=destination, since_s=since_s,
                                         dry_run=dry_run, tenant=tenant)
    if not dry_run:
        get_logger().info("jobs_replayed", count=count, job_id=job_id,
                          destination=destination, tenant=scope_tenant(destination, tenant),
                          since_s=since_s, by=acting(request))
    return web.json_response(replay_result_view(count, dry_run))


async def purge(request: web.Request) -> web.Response:
    """`POST /v1/admin/purge`: {"bodies_older_than": "7d", "metadata_older_than": "30d",
    "dedupe_keep": "90d"} (all optional) -> what was removed."""
    body = await json_body(request)
    inputs.refuse_unknown(body, rules.PURGE_FIELDS)
    ages = rules.retention_ages(body.get("bodies_older_than", rules.DEFAULT_BODIES_AGE),
                                body.get("metadata_older_than", rules.DEFAULT_METADATA_AGE),
                                body.get("dedupe_keep", rules.DEFAULT_DEDUPE_AGE))
    store = request_store(request)
    result = await store.purge(**ages.cutoffs(await store.now_s()))
    out = purge_result_view(result)
    get_logger().info("purged", **out, by=acting(request))
    return web.json_response(out)


async def metrics_handler(request: web.Request) -> web.Response:
    """`GET /metrics`: Prometheus text, read from the database and every process's snapshot
    at scrape time (ingest/metrics.py)."""
    text = await metrics.scrape(request.app)
    return web.Response(body=text, headers={hdrs.CONTENT_TYPE: metrics.CONTENT_TYPE})

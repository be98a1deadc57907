"""The admin API's tenant routes and `?tenant=` on the destination, dead-letter, replay,
event, resend and retry-now routes, through the real ingest app on 127.0.0.1 (each backend
in turn: a SQLite file, then PostgreSQL)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead, Retry
from hookline.shared.store import Store
from tests.conftest import new_event

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}", "X-Hookline-Actor": "alice"}
URL = "http://127.0.0.1:9/h"


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def _call(client: TestClient[Any, Any], method: str, path: str,
                **kwargs: Any) -> tuple[int, Any]:
    async with client.request(method, path, headers=AUTH, **kwargs) as resp:
        return resp.status, await resp.json()


async def test_tenant_crud_paging_and_the_default_tenant(client):
    status, created = await _call(client, "PUT", "/v1/admin/tenants/acme", json={
        "name": "Acme Inc", "metadata": {"plan": "pro"}, "max_destinations": 3})
    assert status == 201
    assert {k: created[k] for k in ("id", "name", "metadata", "max_destinations", "disabled",
                                    "destinations")} == {
        "id": "acme", "name": "Acme Inc", "metadata": {"plan": "pro"},
        "max_destinations": 3, "disabled": False, "destinations": 0}
    assert "token_epoch" not in created
    status, changed = await _call(client, "PUT", "/v1/admin/tenants/acme",
                                  json={"disabled": True})
    assert status == 200 and changed["disabled"] and changed["name"] == "Acme Inc"
    status, shown = await _call(client, "GET", "/v1/admin/tenants/acme")
    assert status == 200 and shown["disabled"]

    for bad_body, field in (({"name": 7}, "name"), ({"metadata": []}, "metadata"),
                            ({"max_destinations": -1}, "max_destinations"),
                            ({"disabled": "yes"}, "disabled"), ({"colour": "red"}, "colour"),
                            ([], "body")):
        status, error = await _call(client, "PUT", "/v1/admin/tenants/acme", json=bad_body)
        assert (status, error["error"], error.get("field")) == (
            400, "invalid_request", field), bad_body
    status, error = await _call(client, "PUT", "/v1/admin/tenants/_mine", json={})
    assert (status, error["field"]) == (400, "id")
    status, error = await _call(client, "GET", "/v1/admin/tenants/nobody")
    assert status == 404 and "nobody" in error["detail"]

    # The default tenant: read, never disabled nor deleted.
    status, default = await _call(client, "GET", "/v1/admin/tenants/_default")
    assert status == 200 and default["id"] == "_default"
    status, error = await _call(client, "PUT", "/v1/admin/tenants/_default",
                                json={"disabled": True})
    assert (status, error["field"]) == (400, "disabled")
    status, error = await _call(client, "DELETE", "/v1/admin/tenants/_default")
    assert (status, error["error"]) == (409, "conflict")

    for tenant in ("acme-2", "beta", "acme-3"):
        await _call(client, "PUT", f"/v1/admin/tenants/{tenant}", json={})
    status, page = await _call(client, "GET", "/v1/admin/tenants?limit=2")
    assert [t["id"] for t in page["tenants"]] == ["_default", "acme"]
    assert page["next_after"] == "acme"
    status, page = await _call(client, "GET", "/v1/admin/tenants?limit=2&after=acme")
    assert [t["id"] for t in page["tenants"]] == ["acme-2", "acme-3"]
    status, page = await _call(client, "GET", "/v1/admin/tenants?limit=2&after=acme-3")
    assert [t["id"] for t in page["tenants"]] == ["beta"] and page["next_after"] is None
    status, page = await _call(client, "GET", "/v1/admin/tenants?prefix=acme-")
    assert [t["id"] for t in page["tenants"]] == ["acme-2", "acme-3"]
    for query, field in (("limit=0", "limit"), ("limit=1001", "limit"),
                         ("prefix=a%20b", "prefix"), ("after=%2F", "after")):
        status, error = await _call(client, "GET", f"/v1/admin/tenants?{query}")
        assert (status, error["field"]) == (400, field), query


async def test_delete_counts_dry_run_first_and_is_audited(client, real_store, clock):
    await _call(client, "PUT", "/v1/admin/tenants/acme", json={})
    for name in ("a", "b"):
        status, _ = await _call(client, "POST", "/v1/admin/destinations",
                                json={"name": name, "url": URL, "tenant": "acme"})
        assert status == 201
    await real_store.add_event(new_event("e1", tenant="acme"))
    status, page = await _call(client, "GET", "/v1/admin/tenants?prefix=acme")
    assert page["tenants"][0]["destinations"] == 2
    status, error = await _call(client, "DELETE", "/v1/admin/tenants/acme?dry_run=maybe")
    assert (status, error["field"]) == (400, "dry_run")
    with capture_logs() as logs:
        status, dry = await _call(client, "DELETE", "/v1/admin/tenants/acme?dry_run=true")
        assert (status, dry) == (200, {"tenant": "acme", "destinations": 2,
                                       "unfinished_jobs": 2, "dry_run": True})
        assert not [line for line in logs if line["event"] == "tenant_deleted"]
        status, gone = await _call(client, "DELETE", "/v1/admin/tenants/acme")
        assert (status, gone["dry_run"], gone["unfinished_jobs"]) == (200, False, 2)
    [audit] = [line for line in logs if line["event"] == "tenant_deleted"]
    assert (audit["tenant"], audit["actor"], audit["destinations"], audit["by"]) == (
        "acme", "alice", 2, "admin_api")
    status, _ = await _call(client, "GET", "/v1/admin/tenants/acme")
    assert status == 404
    assert [j.status for j in await real_store.list_jobs()] == ["dead", "dead"]


async def test_destination_routes_take_a_tenant(client, real_store, clock):
    await _call(client, "PUT", "/v1/admin/tenants/acme", json={"max_destinations": 1})
    status, mine = await _call(client, "POST", "/v1/admin/destinations",
                               json={"name": "hooks", "url": URL, "tenant": "acme"})
    assert status == 201 and mine["tenant"] == "acme"
    status, default = await _call(client, "POST", "/v1/admin/destinations",
                                  json={"name": "hooks", "url": URL})
    assert status == 201 and default["tenant"] == "_default"
    status, error = await _call(client, "POST", "/v1/admin/destinations?tenant=acme",
                                json={"name": "more", "url": URL})
    assert status == 409 and "max_destinations" in error["detail"]
    status, error = await _call(client, "POST", "/v1/admin/destinations?tenant=acme",
                                json={"name": "more", "url": URL, "tenant": "beta"})
    assert (status, error["field"]) == (400, "tenant")
    status, error = await _call(client, "POST", "/v1/admin/destinations",
                                json={"name": "x", "url": URL, "tenant": "ghost"})
    assert status == 404 and "ghost" in error["detail"]

    status, every = await _call(client, "GET", "/v1/admin/destinations")
    assert sorted((d["tenant"], d["name"]) for d in every) == [
        ("_default", "hooks"), ("acme", "hooks")]
    status, acme = await _call(client, "GET", "/v1/admin/destinations?tenant=acme")
    assert [d["id"] for d in acme] == [mine["id"]]
    for path in ("/v1/admin/destinations?tenant=ghost",
                 "/v1/admin/destinations/hooks?tenant=ghost"):
        status, error = await _call(client, "GET", path)
        assert status == 404 and "ghost" in error["detail"], path
    status, error = await _call(client, "GET", "/v1/admin/destinations?tenant=a%20b")
    assert (status, error["field"]) == (400, "tenant")

    # Each action reaches the named tenant's destination only.
    status, _ = await _call(client, "POST", "/v1/admin/destinations/hooks/pause?tenant=acme",
                            json={"reason": "theirs"})
    assert status == 200
    status, patched = await _call(client, "PATCH", "/v1/admin/destinations/hooks?tenant=acme",
                                  json={"max_in_flight": 2})
    assert status == 200 and patched["id"] == mine["id"]
    status, secret = await _call(client, "GET", "/v1/admin/destinations/hooks/secret?tenant=acme")
    assert status == 200
    assert secret["secret"] == (await real_store.get_destination("hooks", tenant="acme")).secret
    assert not (await real_store.get_destination("hooks")).paused
    assert (await real_store.get_destination("hooks", tenant="acme")).paused

    # Dead letters, replay, event listing and resend by tenant.
    await real_store.set_paused("hooks", False, tenant="acme")
    await real_store.add_event(new_event("e1"))
    await real_store.add_event(new_event("e1", tenant="acme"))
    claims = await real_store.claim("w1", 10, 30.0, 5)
    await real_store.finish([(c, Dead(error="gone"), AttemptResult(
        started_at=clock(), duration_s=0.01, status_code=410)) for c in claims])
    status, dead = await _call(client, "GET", "/v1/admin/dead?destination=hooks&tenant=acme")
    acme_job = dead[0]["id"]
    assert len(dead) == 1
    status, dead = await _call(client, "GET", "/v1/admin/dead?destination=hooks")
    assert len(dead) == 1 and dead[0]["id"] != acme_job
    status, events = await _call(client, "GET", "/v1/admin/events?tenant=acme")
    assert [j["id"] for e in events["events"] for j in e["jobs"]] == [acme_job]
    status, found = await _call(client, "GET", "/v1/admin/events/e1?tenant=acme")
    assert [j["id"] for j in found["jobs"]] == [acme_job]
    status, counted = await _call(client, "POST", "/v1/admin/replay", json={
        "all_dead": True, "tenant": "acme", "dry_run": True})
    assert counted["count"] == 1
    status, error = await _call(client, "POST", "/v1/admin/replay", json={
        "job_id": acme_job, "tenant": "acme"})
    assert (status, error["field"]) == (400, "tenant")
    with capture_logs() as logs:
        status, resent = await _call(client, "POST", "/v1/admin/resend", json={
            "destination": "hooks", "tenant": "acme"})
    assert status == 200 and resent["job_ids"] == [acme_job]
    [audit] = [line for line in logs if line["event"] == "jobs_resent"]
    assert audit["filters"]["tenant"] == "acme"
    status, error = await _call(client, "POST", "/v1/admin/resend", json={
        "destination": "hooks", "tenant": "ghost"})
    assert status == 404 and "ghost" in error["detail"]


async def test_jobs_and_destination_stats_take_a_tenant(client, real_store):
    """`GET /v1/admin/jobs?tenant=` and `/v1/admin/destination-stats?tenant=` show one
    tenant's rows only; every job names its tenant; an unknown tenant is a 404 naming it."""
    await _call(client, "PUT", "/v1/admin/tenants/acme", json={})
    for tenant in ("acme", None):
        status, _ = await _call(client, "POST", "/v1/admin/destinations",
                                json={"name": "hooks", "url": URL, "tenant": tenant})
        assert status == 201
    await real_store.add_event(new_event("e1"))
    await real_store.add_event(new_event("e1", tenant="acme"))
    await real_store.add_event(new_event("e2", tenant="acme"))

    status, every = await _call(client, "GET", "/v1/admin/jobs")
    assert status == 200
    assert sorted(j["tenant"] for j in every) == ["_default", "acme", "acme"]
    status, acme = await _call(client, "GET", "/v1/admin/jobs?tenant=acme")
    assert status == 200 and [j["tenant"] for j in acme] == ["acme", "acme"]
    status, default = await _call(client, "GET", "/v1/admin/jobs?tenant=_default&status=pending")
    assert status == 200 and [j["tenant"] for j in default] == ["_default"]

    status, stats = await _call(client, "GET", "/v1/admin/destination-stats?tenant=acme")
    assert status == 200 and [(s["tenant"], s["pending"]) for s in stats] == [("acme", 2)]
    status, stats = await _call(client, "GET", "/v1/admin/destination-stats")
    assert sorted(s["tenant"] for s in stats) == ["_default", "acme"]
    for path in ("/v1/admin/jobs?tenant=ghost", "/v1/admin/destination-stats?tenant=ghost"):
        status, error = await _call(client, "GET", path)
        assert status == 404 and "ghost" in error["detail"], path


async def test_a_body_arriving_in_several_segments_is_read_whole(client):
    """An admin body that reaches the server in two TCP segments, 300 ms apart, is read
    whole (one read returns only what has arrived so far)."""
    status, _ = await _call(client, "POST", "/v1/admin/destinations",
                            json={"name": "split", "url": URL})
    assert status == 201
    body = b'{"max_in_flight": 7, "url": "' + URL.encode() + b'"}'
    head = (f"PATCH /v1/admin/destinations/split HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    writer.write(head + body[:10])
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.write(body[10:])
    await writer.drain()
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b'"max_in_flight": 7' in answer or b'"max_in_flight":7' in answer


async def test_stats_per_destination_counts_are_the_named_tenants(client, real_store):
    """`GET /v1/admin/stats?tenant=`: jobs_by_destination and paused_destinations of that
    tenant (two tenants' `hooks` kept apart), the default tenant's without it; an unknown
    tenant is 404 naming it, a malformed one 400 naming the field."""
    for tenant in ("acme", "globex"):
        await _call(client, "PUT", f"/v1/admin/tenants/{tenant}", json={})
        await real_store.add_destination(name="hooks", url="https://example.com/h",
                                         secret="whsec_" + "S" * 32, event_types=["*"],
                                         max_in_flight=2, tenant=tenant)
    await real_store.add_events([new_event("a1", tenant="acme"), new_event("a2", tenant="acme"),
                                 new_event("g1", tenant="globex")])
    for tenant, pending in (("acme", 2), ("globex", 1)):
        status, stats = await _call(client, "GET", f"/v1/admin/stats?tenant={tenant}")
        assert status == 200 and stats["tenant"] == tenant
        assert stats["jobs_by_destination"] == {"hooks": {"pending": pending}}
        assert stats["jobs_by_status"]["pending"] == 3  # the whole service's
    status, stats = await _call(client, "GET", "/v1/admin/stats")
    assert (status, stats["tenant"], stats["jobs_by_destination"]) == (200, "_default", {})
    status, error = await _call(client, "GET", "/v1/admin/stats?tenant=nobody")
    assert status == 404 and "nobody" in error["detail"]
    status, error = await _call(client, "GET", "/v1/admin/stats?tenant=bad%20id")
    assert (status, error["field"]) == (400, "tenant")


async def test_events_say_whose_destinations_their_jobs_are(client, real_store):
    """Every tenant may have a destination `billing`: an event listed over every tenant, or
    looked up by its global webhook-id, names its tenant, so its job's `billing` is known
    to be that tenant's (the default tenant's events say `_default`)."""
    for tenant in ("acme", "globex", "_default"):
        if tenant != "_default":
            await _call(client, "PUT", f"/v1/admin/tenants/{tenant}", json={})
        await real_store.add_destination(name="billing", url="https://example.com/h",
                                         secret="whsec_" + "S" * 32, event_types=["*"],
                                         max_in_flight=2, tenant=tenant)
        await real_store.add_event(new_event(f"inv-{tenant.lstrip('_')}", tenant=tenant))
    status, page = await _call(client, "GET", "/v1/admin/events")
    assert status == 200
    assert {(e["source_event_id"], e["tenant"], e["jobs"][0]["destination"])
            for e in page["events"]} == {("inv-acme", "acme", "billing"),
                                         ("inv-globex", "globex", "billing"),
                                         ("inv-default", "_default", "billing")}
    globex = next(e for e in page["events"] if e["tenant"] == "globex")
    status, found = await _call(client, "GET", f"/v1/admin/events/{globex['message_id']}")
    assert (status, found["tenant"], found["jobs"]) == (200, "globex", globex["jobs"])


FILTERED_BY_DESTINATION = (
    ("GET", "/v1/admin/dead", None),
    ("GET", "/v1/admin/events", None),
    ("POST", "/v1/admin/replay", {"all_dead": True, "dry_run": True}),
    ("POST", "/v1/admin/resend", {"dry_run": True}),
    ("POST", "/v1/admin/retry-now", {"dry_run": True}),
    ("GET", "/v1/admin/jobs", None),
)
"""The admin routes filtered by a destination (of `tenant`, default the default tenant's):
the query's `destination` for a GET, the body's for a POST (with what keeps it from
changing anything)."""


async def _filtered(client: TestClient[Any, Any], route: tuple[str, str, Any],
                    destination: str, tenant: str | None = None) -> tuple[int, Any]:
    """`route` filtered by `destination` of `tenant` (None: none named)."""
    method, path, body = route
    if body is None:
        query = {"destination": destination, **({"tenant": tenant} if tenant else {})}
        return await _call(client, method, path, params=query)
    return await _call(client, method, path, json={
        **body, "destination": destination, **({"tenant": tenant} if tenant else {})})


async def test_a_destination_filter_the_tenant_lacks_is_404_naming_who_has_one(
        client, real_store, clock):
    """`destination=billing` where only acme has a `billing`: dead letters, events, replay,
    resend, retry now and jobs each answer 404 `not_found` with `field` destination, the tenant
    looked in (the default one without `tenant`) and acme, never an empty list or a count
    of 0 (dead, events and replay did). With `tenant=acme` each answers as before; a name
    nobody has says so; an unknown tenant is still the tenant's 404; bad input is still
    400, checked before the lookup."""
    for tenant in ("acme", "globex"):
        await _call(client, "PUT", f"/v1/admin/tenants/{tenant}", json={})
    dead_job = await _one_dead_letter(real_store, clock, tenant="acme", name="billing")
    for route in FILTERED_BY_DESTINATION:
        for tenant, where in ((None, "the default tenant (_default)"),
                              ("_default", "the default tenant (_default)"),
                              ("globex", "tenant globex")):
            status, error = await _filtered(client, route, "billing", tenant)
            assert (status, error) == (404, {
                "error": "not_found",
                "detail": f"no destination named 'billing' in {where}; tenant acme has one: "
                          "pass tenant=acme",
                "field": "destination", "tenant": tenant or "_default",
                "other_tenants": ["acme"], "other_tenants_total": 1}), (route, tenant)
        status, answer = await _filtered(client, route, "billing", "acme")
        assert status == 200, (route, answer)
    assert len((await _filtered(client, FILTERED_BY_DESTINATION[0], "billing", "acme"))[1]) == 1
    status, page = await _filtered(client, FILTERED_BY_DESTINATION[1], "billing", "acme")
    assert [e["source_event_id"] for e in page["events"]] == ["e1"]
    status, counted = await _filtered(client, FILTERED_BY_DESTINATION[2], "billing", "acme")
    assert counted == {"count": 1, "dry_run": True}
    status, jobs = await _filtered(client, FILTERED_BY_DESTINATION[5], "billing", "acme")
    assert [(j["tenant"], j["destination"], j["status"]) for j in jobs] == [
        ("acme", "billing", "dead")]

    status, error = await _call(client, "GET", "/v1/admin/dead",
                                params={"destination": "nobody"})
    assert (status, error["other_tenants"], error["other_tenants_total"]) == (404, [], 0)
    assert error["detail"] == ("no destination named 'nobody' in the default tenant "
                               "(_default), nor in any other tenant")
    status, error = await _call(client, "GET", "/v1/admin/events",
                                params={"destination": "billing", "tenant": "ghost"})
    assert status == 404 and "ghost" in error["detail"] and "field" not in error
    for path, field in (("/v1/admin/events?destination=nobody&limit=0", "limit"),
                        ("/v1/admin/dead?destination=nobody&since=never", "since")):
        status, error = await _call(client, "GET", path)  # bad input comes first
        assert (status, error["field"]) == (400, field), path
    status, error = await _call(client, "POST", "/v1/admin/replay", json={
        "job_id": dead_job, "destination": "nobody"})
    assert (status, error["field"]) == (400, "destination")


async def test_a_destination_route_the_tenant_lacks_is_404_naming_who_has_one(
        client, real_store):
    """`/v1/admin/destinations/billing...` where only acme has a `billing`: every route on
    the destination answers 404 with `field` name, the tenant looked in and acme (as the CLI
    says it), and changes nothing; with `tenant=acme` it answers."""
    await _call(client, "PUT", "/v1/admin/tenants/acme", json={})
    await real_store.add_destination(name="billing", url=URL, secret="whsec_" + "S" * 32,
                                     event_types=["*"], max_in_flight=2, tenant="acme")
    routes = [("GET", ""), ("PATCH", ""), ("POST", "/pause"), ("POST", "/resume"),
              ("POST", "/rotate-secret"), ("GET", "/secret"),
              ("POST", "/expire-previous-secret"), ("DELETE", "")]
    for method, tail in routes:
        body = {"timeout_s": 5} if method == "PATCH" else {}
        status, error = await _call(client, method, f"/v1/admin/destinations/billing{tail}",
                                    json=body)
        assert (status, error) == (404, {
            "error": "not_found",
            "detail": "no destination named 'billing' in the default tenant (_default); "
                      "tenant acme has one: pass tenant=acme",
            "field": "name", "tenant": "_default", "other_tenants": ["acme"],
            "other_tenants_total": 1}), (method, tail)
    status, shown = await _call(client, "GET", "/v1/admin/destinations/billing",
                                params={"tenant": "acme"})
    assert (status, shown["paused"], shown["timeout_s"]) == (200, False, None)


async def test_many_tenants_with_the_name_are_all_listed_and_a_few_named(client, real_store):
    """Five tenants have a `billing`, the default one none: the 404 lists every one in
    `other_tenants` (id order) and counts them; its detail names the first three and asks
    for `tenant=ID`."""
    owners = ["acme", "beta", "delta", "epsilon", "zeta"]
    for tenant in owners:
        await _call(client, "PUT", f"/v1/admin/tenants/{tenant}", json={})
        await real_store.add_destination(name="billing", url=URL, secret="whsec_" + "S" * 32,
                                         event_types=["*"], max_in_flight=2, tenant=tenant)
    status, error = await _call(client, "GET", "/v1/admin/events?destination=billing")
    assert (status, error["other_tenants"], error["other_tenants_total"]) == (404, owners, 5)
    assert error["detail"] == ("no destination named 'billing' in the default tenant "
                               "(_default); tenants acme, beta, delta and 2 more have one: "
                               "pass tenant=ID")


async def test_a_removed_destination_is_filtered_by_the_name_it_keeps(client, real_store):
    """A removed destination's dead letters and events are listed under `NAME~removed-ID`:
    that name still filters them, while the freed plain name is 404. Replaying it (its jobs
    cannot be) is 404 as on the command line."""
    await real_store.add_destination(name="gone", url=URL, secret="whsec_" + "S" * 32,
                                     event_types=["*"], max_in_flight=2)
    await real_store.add_event(new_event("e1"))
    status, _ = await _call(client, "DELETE", "/v1/admin/destinations/gone")
    assert status == 200
    status, [dead] = await _call(client, "GET", "/v1/admin/dead")
    assert dead["destination"].startswith("gone~removed-")
    status, found = await _call(client, "GET", "/v1/admin/dead",
                                params={"destination": dead["destination"]})
    assert (status, found) == (200, [dead])
    status, page = await _call(client, "GET", "/v1/admin/events",
                               params={"destination": dead["destination"]})
    assert status == 200 and len(page["events"]) == 1
    status, error = await _call(client, "GET", "/v1/admin/dead", params={"destination": "gone"})
    assert (status, error["field"], error["other_tenants"]) == (404, "destination", [])
    status, error = await _call(client, "POST", "/v1/admin/replay", json={
        "all_dead": True, "destination": dead["destination"], "dry_run": True})
    assert status == 404 and dead["destination"] in error["detail"]


async def test_a_removed_destinations_name_says_where_its_jobs_are(client, real_store):
    """A destination filter naming a destination the tenant removed: 404 naming where its
    jobs are (the name it keeps); another tenant looked in has none to name."""
    await _call(client, "PUT", "/v1/admin/tenants/acme", json={})
    gone = await real_store.add_destination(name="gone", url=URL, secret="whsec_" + "S" * 32,
                                            event_types=["*"], max_in_flight=2, tenant="acme")
    status, _ = await _call(client, "DELETE", "/v1/admin/destinations/gone",
                            params={"tenant": "acme"})
    assert status == 200
    status, error = await _call(client, "GET", "/v1/admin/dead",
                                params={"destination": "gone", "tenant": "acme"})
    assert status == 404 and error["detail"].endswith(
        f"; one was removed: its jobs are under 'gone~removed-{gone.id}'"), error
    status, error = await _call(client, "GET", "/v1/admin/dead", params={"destination": "gone"})
    assert status == 404 and "removed" not in error["detail"], error  # not _default's


REFUSED_DELETED = ("no tenant 'acme': it was deleted, so it has no destinations or stats and "
                   "nothing can be changed for it; its events and jobs are kept until "
                   "retention, read-only: the dead letter, job "
                   "and event listings filtered by this tenant still show them")


async def _one_dead_letter(store: Store, clock: Any, *, tenant: str, name: str) -> int:
    """Tenant `tenant`'s new destination `name` (every event type) with one event, whose
    job died (a 410); returns that job's id."""
    await store.add_destination(name=name, url=URL, secret="whsec_" + "S" * 32,
                                event_types=["*"], max_in_flight=2, tenant=tenant)
    await store.add_event(new_event("e1", tenant=tenant))
    [claim] = await store.claim("w1", 10, 30.0, 5)
    await store.finish([(claim, Dead(error="gone"), AttemptResult(
        started_at=clock(), duration_s=0.01, status_code=410))])
    return claim.job_id


async def _deleted_acme_with_a_dead_letter(client: TestClient[Any, Any], store: Store,
                                           clock: Any) -> dict[str, Any]:
    """acme with a destination `hooks` whose one job died, then acme deleted: its dead
    letter (under the name its removed destination keeps)."""
    await _call(client, "PUT", "/v1/admin/tenants/acme", json={})
    await _one_dead_letter(store, clock, tenant="acme", name="hooks")
    status, _ = await _call(client, "DELETE", "/v1/admin/tenants/acme")
    assert status == 200
    status, every = await _call(client, "GET", "/v1/admin/dead")
    [dead] = every
    assert status == 200 and dead["tenant"] == "acme"
    return dict(dead)


async def test_a_deleted_tenants_history_is_listed_by_its_id_read_only(
        client, real_store, clock):
    """`tenant=acme` of a deleted acme whose history is kept: dead letters, jobs, events and
    an event's lookup answer 200 with its rows, in the usual shapes (was 404 "it was
    deleted"); an id never used is the same 404 as before; the writes naming acme are
    still 404 saying it was deleted, and change nothing."""
    dead = await _deleted_acme_with_a_dead_letter(client, real_store, clock)
    assert await _call(client, "GET", "/v1/admin/dead", params={"tenant": "acme"}) == (
        200, [dead])
    status, jobs = await _call(client, "GET", "/v1/admin/jobs", params={"tenant": "acme"})
    assert (status, [(j["id"], j["tenant"], j["status"]) for j in jobs]) == (
        200, [(dead["id"], "acme", "dead")])
    status, page = await _call(client, "GET", "/v1/admin/events", params={"tenant": "acme"})
    assert (status, sorted(page), [e["tenant"] for e in page["events"]]) == (
        200, ["events", "next_before"], ["acme"])
    status, found = await _call(client, "GET", "/v1/admin/events/e1",
                                params={"tenant": "acme"})
    assert (status, [j["id"] for j in found["jobs"]]) == (200, [dead["id"]])

    for path in ("/v1/admin/dead", "/v1/admin/jobs", "/v1/admin/events",
                 "/v1/admin/events/e1"):
        assert await _call(client, "GET", path, params={"tenant": "ghost"}) == (
            404, {"error": "not_found", "detail": "no tenant 'ghost'"}), path

    removed = dead["destination"]
    for method, path, body in (
            ("POST", "/v1/admin/replay", {"all_dead": True, "dry_run": True}),
            ("POST", "/v1/admin/resend", {"destination": removed, "dry_run": True}),
            ("POST", "/v1/admin/retry-now", {"destination": removed, "dry_run": True}),
            ("POST", f"/v1/admin/destinations/{removed}/pause", {}),
            ("POST", "/v1/admin/destinations", {"name": "new", "url": URL}),
            ("GET", "/v1/admin/stats", None)):
        status, error = await _call(client, method, path, params={"tenant": "acme"},
                                    **({} if body is None else {"json": body}))
        assert (status, error["error"], error["detail"]) == (
            404, "not_found", REFUSED_DELETED), path
    assert await _call(client, "GET", "/v1/admin/dead", params={"tenant": "acme"}) == (
        200, [dead])


async def test_a_deleted_tenants_destination_named_without_tenant_leads_to_its_history(
        client, real_store, clock):
    """`destination=hooks~removed-N` without `tenant`, where only the deleted acme had it:
    the 404 marks acme deleted in its detail (the fields as before) and `tenant=acme` then
    lists it (it was 404 "acme was deleted": a loop)."""
    dead = await _deleted_acme_with_a_dead_letter(client, real_store, clock)
    removed = dead["destination"]
    for path in ("/v1/admin/dead", "/v1/admin/jobs", "/v1/admin/events"):
        status, error = await _call(client, "GET", path, params={"destination": removed})
        assert (status, error) == (404, {
            "error": "not_found",
            "detail": f"no destination named {removed!r} in the default tenant (_default); "
                      "tenant acme (deleted) has one: pass tenant=acme",
            "field": "destination", "tenant": "_default", "other_tenants": ["acme"],
            "other_tenants_total": 1}), path
        status, listed = await _call(client, "GET", path,
                                     params={"destination": removed, "tenant": "acme"})
        assert status == 200, (path, listed)
        assert len(listed["events"] if path.endswith("events") else listed) == 1, path


async def test_resume_answers_how_many_waiting_retries_it_brought_forward(client, real_store):
    """`POST .../billing/resume?tenant=acme` makes acme's waiting retry due now and answers
    `brought_forward` 1; globex's `billing`, paused too, keeps its retry's schedule."""
    for tenant in ("acme", "globex"):
        await _call(client, "PUT", f"/v1/admin/tenants/{tenant}", json={})
        await real_store.add_destination(name="billing", url=URL, secret="whsec_" + "S" * 32,
                                         event_types=["*"], max_in_flight=2, tenant=tenant)
        await real_store.add_event(new_event("e1", tenant=tenant))
    claims = await real_store.claim("w1", 10, 30.0, 5)
    await real_store.finish([(c, Retry(delay_s=3600, error="HTTP 500"), AttemptResult(
        started_at=time.time(), duration_s=0.01, status_code=500)) for c in claims])
    for tenant in ("acme", "globex"):
        await real_store.set_paused("billing", True, "receiver down", tenant=tenant)

    status, answer = await _call(client, "POST", "/v1/admin/destinations/billing/resume",
                                 params={"tenant": "acme"})
    assert (status, answer) == (200, {"resumed": "billing", "brought_forward": 1})
    [acme_claim] = await real_store.claim("w1", 10, 30.0, 5)
    assert (acme_claim.tenant_id, acme_claim.attempt) == ("acme", 2)
    [globex_job] = await real_store.list_jobs(tenant="globex")
    assert globex_job.status == "pending" and globex_job.run_at > time.time() + 3000


async def test_a_destination_label_is_404_saying_how_to_name_it(client, real_store):
    """`/v1/admin/destinations/acme~billing/resume` (the label metrics and alerts give acme's
    `billing`) is 404 saying the label means acme's `billing` and how to name it, not "nor
    in any other tenant"; so is `?destination=acme~billing`. A removed destination's
    `NAME~removed-ID` is no label: its 404 is as before."""
    await _call(client, "PUT", "/v1/admin/tenants/acme", json={})
    await real_store.add_destination(name="billing", url=URL, secret="whsec_" + "S" * 32,
                                     event_types=["*"], max_in_flight=2, tenant="acme")
    hint = ("no destination named 'acme~billing' in the default tenant (_default); a "
            "destination label 'acme~billing' means tenant acme's destination 'billing': "
            "name 'billing' and pass tenant=acme")
    status, error = await _call(client, "POST", "/v1/admin/destinations/acme~billing/resume")
    assert (status, error) == (404, {
        "error": "not_found", "detail": hint, "field": "name", "tenant": "_default",
        "other_tenants": [], "other_tenants_total": 0})
    status, error = await _call(client, "GET", "/v1/admin/dead?destination=acme~billing")
    assert (status, error["detail"], error["field"]) == (404, hint, "destination")
    status, error = await _call(client, "POST", "/v1/admin/destinations/billing~removed-9/resume")
    assert (status, error["detail"]) == (404, "no destination named 'billing~removed-9' in the "
                                              "default tenant (_default), nor in any other "
                                              "tenant")
    status, answer = await _call(client, "POST", "/v1/admin/destinations/billing/resume",
                                 params={"tenant": "acme"})
    assert (status, answer["resumed"]) == (200, "billing")

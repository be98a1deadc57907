"""Tenant isolation, proved route by route: ONE table-driven walk of every `/v1/tenant/`
operation the OpenAPI document lists (a new route is walked as soon as it is documented;
the document must match the route table, and tests/integration/test_api_contract.py keeps
the document equal to the routes the app registers), through the real ingest app on
127.0.0.1, on each backend (a SQLite file, then PostgreSQL).

Every operation meets every case that applies to it:
    other_tenant   tenant A's full token with tenant B's ids: 404 (a list answers none of
                   B's rows; a list filtered by B's destination name answers the 404 of a
                   name no tenant has, word for word; a body naming a tenant is refused:
                   the tenant is the token's)
    tenant_param   A's full token with `?tenant=` naming B: 400 (field `tenant`) on every
                   route, never ignored
    expired        A's token past its expiry (signed with the database's key): 401
    tampered       B's claims under A's signature: 401 token_invalid
    revoked        a token of A minted before `revoke-tokens`: 401 token_revoked
    disabled       a token of a tenant disabled since: 401 token_revoked
    deleted        a token of a tenant deleted since: 401 token_revoked
    read_only      a read-only token: 403 read_only on a route that writes, 2xx on a read
    lacking        every capability but the route's: 403 capability_missing (not for
                   `view` routes: view is always granted)
    no_token       401 token_missing
    admin_token    the admin token: 401 token_invalid
    own            A's full token with A's ids: 2xx (so the 404s above are not a broken
                   route); run last, removal at the very end
and afterwards B's (and A's) rows are unchanged by the refused calls. Every `/v1/admin/`
operation (and /metrics) refuses A's tenant token: 401 `unauthorized`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.ingest.tenant_api import TENANT_ROUTES
from hookline.shared.config import Config
from hookline.shared.models import Accepted, AttemptResult, Dead
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields
from hookline.shared.tenant_tokens import (
    CAPABILITIES,
    SIGNING_KEY_PURPOSE,
    TokenClaims,
    mint,
    verify_signature,
)
from tests.conftest import new_event, opened_store

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = json.loads((ROOT / "ingest" / "openapi.json").read_text())
ADMIN_TOKEN = "isolation-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
URL = "http://127.0.0.1:9/hook"
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/tenant/destinations"): {"name": "created", "url": URL, "event_types": ["*"]},
    ("PATCH", "/v1/tenant/destinations/{name}"): {"max_in_flight": 3},
    ("POST", "/v1/tenant/destinations/{name}/pause"): {"reason": "isolation test"},
}
"""A valid body per write route (the others take `{}`), so a refusal is never a 400."""
QUERIES: dict[tuple[str, str], dict[str, str]] = {
    ("GET", "/v1/tenant/destinations/{name}/stats"): {"window_s": "600"},
    ("POST", "/v1/tenant/destinations/{name}/test"): {"wait": "false"},  # no workers here
}
CASES = ("other_tenant", "tenant_param", "expired", "tampered", "revoked", "disabled",
         "deleted", "read_only", "lacking", "no_token", "admin_token")
NOBODYS = "nobodys-hooks"
"""A destination name no tenant has."""


def filtered_by_destination(method: str, path: str) -> bool:
    """Whether the documented operation takes a `destination` query filter."""
    return any(p.get("in") == "query" and p.get("name") == "destination"
               for p in DOCUMENT["paths"][path][method.lower()].get("parameters", []))


def operations(prefix: str, scheme: str) -> list[tuple[str, str]]:
    """(METHOD, path) of every documented operation under `prefix` secured by `scheme`."""
    return [(method.upper(), path) for path, item in DOCUMENT["paths"].items()
            for method, operation in item.items()
            if path.startswith(prefix)
            and any(scheme in r for r in operation.get("security", []))]


@dataclass(frozen=True)
class Tenant:
    """One tenant's ids, as the routes' path parameters name them."""

    id: str
    name: str
    ref: str
    job: int
    message_id: str

    def path(self, template: str) -> str:
        out = template.replace("{name}", self.name).replace("{ref}", self.ref)
        out = out.replace("{id}", str(self.job))
        assert "{" not in out, f"no id of this test for a parameter of {template}"
        return out


async def _tenant(store: Store, tenant: str, name: str) -> Tenant:
    await store.put_tenant(tenant, TenantFields(name=tenant.title()))
    await store.add_destination(name=name, url=URL, secret="whsec_" + "C" * 32,
                                event_types=["*"], max_in_flight=2, tenant=tenant)
    accepted = await store.add_event(new_event(f"{tenant}-evt", "order.paid", tenant=tenant))
    assert isinstance(accepted, Accepted) and len(accepted.job_ids) == 1
    return Tenant(id=tenant, name=name, ref=str(accepted.event_id), job=accepted.job_ids[0],
                  message_id=accepted.message_id)


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=ADMIN_TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def _mint(client: TestClient[Any, Any], tenant: str, **body: Any) -> str:
    async with client.post(f"/v1/admin/tenants/{tenant}/tokens", json=body,
                           headers=ADMIN) as resp:
        answer = await resp.json()
        assert resp.status == 201, answer
        assert answer["portal_url"].endswith(f"/portal/#token={answer['token']}")
        return str(answer["token"])


async def _state(store: Store, tenant: Tenant) -> tuple[Any, ...]:
    """What a refused call must not have changed: the destination, the job, the events."""
    dest = await store.get_destination(tenant.name, tenant=tenant.id)
    story = await store.get_job(tenant.job, tenant=tenant.id)
    jobs = await store.list_tenant_jobs(tenant.id, limit=100)
    return (dest, story.job.status, story.replays, [j.id for j in jobs])


async def test_every_tenant_route_refuses_every_other_tenant_and_bad_token(client,
                                                                           real_store):
    store = real_store
    a = await _tenant(store, "acme", "a-hooks")
    b = await _tenant(store, "bolt", "b-hooks")
    claims = await store.claim("isolation", 10, 30.0, 5)
    assert len(claims) == 2
    await store.finish([(c, Dead(error="gone"), AttemptResult(
        started_at=await store.now_s(), duration_s=0.02, status_code=410,
        response_excerpt="gone for good")) for c in claims])

    revoked = await _mint(client, "acme")
    async with client.post("/v1/admin/tenants/acme/revoke-tokens", headers=ADMIN) as resp:
        assert resp.status == 200
    full = await _mint(client, "acme")
    for gone in ("disabled-co", "deleted-co"):
        await store.put_tenant(gone, TenantFields())
    disabled, deleted = await _mint(client, "disabled-co"), await _mint(client, "deleted-co")
    await store.put_tenant("disabled-co", TenantFields(disabled=True))
    await store.delete_tenant("deleted-co")
    key = await store.token_signing_key(SIGNING_KEY_PURPOSE)
    mine = verify_signature(key, full)
    expired = mint(key, replace(mine, expires_at=int(await store.now_s()) - 1))
    forged_claims = mint(key, replace(mine, tenant="bolt"))
    tampered = forged_claims.split(".")[0] + "." + full.split(".")[1]
    read_only = await _mint(client, "acme", read_only=True, capabilities=["view", "view_secret"])
    lacking = {cap: await _mint(client, "acme", capabilities=[c for c in CAPABILITIES
                                                               if c != cap])
               for cap in CAPABILITIES if cap != "view"}

    routes = operations("/v1/tenant", "tenantToken")
    table = {(r.method, r.path): r for r in TENANT_ROUTES}
    assert sorted(routes) == sorted(table), "the document and TENANT_ROUTES differ"
    documented = {(m, p): DOCUMENT["paths"][p][m.lower()]["x-capability"] for m, p in routes}
    assert documented == {key: r.capability for key, r in table.items()}, "x-capability"
    before = (await _state(store, a), await _state(store, b))
    failures: list[str] = []
    walked = 0

    async def call(method: str, template: str, ids: Tenant, token: str | None,
                   body: dict[str, Any] | None = None,
                   query: dict[str, str] | None = None) -> tuple[int, Any]:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        payload = body if body is not None else BODIES.get((method, template), {})
        async with client.request(method, ids.path(template), headers=headers,
                                  json=payload if method != "GET" else None,
                                  params=query or QUERIES.get((method, template))) as resp:
            return resp.status, await resp.json()

    def expect(label: str, got: tuple[int, Any], status: int, error: str | None = None,
               **fields: Any) -> None:
        code, answer = got
        ok = (code == status if status >= 300 else 200 <= code < 300)
        if ok and error is not None:
            ok = isinstance(answer, dict) and answer.get("error") == error and all(
                answer.get(k) == v for k, v in fields.items())
        if not ok:
            failures.append(f"{label}: expected {status} {error or ''} {fields or ''}, "
                            f"got {code} {json.dumps(answer)[:300]}")

    for method, template in routes:
        route = table[(method, template)]
        label = f"{method} {template}"
        for case in CASES:
            if case == "lacking" and route.capability == "view":
                continue  # view is always granted: no token lacks it
            walked += 1
            if case == "other_tenant":
                if "{" in template:
                    got = await call(method, template, b, full)
                    expect(f"{label} [{case}]", got, 404, "not_found")
                    # The 404 says nothing of who has B's ids (the admin API's names them).
                    if b.id in json.dumps(got[1]) or "other_tenants" in got[1]:
                        failures.append(f"{label} [{case}]: names the tenant that has it: "
                                        f"{json.dumps(got[1])[:300]}")
                elif method == "POST":  # a body naming the other tenant: refused, not obeyed
                    body = {**BODIES[(method, template)], "name": b.name, "tenant": b.id}
                    expect(f"{label} [{case}]", await call(method, template, a, full, body),
                           400, "invalid_request", field="tenant")
                elif not filtered_by_destination(method, template):  # a list: none of B's
                    for query in ({}, {"destination": b.name}):
                        code, answer = await call(method, template, a, full, query=query)
                        text = json.dumps(answer)
                        if not 200 <= code < 300 or any(marker in text for marker in (
                                b.id, b.name, b.message_id)):
                            failures.append(f"{label} [{case}] {query}: {code} shows B's "
                                            f"rows: {text[:300]}")
                else:  # none of B's; B's destination name is A's 404 for a name nobody has
                    code, answer = await call(method, template, a, full)
                    text = json.dumps(answer)
                    if not 200 <= code < 300 or any(marker in text for marker in (
                            b.id, b.name, b.message_id)):
                        failures.append(f"{label} [{case}]: {code} shows B's rows: "
                                        f"{text[:300]}")
                    nobodys = await call(method, template, a, full,
                                         query={"destination": NOBODYS})
                    expect(f"{label} [{case}] a name nobody has", nobodys, 404, "not_found",
                           field="destination")
                    got = await call(method, template, a, full, query={"destination": b.name})
                    same = (nobodys[0], json.loads(json.dumps(nobodys[1]).replace(
                        NOBODYS, b.name)))
                    if got != same or b.id in json.dumps(got[1]):
                        failures.append(f"{label} [{case}] destination={b.name}: {got}, "
                                        f"not the answer to a name nobody has {same}")
                    expect(f"{label} [own] destination={a.name}", await call(
                        method, template, a, full, query={"destination": a.name}), 200)
            elif case == "tenant_param":
                query = {**QUERIES.get((method, template), {}), "tenant": b.id}
                expect(f"{label} [{case}]", await call(method, template, a, full, query=query),
                       400, "invalid_request", field="tenant")
            elif case in ("expired", "tampered", "revoked", "disabled", "deleted",
                          "no_token", "admin_token"):
                token, error = {
                    "expired": (expired, "token_expired"), "tampered": (tampered, "token_invalid"),
                    "revoked": (revoked, "token_revoked"), "disabled": (disabled, "token_revoked"),
                    "deleted": (deleted, "token_revoked"), "no_token": (None, "token_missing"),
                    "admin_token": (ADMIN_TOKEN, "token_invalid")}[case]
                expect(f"{label} [{case}]", await call(method, template, a, token), 401, error)
            elif case == "read_only":
                if route.writes:
                    expect(f"{label} [{case}]", await call(method, template, a, read_only),
                           403, "read_only")
                else:
                    expect(f"{label} [{case}]", await call(method, template, a, read_only), 200)
            elif case == "lacking":
                expect(f"{label} [{case}]",
                       await call(method, template, a, lacking[route.capability]), 403,
                       "capability_missing", capability=route.capability)

    after = (await _state(store, a), await _state(store, b))
    assert after == before, "a refused call changed a tenant's rows"

    # own: A's token with A's ids reaches every route (removal last).
    # (resend before recover: recover resends A's one dead job; removal at the very end)
    last = {"/v1/tenant/destinations/{name}/recover": 1}
    for method, template in sorted(routes, key=lambda r: (r[0] == "DELETE", last.get(r[1], 0))):
        walked += 1
        expect(f"{method} {template} [own]", await call(method, template, a, full), 200)
    assert (await _state(store, b)) == before[1], "tenant A's calls changed tenant B's rows"

    # every admin operation (and /metrics) refuses a tenant token
    admin_routes = operations("/", "adminToken")
    for method, template in admin_routes:
        path = template.replace("{name}", a.name).replace("{ref}", a.ref).replace(
            "{id}", str(a.job))
        async with client.request(method, path, json={} if method != "GET" else None,
                                  headers={"Authorization": f"Bearer {full}"}) as resp:
            walked += 1
            expect(f"{method} {template} [tenant token on admin]",
                   (resp.status, await resp.json() if resp.content_type == "application/json"
                    else await resp.text()), 401, "unauthorized")

    assert not failures, f"{len(failures)} of {walked} checks failed:\n" + "\n".join(failures)
    print(f"\nisolation: {len(routes)} tenant routes x {len(CASES) + 1} cases "
          f"({walked - len(admin_routes)} checks) + {len(admin_routes)} admin routes")


async def test_a_destination_filter_is_the_same_404_whether_another_tenant_has_the_name(
        client, real_store):
    """The tenant API's lists filtered by a destination the token's tenant lacks answer 404
    `not_found` naming only that destination, byte for byte the same before and after
    another tenant adds (then removes) one of that name: nothing tells a tenant which
    names its neighbours use. A removed destination of its own still filters by the name it
    keeps (`NAME~removed-ID`); the freed plain name is 404."""
    a = await _tenant(real_store, "acme", "a-hooks")
    await real_store.put_tenant("bolt", TenantFields())
    bearer = {"Authorization": f"Bearer {await _mint(client, 'acme')}"}
    lists = [path for method, path in operations("/v1/tenant", "tenantToken")
             if method == "GET" and filtered_by_destination(method, path)]
    assert sorted(lists) == ["/v1/tenant/events", "/v1/tenant/jobs"]

    async def answers() -> list[tuple[int, bytes]]:
        out = []
        for path in lists:
            async with client.get(path, params={"destination": "ledger"},
                                  headers=bearer) as resp:
                out.append((resp.status, await resp.read()))
        return out

    before = await answers()
    assert [(status, json.loads(body)) for status, body in before] == [(404, {
        "error": "not_found", "detail": "no destination named 'ledger'",
        "field": "destination"})] * len(lists)
    await real_store.add_destination(name="ledger", url=URL, secret="whsec_" + "D" * 32,
                                     event_types=["*"], max_in_flight=2, tenant="bolt")
    await real_store.add_event(new_event("bolt-evt", "order.paid", tenant="bolt"))
    assert await answers() == before, "another tenant's destination changed the answer"
    await real_store.remove_destination("ledger", tenant="bolt")
    assert await answers() == before, "another tenant's removed destination changed it"

    await real_store.remove_destination(a.name, tenant=a.id)
    [job] = await real_store.list_tenant_jobs(a.id)
    assert job.destination.startswith(f"{a.name}~removed-")
    for path, key in (("/v1/tenant/jobs", "jobs"), ("/v1/tenant/events", "events")):
        async with client.get(path, params={"destination": job.destination},
                              headers=bearer) as resp:
            assert resp.status == 200 and len((await resp.json())[key]) == 1, path
        async with client.get(path, params={"destination": a.name}, headers=bearer) as resp:
            assert (resp.status, (await resp.json())["field"]) == (404, "destination"), path


async def test_tokens_minted_through_one_store_open_the_api_through_another(store_url):
    """Two stores on one database (two hosts of a shared PostgreSQL, or two processes on one
    SQLite file): both make the signing key at once and get the same one, and a token minted
    through one host's admin API opens the tenant API of the other; a revoke through one
    refuses the token on the other at once."""
    async with opened_store(store_url) as first, opened_store(store_url) as second:
        keys = await asyncio.gather(first.token_signing_key(SIGNING_KEY_PURPOSE),
                                    second.token_signing_key(SIGNING_KEY_PURPOSE))
        assert keys[0] == keys[1] and len(keys[0]) == 32
        await first.put_tenant("acme", TenantFields(name="Acme"))
        config = Config(admin_token=ADMIN_TOKEN)
        async with TestClient(TestServer(build_app(first, config), host="127.0.0.1")) as one, \
                TestClient(TestServer(build_app(second, config), host="127.0.0.1")) as two:
            token = await _mint(one, "acme", ttl_s=600)
            bearer = {"Authorization": f"Bearer {token}"}
            async with two.get("/v1/tenant", headers=bearer) as resp:
                assert resp.status == 200, await resp.text()
                assert (await resp.json())["tenant"]["id"] == "acme"
            async with one.post("/v1/admin/tenants/acme/revoke-tokens", headers=ADMIN) as resp:
                assert resp.status == 200
            async with two.get("/v1/tenant", headers=bearer) as resp:
                assert (resp.status, (await resp.json())["error"]) == (401, "token_revoked")


def test_token_claims_carry_no_secret():
    """A token's claims are readable base64url JSON: tenant, epoch, expiry, capabilities,
    read-only; nothing else."""
    token = mint(b"k" * 32, TokenClaims(tenant="acme", epoch=7, expires_at=1_900_000_000,
                                        capabilities=("view",), read_only=True))
    assert token.startswith("hlt_")
    claims = verify_signature(b"k" * 32, token)
    assert claims.encode() == {"tenant": "acme", "epoch": 7, "exp": 1_900_000_000,
                               "capabilities": ["view"], "read_only": True}


async def test_a_tenant_filter_cannot_test_the_operators_metadata(client, real_store):
    """The tenant's metadata is the operator's: a filter given with a tenant token that
    tests `tenant.metadata` (or the whole `tenant` object) is refused on filter-test, create
    and edit (else which events match would spell the values out, a `$startsWith` at a
    time); `tenant.id` and the event's own fields are fine; the operator's routes may."""
    tenant = await _tenant(real_store, "globex", "billing")
    await real_store.put_tenant("globex", TenantFields(metadata='{"note":"churn-risk"}'))
    bearer = {"Authorization": f"Bearer {await _mint(client, 'globex')}"}
    base = "/v1/tenant/destinations"
    guesses = ({"tenant.metadata.note": {"$startsWith": "c"}},
               {"tenant": {"metadata": {"note": {"$exist": True}}}},
               {"tenant": {"$eq": {"id": "globex", "metadata": {"note": "churn-risk"}}}},
               {"$not": {"tenant.metadata.note": "x"}})
    for guess in guesses:
        for method, path, body in (
                ("POST", f"{base}/{tenant.name}/filter-test", {"filter": guess}),
                ("POST", base, {"name": "spy", "url": URL, "event_types": ["*"],
                                "filter": guess}),
                ("PATCH", f"{base}/{tenant.name}", {"filter": guess})):
            async with client.request(method, path, json=body, headers=bearer) as resp:
                answer = await resp.json()
                assert (resp.status, answer.get("field")) == (400, "filter"), (path, guess)
                assert "churn" not in json.dumps(answer)
    allowed = {"$and": [{"tenant.id": "globex"}, {"type": {"$startsWith": "order."}}]}
    async with client.post(f"{base}/{tenant.name}/filter-test", json={"filter": allowed},
                           headers=bearer) as resp:
        assert resp.status == 200, await resp.text()
    async with client.post(f"/v1/admin/destinations/{tenant.name}/filter-test?tenant=globex",
                           json={"filter": guesses[0]}, headers=ADMIN) as resp:
        answer = await resp.json()
        assert resp.status == 200 and answer["matched"] == 1, answer
    assert [d.name for d in await real_store.list_destinations("globex")] == ["billing"]
    assert (await real_store.get_destination("billing", tenant="globex")).filter is None


async def test_a_tenant_tokens_unknown_field_message_offers_no_tenant(client, real_store):
    """A new destination's body with an unknown field: the tenant API lists what it accepts,
    which is not `tenant` (a tenant token acts for its own tenant only; the admin API, which
    shares the handler, lists it)."""
    await _tenant(real_store, "globex", "billing")
    bearer = {"Authorization": f"Bearer {await _mint(client, 'globex')}"}
    async with client.post("/v1/tenant/destinations", headers=bearer,
                           json={"name": "x", "url": URL, "colour": "red"}) as resp:
        refused = await resp.json()
    assert (resp.status, refused["field"]) == (400, "colour"), refused
    assert "tenant" not in refused["detail"].split("accepted: ")[1].split(", ")


async def test_a_sender_id_only_another_tenant_has_is_404_on_the_tenant_api(client, real_store):
    """The operator's lookup finds a sender's id that only one tenant has without being told
    the tenant; a tenant token asking for that id gets the 404 it gets for an id nobody has,
    naming nothing of the other tenant's (its lookup never leaves its own events)."""
    other = await _tenant(real_store, "bolt", "b-hooks")
    await real_store.add_event(new_event("only-theirs", "order.paid", tenant="bolt"))
    await real_store.put_tenant("acme", TenantFields())
    bearer = {"Authorization": f"Bearer {await _mint(client, 'acme')}"}
    async with client.get("/v1/admin/events/only-theirs", headers=ADMIN) as resp:
        assert resp.status == 200 and (await resp.json())["tenant"] == "bolt"

    async def tenant_answer(ref: str) -> tuple[int, str]:
        async with client.get(f"/v1/tenant/events/{ref}", headers=bearer) as resp:
            return resp.status, (await resp.text()).replace(ref, "REF")

    assert await tenant_answer("only-theirs") == await tenant_answer("nobody-has-it")
    status, answer = await tenant_answer("only-theirs")
    assert status == 404 and "bolt" not in answer, answer
    for ref in (other.ref, other.message_id):  # bolt's global ids: not acme's either
        assert (await tenant_answer(ref))[0] == 404, ref

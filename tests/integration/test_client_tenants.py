"""The publishing clients' admin half (sync and asyncio): put_tenant and portal_access against
the real ingest app on 127.0.0.1 over a SQLite file. A tenant is created, then changed; a
minted token opens the tenant API for that tenant only, read-only when asked; the ingest
token and bad values come back as HooklineRejected with the server's status and field; a
server that starts listening late is waited for, one that never does ends in
HooklineUnavailable naming the request."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hookline_client import (
    NO_LIMIT,
    AsyncHooklineClient,
    HooklineClient,
    HooklineRejected,
    HooklineUnavailable,
    PortalAccess,
    Tenant,
)

from hookline.ingest.app import build_app
from hookline.rehearsal.harness import free_port
from hookline.shared.config import Config
from tests.conftest import ROOT, opened_store, serving

ADMIN = "admin-t0ken-for-client-tests"
INGEST = "ingest-t0ken-for-client-tests"


def _config() -> Config:
    return Config(admin_token=ADMIN, ingest_token=INGEST, allow_networks="127.0.0.0/8")


@pytest.fixture
async def base_url(tmp_path: Path) -> AsyncIterator[str]:
    """The ingest app on a free port of 127.0.0.1, over a fresh SQLite file."""
    async with (opened_store(str(tmp_path / "hookline.db")) as store,
                serving(build_app(store, _config())) as port):
        yield f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def serving_on(app: web.Application, port: int) -> AsyncIterator[None]:
    """`app` on 127.0.0.1:`port` for the block (a port chosen before it listens)."""
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield
    finally:
        await runner.cleanup()


class BlockingAdmin:
    """A HooklineClient with awaitable methods: each call runs in a thread, so the server on
    this test's event loop keeps answering while the client blocks."""

    def __init__(self, base_url: str, token: str, **options: Any) -> None:
        self._client = HooklineClient(base_url, token, **options)

    async def put_tenant(self, *args: Any, **kwargs: Any) -> Tenant:
        return await asyncio.to_thread(self._client.put_tenant, *args, **kwargs)

    async def portal_access(self, *args: Any, **kwargs: Any) -> PortalAccess:
        return await asyncio.to_thread(self._client.portal_access, *args, **kwargs)

    async def close(self) -> None:
        self._client.close()


@pytest.fixture(params=["sync", "async"])
async def connect(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Any]]:
    """Makes a client of the parameter's kind (base URL, token, options); closes them all."""
    made: list[Any] = []

    def make(base_url: str, token: str, **options: Any) -> Any:
        kind = BlockingAdmin if request.param == "sync" else AsyncHooklineClient
        made.append(kind(base_url, token, **options))
        return made[-1]
    yield make
    for client in made:
        await client.close()


async def _get(url: str, token: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(
            url, headers={"Authorization": f"Bearer {token}"}) as response:
        return response.status, await response.json()


async def _post(url: str, token: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(
            url, json=body, headers={"Authorization": f"Bearer {token}"}) as response:
        return response.status, await response.json()


async def test_a_tenant_is_created_then_changed_and_its_fields_round_trip(base_url, connect):
    admin = connect(base_url, ADMIN)
    created = await admin.put_tenant("acme", name="Acme Inc",
                                     metadata={"plan": "pro", "region": "eu"},
                                     max_destinations=3)
    assert created.created is True
    assert (created.id, created.name, created.metadata, created.max_destinations,
            created.disabled, created.destinations) == (
        "acme", "Acme Inc", {"plan": "pro", "region": "eu"}, 3, False, 0)
    assert created.created_at > 0 and created.updated_at >= created.created_at

    # Only the fields given change; the same put again is no creation.
    changed = await admin.put_tenant("acme", disabled=True)
    assert changed.created is False
    assert (changed.name, changed.metadata, changed.max_destinations, changed.disabled) == (
        "Acme Inc", {"plan": "pro", "region": "eu"}, 3, True)
    assert changed.created_at == created.created_at
    unlimited = await admin.put_tenant("acme", name="Acme", max_destinations=NO_LIMIT,
                                       metadata={}, disabled=False)
    assert (unlimited.created, unlimited.name, unlimited.metadata, unlimited.max_destinations,
            unlimited.disabled) == (False, "Acme", {}, None, False)
    # What the admin API shows afterwards is what the client was answered.
    status, shown = await _get(f"{base_url}/v1/admin/tenants/acme", ADMIN)
    assert status == 200
    assert {k: shown[k] for k in ("id", "name", "metadata", "max_destinations", "disabled")} == {
        "id": "acme", "name": "Acme", "metadata": {}, "max_destinations": None,
        "disabled": False}

    bare = await admin.put_tenant("beta")  # no fields: created with the defaults
    assert (bare.created, bare.id, bare.metadata, bare.max_destinations, bare.disabled) == (
        True, "beta", {}, None, False)


async def test_a_deleted_tenant_with_stored_events_comes_back_only_with_adopt_history(
        base_url, connect):
    """A tenant deleted while its events are stored: put_tenant of its id is refused (409,
    HooklineRejected), unless adopt_history says it is the same customer."""
    admin = connect(base_url, ADMIN)
    await admin.put_tenant("acme")
    status, _ = await _post(f"{base_url}/v1/events", INGEST,
                            {"id": "e1", "type": "order.paid", "data": {}, "tenant": "acme"})
    assert status == 202
    async with aiohttp.ClientSession() as session, session.delete(
            f"{base_url}/v1/admin/tenants/acme",
            headers={"Authorization": f"Bearer {ADMIN}"}) as response:
        assert response.status == 200
    with pytest.raises(HooklineRejected) as refused:
        await admin.put_tenant("acme")
    assert refused.value.status == 409
    back = await admin.put_tenant("acme", adopt_history=True)
    assert (back.created, back.id) == (True, "acme")


async def test_a_portal_access_token_opens_the_tenant_api_of_its_tenant(base_url, connect):
    admin = connect(base_url, ADMIN)
    await admin.put_tenant("acme", name="Acme Inc")
    await admin.put_tenant("beta")
    access = await admin.portal_access("acme", ttl_s=600)
    assert access.token.startswith("hlt_")
    assert access.url == f"{base_url}/portal/#token={access.token}"
    assert access.read_only is False
    assert set(access.capabilities) == {"view", "view_secret", "manage_secret",
                                        "manage_destinations", "resend"}
    assert access.token not in repr(access)  # a credential kept out of logs

    status, whoami = await _get(f"{base_url}/v1/tenant", access.token)
    assert status == 200, whoami
    assert whoami["tenant"] == {"id": "acme", "name": "Acme Inc", "max_destinations": None}
    assert (tuple(whoami["capabilities"]), whoami["read_only"], whoami["expires_at"]) == (
        access.capabilities, False, access.expires_at)
    # ttl_s=600 from the server's clock, which is this host's on SQLite
    assert 590 < access.expires_at - time.time() <= 601
    status, made = await _post(f"{base_url}/v1/tenant/destinations", access.token,
                               {"name": "billing", "url": "http://127.0.0.1:9/hooks"})
    assert status == 201, made
    # the destination is acme's: beta's token does not see it
    other = await admin.portal_access("beta", capabilities=["view"])
    assert other.capabilities == ("view",)
    status, seen = await _get(f"{base_url}/v1/tenant/destinations", other.token)
    assert (status, seen) == (200, [])
    status, seen = await _get(f"{base_url}/v1/tenant/destinations", access.token)
    assert status == 200 and [d["name"] for d in seen] == ["billing"]


async def test_a_read_only_portal_access_reads_and_never_writes(base_url, connect):
    admin = connect(base_url, ADMIN)
    await admin.put_tenant("acme")
    access = await admin.portal_access("acme", read_only=True)
    assert (access.read_only, access.capabilities) == (True, ("view",))
    status, whoami = await _get(f"{base_url}/v1/tenant", access.token)
    assert (status, whoami["read_only"], whoami["capabilities"]) == (200, True, ["view"])
    status, refused = await _post(f"{base_url}/v1/tenant/destinations", access.token,
                                  {"name": "billing", "url": "http://127.0.0.1:9/hooks"})
    assert (status, refused["error"]) == (403, "read_only")
    # asked for, view_secret goes with read_only; a capability that writes is refused
    revealing = await admin.portal_access("acme", read_only=True, capabilities=["view_secret"])
    assert (revealing.read_only, revealing.capabilities) == (True, ("view", "view_secret"))
    with pytest.raises(HooklineRejected) as refused:
        await admin.portal_access("acme", read_only=True,
                                  capabilities=["view_secret", "manage_destinations"])
    assert refused.value.field == "capabilities"
    assert "manage_destinations" in str(refused.value)


async def test_the_ingest_token_is_refused_with_the_servers_status(base_url, connect):
    publisher = connect(base_url, INGEST)
    with pytest.raises(HooklineRejected) as caught:
        await publisher.put_tenant("acme", name="Acme Inc")
    refused = caught.value
    assert refused.status in (401, 403) and refused.code == "unauthorized"
    assert refused.request == "PUT /v1/admin/tenants/acme"
    assert str(refused).startswith("hookline refused PUT /v1/admin/tenants/acme: 401 ")
    with pytest.raises(HooklineRejected) as caught:
        await publisher.portal_access("acme")
    assert caught.value.status in (401, 403)
    assert caught.value.request == "POST /v1/admin/tenants/acme/tokens"
    # nothing was created by the refused put
    status, _ = await _get(f"{base_url}/v1/admin/tenants/acme", ADMIN)
    assert status == 404


async def test_an_admin_api_without_an_admin_token_is_refused_403(tmp_path, connect):
    async with opened_store(str(tmp_path / "hookline.db")) as store:
        app = build_app(store, Config(ingest_token=INGEST, allow_networks="127.0.0.0/8"))
        async with serving(app) as port:
            client = connect(f"http://127.0.0.1:{port}", INGEST)
            with pytest.raises(HooklineRejected) as caught:
                await client.put_tenant("acme")
    assert (caught.value.status, caught.value.code) == (403, "auth_not_configured")


@pytest.mark.parametrize(("call", "arguments", "field"), [
    ("put_tenant", {"name": "x" * 201}, "name"),
    ("put_tenant", {"name": "tab\there"}, "name"),
    ("put_tenant", {"metadata": {"blob": "x" * 5000}}, "metadata"),
    ("put_tenant", {"max_destinations": -1}, "max_destinations"),
    ("put_tenant", {"max_destinations": 1.5}, "max_destinations"),
    ("portal_access", {"ttl_s": 86401}, "ttl_s"),
    ("portal_access", {"ttl_s": 0}, "ttl_s"),
    ("portal_access", {"capabilities": ["view", "fly"]}, "capabilities"),
    ("portal_access", {"capabilities": "view"}, "capabilities"),
    ("portal_access", {"read_only": "yes"}, "read_only"),
])
async def test_a_bad_value_is_refused_400_naming_its_field(base_url, connect, call, arguments,
                                                          field):
    admin = connect(base_url, ADMIN)
    await admin.put_tenant("acme")
    with pytest.raises(HooklineRejected) as caught:
        await getattr(admin, call)("acme", **arguments)
    refused = caught.value
    assert (refused.status, refused.code, refused.field) == (400, "invalid_request", field), (
        refused)


@pytest.mark.parametrize("tenant_id", ["_mine", "a/b", "a b", "ü", "a.b", "%41", "x" * 129])
async def test_a_malformed_tenant_id_reaches_its_route_and_is_refused_400_id(
        base_url, connect, tenant_id):
    """Percent-encoded, each id stays one path segment of the tenant route: hookline, not
    another route, refuses it."""
    admin = connect(base_url, ADMIN)
    with pytest.raises(HooklineRejected) as caught:
        await admin.put_tenant(tenant_id)
    assert (caught.value.status, caught.value.field) == (400, "id"), caught.value
    with pytest.raises(HooklineRejected) as caught:
        await admin.portal_access(tenant_id)
    assert (caught.value.status, caught.value.field) == (400, "id"), caught.value


@pytest.mark.parametrize("tenant_id", ["", ".", ".."])
async def test_an_id_that_is_no_path_segment_is_refused_before_any_request(connect,
                                                                            tenant_id):
    admin = connect("http://127.0.0.1:9", ADMIN)  # nothing listens: no request is made
    with pytest.raises(ValueError, match="tenant_id"):
        await admin.put_tenant(tenant_id)
    with pytest.raises(ValueError, match="tenant_id"):
        await admin.portal_access(tenant_id)


async def test_unknown_and_disabled_tenants_get_no_portal_access(base_url, connect):
    admin = connect(base_url, ADMIN)
    with pytest.raises(HooklineRejected) as caught:
        await admin.portal_access("nobody")
    assert (caught.value.status, caught.value.code) == (404, "not_found")
    await admin.put_tenant("acme", disabled=True)
    with pytest.raises(HooklineRejected) as caught:
        await admin.portal_access("acme")
    assert (caught.value.status, caught.value.code) == (409, "conflict")


async def test_a_server_that_starts_late_is_waited_for(tmp_path, connect):
    port = free_port()
    admin = connect(f"http://127.0.0.1:{port}", ADMIN, deadline_s=20, backoff_base_s=0.05,
                    backoff_cap_s=0.2)
    putting = asyncio.ensure_future(admin.put_tenant("acme", name="Acme Inc"))
    await asyncio.sleep(0.5)  # connections refused meanwhile: retried
    assert not putting.done()
    async with (opened_store(str(tmp_path / "hookline.db")) as store,
                serving_on(build_app(store, _config()), port)):
        tenant = await putting
        access = await admin.portal_access("acme")
        status, whoami = await _get(f"http://127.0.0.1:{port}/v1/tenant", access.token)
    assert tenant.created and tenant.name == "Acme Inc"
    assert (status, whoami["tenant"]["id"]) == (200, "acme")


async def test_no_answer_until_the_deadline_is_unavailable_naming_the_request(connect):
    admin = connect(f"http://127.0.0.1:{free_port()}", ADMIN, deadline_s=0.5,
                    backoff_base_s=0.05, backoff_cap_s=0.1)
    with pytest.raises(HooklineUnavailable) as caught:
        await admin.portal_access("acme")
    unavailable = caught.value
    assert unavailable.event_id is None and unavailable.attempts >= 2
    assert unavailable.request == "POST /v1/admin/tenants/acme/tokens"
    assert str(unavailable).startswith(
        "hookline unavailable: POST /v1/admin/tenants/acme/tokens not confirmed after ")


TENANT_ANSWER = {"id": "acme", "name": "Acme Inc", "metadata": {}, "max_destinations": None,
                 "disabled": False, "created_at": 1.5, "updated_at": 1.5, "destinations": 0}


async def test_busy_answers_are_retried_under_a_path_prefix_and_a_stranger_is_refused(
        connect):
    """A scripted server (hookline's busy answers cannot be caused on demand): 503 and 429
    are retried with the same request, the base URL's path prefix is kept, and a 2xx that is
    not hookline's answer is refused as `not_hookline` rather than read as a tenant."""
    answers: list[web.Response] = [
        web.json_response({"error": "store_unavailable", "detail": "busy"}, status=503),
        web.json_response({"error": "rate_limited"}, status=429, headers={"Retry-After": "0"}),
        web.json_response(TENANT_ANSWER, status=201),
        web.Response(status=200, text="<html>a login page</html>"),
    ]
    seen: list[tuple[str, str, bytes, str]] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path, await request.read(),
                     request.headers.get("Authorization", "")))
        return answers[len(seen) - 1]
    app = web.Application()
    app.router.add_route("*", "/hooks/v1/admin/tenants/{id}", answer)
    async with serving(app) as port:
        admin = connect(f"http://127.0.0.1:{port}/hooks/", ADMIN, backoff_base_s=0.01)
        tenant = await admin.put_tenant("acme", name="Acme Inc")
        with pytest.raises(HooklineRejected) as caught:
            await admin.put_tenant("acme")
    assert tenant == Tenant(created=True, **TENANT_ANSWER)
    assert [s[:2] for s in seen] == [("PUT", "/hooks/v1/admin/tenants/acme")] * 4
    assert {s[2] for s in seen[:3]} == {b'{"name":"Acme Inc"}'} and seen[3][2] == b"{}"
    assert {s[3] for s in seen} == {f"Bearer {ADMIN}"}
    assert (caught.value.status, caught.value.code) == (200, "not_hookline")


def _python_block_after(path: Path, marker: str) -> str:
    """The first ```python block after `marker` in a Markdown file, as printed."""
    text = path.read_text().split(marker, 1)[1]
    return text.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize(("readme", "marker"), [
    ("README.md", "**Giving a customer its portal:**"),
    ("shared/client/README.md", "## Your customers' tenants and portal links"),
])
async def test_the_readme_portal_snippets_run_as_printed(base_url, readme, marker):
    snippet = _python_block_after(ROOT / readme, marker)
    assert "admin_token" in snippet and "put_tenant" in snippet, snippet
    names: dict[str, Any] = {"admin_token": ADMIN}
    # blocking code: in a thread, so the server on this loop answers meanwhile
    await asyncio.to_thread(exec, snippet.replace("http://127.0.0.1:8080", base_url), names)
    names["admin"].close()
    assert names["tenant"].created is True and names["tenant"].metadata == {"plan": "pro"}
    status, whoami = await _get(f"{base_url}/v1/tenant", names["access"].token)
    assert (status, whoami["tenant"]["id"]) == (200, "acme")
    assert names["access"].url.startswith(f"{base_url}/portal/#token=hlt_")


async def test_metadata_that_is_not_a_mapping_is_refused_before_any_request(base_url, connect):
    """`put_tenant(metadata="x")` raises a TypeError naming `metadata`, not dict()'s own
    message, and nothing reaches the service."""
    admin = connect(base_url, ADMIN)
    with pytest.raises(TypeError, match="metadata must be a mapping"):
        await admin.put_tenant("umbrella", metadata="x")
    status, _ = await _get(f"{base_url}/v1/admin/tenants/umbrella", ADMIN)
    assert status == 404

"""Security over real sockets on 127.0.0.1: the SSRF guard at destination creation
and at send time (no TCP connection to a refused address, a rebinding resolver, redirects),
required bearer tokens, header injection, and files the service creates."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.db_url import StorageRefused, redact_url
from hookline.shared.errors import ConfigError, DestinationBlocked
from hookline.shared.models import Claim
from hookline.shared.policy.netguard import AddressPolicy, vet_destination
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.store.sqlite import SqliteStore
from hookline.workers.sender import Sender

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "security-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

# Every address form the guard must refuse, as a URL host (port added where it is used).
BLOCKED_HOSTS = [
    "127.0.0.1", "localhost", "10.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254",
    "100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1", "192.0.2.1", "198.51.100.7",
    "[::1]", "[fd00::1]", "[fe80::1]", "[::]", "[ff02::1]", "[2001:db8::1]",
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "[::ffff:169.254.169.254]",
    "[64:ff9b::7f00:1]", "[2002:7f00:1::]",
]
# Legacy IPv4 spellings: refused as a URL before the guard reads them (a destination must
# write four decimal numbers), and read by the guard at send time for older rows.
LEGACY_HOSTS = ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0x7f.1", "017700000001"]
# Forms that point at 127.0.0.1 itself, so a send test can prove no connection reached it.
LOOPBACK_FORMS = ["127.0.0.1", "localhost", "2130706433", "0x7f000001", "0177.0.0.1",
                  "127.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"]


class ConnectionCounter:
    """A TCP listener on 127.0.0.1 that answers any request 200 and counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> ConnectionCounter:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await reader.read(65536)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


def claim_for(url: str) -> Claim:
    return Claim(job_id=1, event_id=1, message_id="msg_security", event_type="t",
                 destination_id=1, destination_name="d", url=url, secret=generate_secret(),
                 body=b'{"n": 1}', attempt=1, lease_token="tok", lease_owner="test",
                 lease_until=0.0)


class RebindingResolver(AbstractResolver):
    """Answers a public address the first time and 127.0.0.1 afterwards (DNS rebinding)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.calls = 0

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.calls += 1
        address = "93.184.216.34" if self.calls == 1 else "127.0.0.1"
        return [{"hostname": host, "host": address, "port": port or self.port,
                 "family": socket.AF_INET, "proto": 0, "flags": socket.AI_NUMERICHOST}]

    async def close(self) -> None:
        return None


async def client_for(store: Store, config: Config) -> TestClient[Any, Any]:
    client = TestClient(TestServer(build_app(store, config), host="127.0.0.1"))
    await client.start_server()
    return client


# -- outbound: creation time ---------------------------------------------------------------


async def test_admin_api_refuses_every_blocked_address_form(real_store):
    """POST /v1/admin/destinations answers 400 destination_blocked naming allow_networks for
    each non-global address form, and stores nothing; a listed network is then allowed."""
    client = await client_for(real_store, Config(admin_token=TOKEN))
    try:
        for host in BLOCKED_HOSTS:
            async with client.post("/v1/admin/destinations", headers=AUTH, json={
                    "name": "d", "url": f"http://{host}:8080/hook"}) as resp:
                body = await resp.json()
            assert resp.status == 400, host
            assert body["error"] == "destination_blocked", host
            assert "allow_networks" in body["detail"], host
        for host in LEGACY_HOSTS:
            async with client.post("/v1/admin/destinations", headers=AUTH, json={
                    "name": "d", "url": f"http://{host}:8080/hook"}) as resp:
                body = await resp.json()
            assert (resp.status, body["error"], body["field"]) == (
                400, "invalid_request", "url"), host
            assert "four decimal numbers" in body["detail"], host
        assert await real_store.list_destinations() == []
    finally:
        await client.close()
    client = await client_for(real_store, Config(admin_token=TOKEN,
                                                 allow_networks="127.0.0.0/8"))
    try:
        async with client.post("/v1/admin/destinations", headers=AUTH, json={
                "name": "d", "url": "http://127.0.0.1:8080/hook"}) as resp:
            assert resp.status == 201
        async with client.patch("/v1/admin/destinations/d", headers=AUTH,
                                json={"url": "http://169.254.169.254/latest"}) as resp:
            assert (resp.status, (await resp.json())["error"]) == (400, "destination_blocked")
        assert (await real_store.get_destination("d")).url == "http://127.0.0.1:8080/hook"
    finally:
        await client.close()


async def test_https_only_and_rebinding_resolver_at_creation():
    """https_only refuses http://; a name is vetted by what it resolves to at creation (the
    rebinding stub's first, public answer passes; its later answer is vetted at send)."""
    with pytest.raises(DestinationBlocked, match="https_only"):
        await vet_destination("http://example.com/", AddressPolicy(https_only=True))
    resolver = RebindingResolver(port=443)
    await vet_destination("https://rebind.test/", AddressPolicy(), resolver=resolver)
    with pytest.raises(DestinationBlocked, match="loopback"):
        await vet_destination("https://rebind.test/", AddressPolicy(), resolver=resolver)


def test_cli_refuses_a_blocked_destination(tmp_path):
    """`hookline destinations add` exits 2 (bad input) with a one-line reason naming the
    setting; with HOOKLINE_ALLOW_NETWORKS covering the address it is added."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["PYTHONPATH"] = str(ROOT)
    db = str(tmp_path / "cli.db")
    cmd = [sys.executable, "-m", "hookline.supervisor.cli", "--db", db, "destinations", "add",
           "meta", "http://169.254.169.254/latest/meta-data"]
    refused = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2
    assert "link-local" in refused.stderr and "HOOKLINE_ALLOW_NETWORKS" in refused.stderr
    assert "Traceback" not in refused.stderr
    subprocess.run([*cmd[:5], "init"], check=True, capture_output=True, env=env, timeout=60)
    allowed = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                             env={**env, "HOOKLINE_ALLOW_NETWORKS": "169.254.0.0/16"})
    assert allowed.returncode == 0, allowed.stderr


# -- outbound: send time -------------------------------------------------------------------


async def test_send_time_guard_makes_no_connection_for_any_loopback_form():
    """A destination stored before the guard (or under another policy) still cannot reach a
    refused address: every spelling of 127.0.0.1 fails as DestinationBlocked with zero TCP
    connections; the same listener is reached once the network is allowed (control)."""
    async with ConnectionCounter() as listener, Sender(timeout_s=2.0) as sender:
        for host in LOOPBACK_FORMS:
            result = await sender.send(claim_for(f"http://{host}:{listener.port}/hook"))
            assert result.status_code is None, host
            assert (result.error or "").startswith("DestinationBlocked"), (host, result.error)
        assert listener.connections == 0
    async with ConnectionCounter() as listener, Sender(
            timeout_s=2.0, policy=AddressPolicy.parse("127.0.0.0/8")) as sender:
        result = await sender.send(claim_for(f"http://127.0.0.1:{listener.port}/hook"))
        assert result.status_code == 200 and listener.connections == 1


async def test_rebinding_resolver_is_vetted_on_the_address_used():
    """The stub answers public first (the creation check passes) and 127.0.0.1 at send time:
    the connection attempt is refused on that exact answer and nothing reaches the listener."""
    async with ConnectionCounter() as listener:
        resolver = RebindingResolver(port=listener.port)
        url = f"http://rebind.test:{listener.port}/hook"
        await vet_destination(url, AddressPolicy(), resolver=resolver)  # public: passes
        async with Sender(timeout_s=2.0, resolver=resolver) as sender:
            result = await sender.send(claim_for(url))
        assert resolver.calls == 2
        assert (result.error or "").startswith("DestinationBlocked"), result.error
        assert "127.0.0.1" in (result.error or "")
        assert listener.connections == 0


async def test_redirects_are_recorded_never_followed():
    """A 302 to 169.254.169.254, or to another local listener, is recorded with its Location;
    the redirect target receives no connection."""
    async with ConnectionCounter() as target:
        for location in ("http://169.254.169.254/latest/meta-data/",
                         f"http://127.0.0.1:{target.port}/internal"):
            async def redirect(request: web.Request, to: str = location) -> web.Response:
                return web.Response(status=302, headers={"Location": to})

            app = web.Application()
            app.router.add_post("/hook", redirect)
            async with TestServer(app, host="127.0.0.1") as server, Sender(
                    timeout_s=2.0, policy=AddressPolicy.parse("127.0.0.0/8")) as sender:
                result = await sender.send(claim_for(str(server.make_url("/hook"))))
            assert (result.status_code, result.location) == (302, location)
        assert target.connections == 0


# -- inbound -------------------------------------------------------------------------------


async def test_ingest_requires_its_token(real_store):
    """/v1/events: no or a wrong token is 401 (WWW-Authenticate: Bearer), no token configured
    is 403 naming the setting, the admin token does not open it; nothing is stored until the
    right token is sent."""
    body = b'{"id": "e1", "type": "t", "data": {}}'
    json_type = {"Content-Type": "application/json"}
    client = await client_for(real_store, Config(ingest_token=TOKEN, admin_token="other"))
    try:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN},
                        {"Authorization": "Bearer other"}):
            async with client.post("/v1/events", data=body,
                                   headers={**json_type, **headers}) as resp:
                assert (resp.status, (await resp.json())["error"]) == (401, "unauthorized")
                assert resp.headers["WWW-Authenticate"] == "Bearer"
        assert (await real_store.stats()).events == 0
        async with client.post("/v1/events", data=body, headers={**json_type, **AUTH}) as resp:
            assert resp.status == 202
    finally:
        await client.close()
    client = await client_for(real_store, Config())
    try:
        async with client.post("/v1/events", data=body, headers={**json_type, **AUTH}) as resp:
            answer = await resp.json()
        assert (resp.status, answer["error"]) == (403, "auth_not_configured")
        assert "HOOKLINE_INGEST_TOKEN" in answer["detail"]
    finally:
        await client.close()


async def test_event_type_cannot_inject_a_header(real_store):
    """An event type carrying CR LF and a header line is refused with 400 and not stored; a
    delivered event's request carries only hookline's own headers."""
    seen: list[dict[str, str]] = []

    async def receive(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(status=204)

    receiver_app = web.Application()
    receiver_app.router.add_post("/hook", receive)
    client = await client_for(real_store, Config(ingest_token=TOKEN))
    try:
        injected = (b'{"id": "e1", "type": "push\\r\\nX-Injected: 1", "data": {}}')
        async with client.post("/v1/events", data=injected,
                               headers={"Content-Type": "application/json", **AUTH}) as resp:
            assert (resp.status, (await resp.json())["field"]) == (400, "type")
        assert (await real_store.stats()).events == 0
    finally:
        await client.close()
    async with TestServer(receiver_app, host="127.0.0.1") as server, Sender(
            timeout_s=2.0, policy=AddressPolicy.parse("127.0.0.0/8")) as sender:
        result = await sender.send(claim_for(str(server.make_url("/hook"))))
    assert result.status_code == 204
    names = {name.lower() for name in seen[0]}
    assert "x-injected" not in names
    assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= names


async def test_custom_headers_are_checked_and_cannot_inject(real_store):
    """The admin API refuses custom headers that could inject (CR LF in a value, a name that
    is not a token, a reserved name) with 400 and stores nothing; a valid one reaches the
    receiver exactly once, redacted in the API, and no injected header ever arrives."""
    seen: list[list[tuple[str, str]]] = []

    async def receive(request: web.Request) -> web.Response:
        seen.append(list(request.headers.items()))
        return web.Response(status=204)

    receiver_app = web.Application()
    receiver_app.router.add_post("/hook", receive)
    async with TestServer(receiver_app, host="127.0.0.1") as receiver:
        url = str(receiver.make_url("/hook"))
        client = await client_for(real_store, Config(admin_token=TOKEN, ingest_token=TOKEN,
                                                     allow_networks="127.0.0.0/8"))
        try:
            for bad in ({"X-A": "1\r\nX-Injected: 1"}, {"X-A\r\nX-Injected": "1"},
                        {"X A": "1"}, {"webhook-id": "msg_forged"}):
                async with client.post("/v1/admin/destinations", headers=AUTH, json={
                        "name": "d", "url": url, "headers": bad}) as resp:
                    assert (resp.status, (await resp.json())["error"]) == (
                        400, "invalid_request"), bad
            assert await real_store.list_destinations() == []
            async with client.post("/v1/admin/destinations", headers=AUTH, json={
                    "name": "d", "url": url, "headers": {"X-Api-Key": "k-123"}}) as resp:
                created = await resp.json()
            assert resp.status == 201 and created["headers"] == {"X-Api-Key": "***"}
            async with client.patch("/v1/admin/destinations/d", headers=AUTH, json={
                    "headers": {"X-Api-Key": "k\nX-Injected: 1"}}) as resp:
                assert resp.status == 400
            async with client.post("/v1/events", headers={**AUTH, "Content-Type":
                                                           "application/json"},
                                   data=b'{"id": "e1", "type": "t", "data": {}}') as resp:
                assert resp.status == 202
        finally:
            await client.close()
        [claim] = await real_store.claim("w", 1, lease_s=30, max_attempts=3)
        async with Sender(timeout_s=2.0, policy=AddressPolicy.parse("127.0.0.0/8")) as sender:
            result = await sender.send(claim)
    assert result.status_code == 204
    [request_headers] = seen
    names = [name.lower() for name, _ in request_headers]
    assert ("X-Api-Key", "k-123") in request_headers and names.count("x-api-key") == 1
    assert "x-injected" not in names and names.count("webhook-id") == 1


# -- secrets and files ---------------------------------------------------------------------


def test_config_show_hides_the_database_password(tmp_path):
    """`hookline config show` (text and --json) prints a PostgreSQL URL's password as `***`,
    in its user info and in a `password=` parameter; the rest of the URL stays readable."""
    env = {**os.environ, "HOOKLINE_DB":
           "postgresql://hookline:pw-in-userinfo@127.0.0.1:1/hookline?password=pw-in-query"}
    for flags in ([], ["--json"]):
        shown = subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", "config",
                                "show", *flags], env=env, cwd=tmp_path, capture_output=True,
                               text=True, timeout=60, check=True).stdout
        assert "pw-in-" not in shown
        assert "postgresql://hookline:***@127.0.0.1:1/hookline?password=***" in shown
    # The user info ends at its last @ (as the driver reads it); a key's passphrase too.
    assert redact_url("postgresql://u:p@ss@h/db?sslpassword=k&x=1") == (
        "postgresql://u:***@h/db?sslpassword=***&x=1")
    assert redact_url("postgresql://:secret@h/db") == "postgresql://:***@h/db"
    # a user name holding `@` (the user info ends at the last `@`, as the drivers read it)
    assert redact_url("postgresql://a@b:secret@h/db") == "postgresql://a@b:***@h/db"
    with pytest.raises(ConfigError) as unsupported:
        Config(db="mysql://u:secret@h/db")
    assert "secret" not in str(unsupported.value)


def test_tokens_from_files_and_systemd_credentials(tmp_path):
    """A token comes from `<name>_file` or $CREDENTIALS_DIRECTORY/<name> (whitespace stripped),
    a direct setting wins, an empty or unreadable file is a ConfigError, and the redacted
    view never shows a token."""
    (tmp_path / "admin").write_text("from-file\n")
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "ingest_token").write_text("  from-credentials\n")
    config = Config.load(env={"HOOKLINE_ADMIN_TOKEN_FILE": str(tmp_path / "admin"),
                              "CREDENTIALS_DIRECTORY": str(creds)})
    assert (config.admin_token, config.ingest_token) == ("from-file", "from-credentials")
    assert Config.load(env={"CREDENTIALS_DIRECTORY": str(creds)},
                       flags={"ingest_token": "direct"}).ingest_token == "direct"
    assert "from-file" not in str(config.redacted()) and "from-credentials" not in str(
        config.redacted())
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        Config.load(env={"HOOKLINE_INGEST_TOKEN_FILE": str(tmp_path / "empty")})
    with pytest.raises(ConfigError, match="cannot read admin_token"):
        Config.load(env={"HOOKLINE_ADMIN_TOKEN_FILE": str(tmp_path / "missing")})


async def test_database_is_private_and_world_writable_folder_refused(tmp_path):
    """The database and its -wal file are created 0600; a database in a world-writable folder
    is refused with a message saying how to fix it, and no file is created there."""
    async with SqliteStore(str(tmp_path / "private.db")) as store:
        await store.add_destination(name="d", url="https://example.com/", secret=generate_secret(),
                                    event_types=["*"], max_in_flight=1)
        for name in ("private.db", "private.db-wal"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    shared_dir = tmp_path / "shared"
    shared_dir.mkdir()
    shared_dir.chmod(0o777)
    with pytest.raises(StorageRefused, match="world-writable"):
        await SqliteStore(str(shared_dir / "x.db")).open()
    assert list(shared_dir.iterdir()) == []


async def test_unencodable_host_names_are_400_and_never_crash_a_send(real_store):
    """Hosts IDNA cannot encode (`a..b`, a 64-character label) are refused at creation with
    400 destination_blocked, not 500; a stored one fails its attempt instead of raising."""
    client = await client_for(real_store, Config(admin_token=TOKEN))
    try:
        for url in ("http://a..b/", f"http://{'x' * 64}.example/"):
            async with client.post("/v1/admin/destinations", headers=AUTH,
                                   json={"name": "d", "url": url}) as resp:
                assert (resp.status, (await resp.json())["error"]) == (
                    400, "destination_blocked"), url
    finally:
        await client.close()
    async with Sender(timeout_s=2.0) as sender:
        result = await sender.send(claim_for("http://a..b/hook"))
    assert result.status_code is None and result.error

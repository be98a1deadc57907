"""hookline names itself with its version: `Server: hookline/X.Y.Z` on every ingest answer
(the API's JSON errors included) and `User-Agent: hookline/X.Y.Z ...` on every delivery."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.models import Claim
from hookline.shared.policy.netguard import AddressPolicy
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.version import PRODUCT, VERSION
from hookline.workers.sender import Sender

VERSION_FILE = (Path(__file__).resolve().parents[2] / "shared" / "client" / "hookline_client"
                / "_version.py")


def test_version_is_the_project_version():
    """The one version (written in hookline_client/_version.py, read by both builds)."""
    written = VERSION_FILE.read_text()
    assert f'__version__ = "{VERSION}"' in written
    assert f"hookline/{VERSION}" == PRODUCT


async def test_ingest_answers_carry_the_server_header(tmp_path: Path):
    async with SqliteStore(str(tmp_path / "h.db")) as store, TestClient(TestServer(
            build_app(store, Config(ingest_token="i")), host="127.0.0.1")) as client:
        for method, path, status in (("GET", "/healthz", 200), ("GET", "/nope", 404),
                                     ("POST", "/v1/events", 401)):
            async with client.request(method, path) as resp:
                assert resp.status == status
                assert resp.headers["Server"] == PRODUCT, (path, resp.headers)


async def test_deliveries_carry_the_user_agent():
    seen: list[str] = []

    async def hook(request: web.Request) -> web.Response:
        seen.append(request.headers["User-Agent"])
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    async with TestServer(app, host="127.0.0.1") as server, Sender(
            timeout_s=5.0, policy=AddressPolicy.parse("127.0.0.0/8")) as sender:
        claim = Claim(job_id=1, event_id=1, message_id="msg_ua", event_type="t",
                      destination_id=1, destination_name="d", url=str(server.make_url("/hook")),
                      secret=generate_secret(), body=b"{}", attempt=1, lease_token="tok",
                      lease_owner="test", lease_until=0.0)
        result = await sender.send(claim)
    assert result.status_code == 204
    assert seen == [f"{PRODUCT} (+webhook delivery)"]

"""A destination URL's password is a credential: the CLI's confirmations and listings show it
as `***` (the user name kept; a query-string token is left as it is, OPERATIONS.md), while
the store keeps the URL whole and the sender still sends it as basic auth (the real Sender to
a real aiohttp server on 127.0.0.1, as test_sender_cookies.py)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

from aiohttp import web

from hookline.shared.db_url import redact_url
from hookline.shared.models import Claim
from hookline.shared.policy.netguard import AddressPolicy
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from hookline.workers.sender import Sender
from tests.conftest import cli_stdout, serving

URL = "https://bob:pw-s3cr3t@example.com/hook?token=q-s3cr3t"
SHOWN = "https://bob:***@example.com/hook?token=q-s3cr3t"


async def _stored_url(db: Path, name: str) -> str:
    async with SqliteStore(str(db)) as store:
        return (await store.get_destination(name)).url


def test_cli_shows_a_url_password_as_stars_and_stores_it_whole(tmp_path: Path):
    db = ("--db", str(tmp_path / "h.db"))
    cli_stdout(*db, "init")
    said = {"add": cli_stdout(*db, "destinations", "add", "creds", URL),
            "list": cli_stdout(*db, "destinations", "list"),
            "show": cli_stdout(*db, "destinations", "show", "creds")}
    for command, text in said.items():
        assert "pw-s3cr3t" not in text, (command, text)
        assert SHOWN in text, (command, text)
    assert asyncio.run(_stored_url(tmp_path / "h.db", "creds")) == URL


def test_shown_url_hides_only_the_password():
    assert redact_url(URL) == SHOWN
    assert redact_url("https://example.com/a@b?x=1") == "https://example.com/a@b?x=1"
    assert redact_url("https://bob@example.com/") == "https://bob@example.com/"
    assert redact_url("http://u:p@ss@[::1]:8080/p#f") == "http://u:***@[::1]:8080/p#f"


async def test_the_sender_still_sends_the_password_as_basic_auth():
    seen: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", answer)
    async with serving(app) as port, Sender(
            timeout_s=5, policy=AddressPolicy.parse("127.0.0.0/8")) as sender:
        claim = Claim(job_id=1, event_id=1, message_id=f"msg_{1:026d}", event_type="t",
                      destination_id=1, destination_name="creds",
                      url=f"http://bob:pw-s3cr3t@127.0.0.1:{port}/hook",
                      secret=generate_secret(), body=b"{}", attempt=1, lease_token="lease-1",
                      lease_owner="w", lease_until=0.0)
        result = await sender.send(claim)
    assert result.status_code == 204, result
    assert seen == ["Basic " + base64.b64encode(b"bob:pw-s3cr3t").decode()]

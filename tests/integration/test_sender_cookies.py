"""The sender asks nothing of receivers beyond the delivery, through the real Sender to a
real aiohttp server on 127.0.0.1 reached by a host name (aiohttp's cookie jar ignores
cookies from numeric hosts): it keeps no cookies, so a receiver that sets one (a load
balancer's sticky cookie) never gets it back, nor does another destination on the same
host; and it offers no compression, since the answer's excerpt is stored as received."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from hookline.shared.models import Claim
from hookline.shared.policy.netguard import AddressPolicy
from hookline.shared.signing import generate_secret
from hookline.workers.sender import Sender
from tests.conftest import serving

HOST = "receiver.hookline.test"


class _LocalResolver(AbstractResolver):
    """Resolves every name to 127.0.0.1."""

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        return [ResolveResult(hostname=host, host="127.0.0.1", port=port,
                              family=socket.AF_INET, proto=0, flags=socket.AI_NUMERICHOST)]

    async def close(self) -> None:
        pass


def _claim(url: str, n: int) -> Claim:
    return Claim(job_id=n, event_id=n, message_id=f"msg_{n:026d}", event_type="t",
                 destination_id=1, destination_name="d", url=url, secret=generate_secret(),
                 body=b"{}", attempt=1, lease_token=f"lease-{n}", lease_owner="w",
                 lease_until=0.0)


@contextlib.asynccontextmanager
async def _sender_to(answer: Callable[[web.Request], Awaitable[web.Response]]
                     ) -> AsyncIterator[tuple[Sender, str]]:
    """A real aiohttp server answering POST /{name} with `answer`, and a Sender to it; yields
    (the sender, the server's base URL by host name)."""
    app = web.Application()
    app.router.add_post("/{name}", answer)
    async with serving(app) as port, Sender(
            timeout_s=5, policy=AddressPolicy.parse("127.0.0.0/8"),
            resolver=_LocalResolver()) as sender:
        yield sender, f"http://{HOST}:{port}"


async def test_a_cookie_set_by_a_receiver_is_never_sent_back():
    seen: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        response = web.Response(status=204)
        response.set_cookie("AWSALB", "sticky", path="/")
        return response

    async with _sender_to(answer) as (sender, base):
        for n, name in enumerate(["a", "a", "b"]):
            result = await sender.send(_claim(f"{base}/{name}", n))
            assert result.status_code == 204, result
            assert "AWSALB=sticky" in (result.response_headers or "")
    assert seen == [None, None, None]


async def test_a_receiver_is_not_asked_to_compress_its_answer():
    """The answer is stored as an excerpt without decompressing it: a receiver offered gzip
    (aiohttp's default Accept-Encoding) would compress it into unreadable bytes. Each
    request asks for `identity` (an absent Accept-Encoding would allow any coding)."""
    offered: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        offered.append(",".join(request.headers.getall("Accept-Encoding", ["(none)"])))
        response = web.Response(status=200, text="received " * 40)
        if "gzip" in (request.headers.get("Accept-Encoding") or ""):
            response.enable_compression()
        return response

    async with _sender_to(answer) as (sender, base):
        result = await sender.send(_claim(f"{base}/a", 1))
        # A destination's own Accept-Encoding (any case) is sent instead, once.
        custom = replace(_claim(f"{base}/a", 2), headers=(("accept-encoding", "br"),))
        assert (await sender.send(custom)).status_code == 200
    assert offered == ["identity", "br"]
    assert result.status_code == 200, result
    assert (result.response_excerpt or "").startswith("received received")

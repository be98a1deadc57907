"""The bench's load generator (rehearsal/loadgen.py) against a real aiohttp server on 127.0.0.1:
every event posted once with its headers, statuses counted, a closed connection reopened, and
a refused connection counted as an error instead of ending the run."""

from __future__ import annotations

import json
import socket

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from hookline.rehearsal import loadgen


async def test_every_event_is_posted_once_and_each_answer_is_counted(monkeypatch):
    """Each of 40 events arrives once, whole, with the token; every fifth is answered 503 with
    `Connection: close` (the generator reopens), a few 204 without a body (read as none),
    and only 2xx answers get an accept time."""
    monkeypatch.setenv("HOOKLINE_INGEST_TOKEN", "tok-1")
    seen: list[dict[str, object]] = []

    async def events(request: web.Request) -> web.Response:
        assert request.headers["authorization"] == "Bearer tok-1"
        assert request.headers["content-type"] == "application/json"
        body = await request.json()
        seen.append(body)
        index = int(str(body["id"]).rsplit("-", 1)[1])
        if index % 5 == 0:
            return web.json_response({"error": "busy"}, status=503,
                                     headers={"Connection": "close"})
        if index % 7 == 3:
            return web.Response(status=204)  # no body and no Content-Length
        return web.json_response({"accepted": True}, status=202)

    app = web.Application()
    app.router.add_post("/v1/events", events)
    async with TestServer(app, host="127.0.0.1") as server:
        accepted_at: list[float | None] = []
        figures = await loadgen.run(str(server.make_url("/v1/events")), 40, concurrency=4,
                                    rate_per_s=None, body_bytes=600, run_id="r1",
                                    accepted_at=accepted_at, tenant="acme")
    assert sorted(str(body["id"]) for body in seen) == sorted(f"bench-r1-{i}" for i in range(40))
    assert all(body["tenant"] == "acme" for body in seen)
    assert figures["statuses"] == {"202": 27, "204": 5, "503": 8}
    assert [at is None for at in accepted_at] == [i % 5 == 0 for i in range(40)]
    assert isinstance(figures["generator_cpu_s"], float)
    assert json.loads(json.dumps(figures)) == figures  # printed as one JSON line


async def test_a_refused_connection_is_counted_and_the_run_goes_on():
    """Nothing listens on the port: every post fails as a connection error, none is lost
    from the counts, and run returns."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    figures = await loadgen.run(f"http://127.0.0.1:{port}/v1/events", 6, concurrency=2,
                                rate_per_s=None, body_bytes=200)
    assert figures["statuses"] == {"ConnectionRefusedError": 6}


async def test_a_url_it_cannot_post_to_as_given_is_refused():
    """https, a query or credentials would be dropped or sent in the clear: refused."""
    for url in ("https://127.0.0.1:9/v1/events", "http://127.0.0.1:9/v1/events?x=1",
                "http://u:p@127.0.0.1:9/v1/events"):
        with pytest.raises(ValueError, match="plain http"):
            await loadgen.run(url, 1, concurrency=1, rate_per_s=None, body_bytes=10)

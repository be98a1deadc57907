"""The publishing clients (sync and asyncio) against a small real aiohttp server on
127.0.0.1 that answers from a script: 429 with Retry-After in both forms, 5xx, hangs and
refusals; every retry carries the same id, refusals raise typed errors with the server's
reason, and the deadline bounds it all."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import pytest
from aiohttp import web
from hookline_client import (
    AsyncHooklineClient,
    HooklineClient,
    HooklineRejected,
    HooklineUnavailable,
    SendResult,
)

TOKEN = "client-test-token"
ACCEPTED = (202, {}, {"event_id": 7, "message_id": "msg_a", "jobs": 1})
DUPLICATE = (200, {}, {"event_id": 7, "message_id": "msg_a", "jobs": 0, "duplicate": True})


@dataclass
class Seen:
    """One request as the scripted server received it."""

    at: float
    event: dict[str, Any]
    authorization: str
    peer: Any


@dataclass
class Script:
    """Answers to give, in order (the last repeats); what was received."""

    answers: list[Any] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(Seen(time.monotonic(), json.loads(await request.read()),
                              request.headers.get("Authorization", ""),
                              request.transport.get_extra_info("peername")
                              if request.transport else None))
        answer = self.answers[min(len(self.seen), len(self.answers)) - 1]
        if callable(answer):
            return await answer()  # type: ignore[no-any-return]
        status, headers, body = answer
        if isinstance(body, bytes):
            return web.Response(status=status, headers=headers, body=body)
        return web.json_response(body, status=status, headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Script]]:
    script = Script()
    app = web.Application()
    app.router.add_post("/v1/events", script.handle)
    runner = web.AppRunner(app, keepalive_timeout=60)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", script
    finally:
        await runner.cleanup()


Sender = Callable[..., Awaitable[SendResult]]


def sync_sender(url: str, **options: Any) -> tuple[Sender, Callable[[], Awaitable[None]]]:
    client = HooklineClient(url, TOKEN, **options)

    async def send(*args: Any, **kwargs: Any) -> SendResult:
        return await asyncio.to_thread(client.send, *args, **kwargs)

    async def close() -> None:
        client.close()
    return send, close


def async_sender(url: str, **options: Any) -> tuple[Sender, Callable[[], Awaitable[None]]]:
    client = AsyncHooklineClient(url, TOKEN, **options)
    return client.send, client.close


@pytest.fixture(params=["sync", "async"])
def make_client(request: pytest.FixtureRequest) -> Callable[..., Any]:
    return sync_sender if request.param == "sync" else async_sender


# Each Retry-After form with one client (the waiting is shared; each reads the header itself)
async def test_429_retry_after_seconds_is_honoured_with_the_same_id(server):
    url, script = server
    script.answers = [(429, {"Retry-After": "1"}, {"error": "rate_limited", "detail": "slow"}),
                      ACCEPTED]
    send, close = async_sender(url, backoff_base_s=0.01)
    try:
        result = await send("invoice.paid", {"amount": 42}, id="inv-1")
    finally:
        await close()
    assert (result.outcome, result.id, result.event_id, result.message_id, result.attempts) == (
        "accepted", "inv-1", 7, "msg_a", 2)
    first, second = script.seen
    assert first.event == second.event == {"id": "inv-1", "type": "invoice.paid",
                                           "data": {"amount": 42}}
    assert first.authorization == f"Bearer {TOKEN}"
    assert second.at - first.at >= 0.95  # waited as told, not the 10 ms backoff


async def test_429_retry_after_http_date_is_honoured(server):
    url, script = server
    # An HTTP-date has whole seconds: three seconds ahead is between 2 and 3 s from now
    # (the first request's own delay comes off that, so the wait is well above 1 s).
    retry_at = formatdate(time.time() + 3, usegmt=True)
    script.answers = [(429, {"Retry-After": retry_at}, {"error": "rate_limited"}), ACCEPTED]
    send, close = sync_sender(url, backoff_base_s=0.01)
    try:
        result = await send("invoice.paid", None)
    finally:
        await close()
    assert result.accepted and result.attempts == 2
    first, second = script.seen
    assert second.at - first.at >= 0.95
    # a generated id, the same on the retry
    assert first.event["id"] == second.event["id"] == result.id
    assert result.id.startswith("evt_")


async def test_5xx_and_a_lost_answer_are_retried_and_duplicate_is_success(server, make_client):
    url, script = server

    async def hang() -> web.Response:
        await asyncio.sleep(0.8)  # longer than the attempt timeout: the client gives up on it
        return web.json_response(ACCEPTED[2], status=202)

    script.answers = [(503, {"Retry-After": "0"}, {"error": "store_busy"}),
                      (502, {}, b"<html>bad gateway</html>"), (504, {}, b""), hang, DUPLICATE]
    send, close = make_client(url, backoff_base_s=0.01, attempt_timeout_s=0.3)
    try:
        result = await send("t", [1, 2], id="same-1", source="billing")
    finally:
        await close()
    assert result.duplicate and not result.accepted and result.attempts == 5
    assert {json.dumps(s.event) for s in script.seen} == {
        '{"id": "same-1", "type": "t", "data": [1, 2], "source": "billing"}'}


async def test_400_raises_the_typed_error_with_the_servers_reason(server, make_client):
    url, script = server
    script.answers = [(400, {}, {"error": "invalid_event", "field": "type",
                                 "detail": "must match [A-Za-z0-9_.:-]{1,128}"})]
    send, close = make_client(url)
    try:
        with pytest.raises(HooklineRejected) as caught:
            await send("bad type", {})
    finally:
        await close()
    error = caught.value
    assert (error.status, error.code, error.field) == (400, "invalid_event", "type")
    assert error.message == "must match [A-Za-z0-9_.:-]{1,128}"
    assert "400 invalid_event (type)" in str(error)
    assert len(script.seen) == 1  # never retried


def test_the_rejection_names_the_field_once():
    """hookline's detail repeats the field ("type: must match ..."); the message says it once,
    while `message` keeps the server's detail whole."""
    error = HooklineRejected(400, "invalid_event", "type: must match [A-Za-z0-9_.:-]{1,128}",
                             "type")
    assert str(error) == ("hookline refused the event: 400 invalid_event (type): "
                          "must match [A-Za-z0-9_.:-]{1,128}")
    assert error.message == "type: must match [A-Za-z0-9_.:-]{1,128}"


@pytest.mark.parametrize(("answer", "code"), [
    ((401, {}, {"error": "unauthorized", "detail": "requires a valid Bearer token"}),
     "unauthorized"),
    ((404, {}, b"404: Not Found"), "http_404"),
    ((200, {}, b"<html>a login page</html>"), "not_hookline"),
    ((307, {"Location": "https://elsewhere/v1/events"}, b""), "http_307"),
])
async def test_other_refusals_are_typed_and_not_retried(server, answer, code):
    url, script = server
    script.answers = [answer]
    send, close = async_sender(url)
    try:
        with pytest.raises(HooklineRejected) as caught:
            await send("t", {})
    finally:
        await close()
    assert caught.value.code == code and caught.value.status == answer[0]
    assert len(script.seen) == 1


async def test_past_the_deadline_it_is_unavailable(server, make_client):
    url, script = server
    script.answers = [(503, {}, {"error": "store_unavailable", "detail": "retry shortly"})]
    send, close = make_client(url, deadline_s=1.0, backoff_base_s=0.05, backoff_cap_s=0.1)
    started = time.monotonic()
    try:
        with pytest.raises(HooklineUnavailable) as caught:
            await send("t", {}, id="late-1")
    finally:
        await close()
    assert time.monotonic() - started < 2.0  # gave up at the deadline, not after
    error = caught.value
    assert error.event_id == "late-1" and len(script.seen) >= 3
    if "no answer" in error.last_error:
        # The last attempt ran into the deadline (a slow machine): counted, maybe never seen.
        assert error.attempts - len(script.seen) in (0, 1)
    else:
        assert error.attempts == len(script.seen)
        assert "503 store_unavailable: retry shortly" in error.last_error


async def test_a_retry_after_beyond_the_deadline_gives_up_at_once(server):
    url, script = server
    script.answers = [(429, {"Retry-After": "120"}, {"error": "rate_limited"})]
    send, close = async_sender(url, deadline_s=5.0)
    started = time.monotonic()
    try:
        with pytest.raises(HooklineUnavailable, match="after 120 s"):
            await send("t", {})
    finally:
        await close()
    assert time.monotonic() - started < 4 and len(script.seen) == 1


async def test_connection_refused_is_retried_until_the_deadline(make_client):
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    send, close = make_client(f"http://127.0.0.1:{port}", deadline_s=1.5, backoff_base_s=0.05)
    try:
        with pytest.raises(HooklineUnavailable) as caught:
            await send("t", {})
    finally:
        await close()
    assert caught.value.attempts >= 2 and "no answer" in caught.value.last_error


async def test_one_connection_is_kept_alive_across_sends(server, make_client):
    url, script = server
    script.answers = [ACCEPTED]
    send, close = make_client(url)
    try:
        for n in range(3):
            assert (await send("t", n)).attempts == 1
    finally:
        await close()
    assert len({s.peer for s in script.seen}) == 1  # same client port: one connection


async def test_a_connection_the_server_closed_while_idle_is_reopened_transparently():
    script = Script(answers=[ACCEPTED])
    app = web.Application()
    app.router.add_post("/v1/events", script.handle)
    runner = web.AppRunner(app, keepalive_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    client = HooklineClient(f"http://127.0.0.1:{runner.addresses[0][1]}", TOKEN)
    try:
        assert (await asyncio.to_thread(client.send, "t", 1)).attempts == 1
        await asyncio.sleep(0.4)  # the server closes the idle connection meanwhile
        assert (await asyncio.to_thread(client.send, "t", 2)).attempts == 1
    finally:
        client.close()
        await runner.cleanup()
    assert len({s.peer for s in script.seen}) == 2


@pytest.mark.parametrize("url", ["ftp://host", "http://", "http://h:port", "http://h/?q=1"])
def test_a_malformed_url_or_token_is_refused_at_construction(url: str) -> None:
    with pytest.raises(ValueError, match="base_url"):
        HooklineClient(url, TOKEN)
    with pytest.raises(ValueError, match="token"):
        AsyncHooklineClient("http://127.0.0.1:1", "")
    with pytest.raises(ValueError, match="deadline_s"):
        HooklineClient("http://127.0.0.1:1", TOKEN, deadline_s=0)


def test_the_url_keeps_a_path_prefix() -> None:
    assert HooklineClient("https://h.example/hooks/", TOKEN).url == (
        "https://h.example/hooks/v1/events")

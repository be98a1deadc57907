"""The local receiver fixture: real sockets on 127.0.0.1, a real aiohttp client, signed requests."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from standardwebhooks.webhooks import Webhook

from hookline.rehearsal.receiver import (
    Behaviour,
    Endpoint,
    Receiver,
    decide,
    parse_behaviour,
    parse_endpoint,
)
from hookline.shared.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
EndpointFactory = Callable[..., Endpoint]
PAYLOAD = '{"type":"invoice.paid","data":{"id":"inv_1","amount":1200}}'


def new_secret() -> str:
    """A fresh `whsec_` secret with 24 random bytes."""
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def signed_headers(secret: str, msg_id: str, payload: str = PAYLOAD,
                   age_s: float = 0.0) -> dict[str, str]:
    """Standard Webhooks headers for `payload`, signed `age_s` seconds ago with `secret`."""
    now = datetime.fromtimestamp(time.time() - age_s, tz=UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, now, payload),
        "content-type": "application/json",
    }


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session closed after the test."""
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.fixture
def endpoint_factory() -> EndpointFactory:
    """Build an endpoint with a fresh secret from a behaviour spec."""

    def build(name: str, spec: str = "ok") -> Endpoint:
        return Endpoint(name, new_secret(), parse_behaviour(spec))

    return build


async def post(session: aiohttp.ClientSession, receiver: Receiver, endpoint: Endpoint,
               msg_id: str, **kwargs: object) -> aiohttp.ClientResponse:
    """POST the signed sample payload to `endpoint` and read the whole answer."""
    async with session.post(receiver.url(endpoint.name), data=PAYLOAD.encode(),
                            headers=signed_headers(endpoint.secret, msg_id),
                            **kwargs) as response:  # type: ignore[arg-type]
        await response.read()
        return response


async def test_valid_signature_answers_200_and_records_one_effect(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """A correctly signed request gets 200 and exactly one effect with the body's digest."""
    ep = endpoint_factory("a")
    async with Receiver([ep]) as receiver:
        response = await post(session, receiver, ep, "msg_1")
        assert response.status == 200
        assert await response.json() == {"ok": True, "duplicate": False}
        [effect] = receiver.effects
        assert (effect.endpoint, effect.webhook_id, effect.body_bytes) == ("a", "msg_1",
                                                                          len(PAYLOAD))
        [record] = receiver.requests
        assert record.verified and record.status == 200 and not record.duplicate
        assert abs(record.received_at - time.time()) < 5


async def test_bad_or_missing_signature_answers_401_json_and_has_no_effect(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """A wrong secret or missing headers get 401 `signature_invalid`, recorded unverified."""
    ep = endpoint_factory("a")
    async with Receiver([ep]) as receiver:
        wrong = signed_headers(new_secret(), "msg_1")
        async with session.post(receiver.url("a"), data=PAYLOAD, headers=wrong) as response:
            assert response.status == 401
            body = await response.json()
            assert body["error"] == "signature_invalid" and body["detail"]
        async with session.post(receiver.url("a"), data=PAYLOAD) as response:
            assert response.status == 401
        garbled = {**signed_headers(ep.secret, "msg_2"), "webhook-signature": "nonsense"}
        async with session.post(receiver.url("a"), data=PAYLOAD, headers=garbled) as response:
            assert response.status == 401
        assert receiver.effects == []
        assert [(r.verified, r.status) for r in receiver.requests] == [(False, 401)] * 3
        assert receiver.requests[1].webhook_id is None


async def test_a_timestamp_tolerance_admits_an_old_signature_but_not_a_wrong_one(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """A request signed an hour ago is refused by default (the standard's 5 minutes) and
    accepted with a 3 h tolerance; there a wrong secret or an older stamp is still refused."""
    ep = endpoint_factory("a")
    hour_old = signed_headers(ep.secret, "msg_1", age_s=3600)
    wrong_secret = signed_headers(new_secret(), "msg_2", age_s=3600)
    too_old = signed_headers(ep.secret, "msg_3", age_s=4 * 3600)
    async with Receiver([ep]) as strict:
        response = await session.post(strict.url("a"), data=PAYLOAD, headers=hour_old)
        assert response.status == 401
        response.release()
    async with Receiver([ep], timestamp_tolerance_s=3 * 3600) as tolerant:
        statuses = []
        for headers in (hour_old, wrong_secret, too_old):
            async with session.post(tolerant.url("a"), data=PAYLOAD, headers=headers) as response:
                statuses.append(response.status)
        assert statuses == [200, 401, 401]
        assert [e.webhook_id for e in tolerant.effects] == ["msg_1"]


async def test_same_webhook_id_twice_records_one_effect_and_one_duplicate(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """Business effects are deduplicated by webhook-id; the repeat is counted as a duplicate."""
    ep = endpoint_factory("a")
    async with Receiver([ep]) as receiver:
        first = await post(session, receiver, ep, "msg_1")
        second = await post(session, receiver, ep, "msg_1")
        assert (first.status, second.status) == (200, 200)
        assert len(receiver.effects) == 1
        assert [r.duplicate for r in receiver.requests] == [False, True]
        assert receiver.summary()["endpoints"]["a"]["duplicates"] == 1


async def test_fail_n_answers_500_n_times_per_webhook_id_then_200(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """`fail:2` answers 500, 500, then 200 with the effect, counting per webhook-id."""
    ep = endpoint_factory("d", "fail:2")
    async with Receiver([ep]) as receiver:
        statuses = [(await post(session, receiver, ep, "msg_1")).status for _ in range(3)]
        assert statuses == [500, 500, 200]
        assert (await post(session, receiver, ep, "msg_2")).status == 500
        assert [e.webhook_id for e in receiver.effects] == ["msg_1"]
        assert receiver.summary()["endpoints"]["d"]["statuses"] == {"500": 3, "200": 1}


async def test_retry_after_answers_429_with_header_then_200(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """`retry_after:7` answers 429 with `Retry-After: 7` once per webhook-id, then 200."""
    ep = endpoint_factory("r", "retry_after:7")
    async with Receiver([ep]) as receiver:
        first = await post(session, receiver, ep, "msg_1")
        assert first.status == 429 and first.headers["Retry-After"] == "7"
        assert receiver.effects == []
        assert (await post(session, receiver, ep, "msg_1")).status == 200
        assert len(receiver.effects) == 1


@pytest.mark.parametrize(("spec", "status"), [("gone", 410), ("always:500", 500),
                                              ("status:503", 503),
                                              ("redirect:http://127.0.0.1:9/x", 302)])
async def test_error_behaviours_answer_their_status_and_record_no_effect(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory, spec: str,
        status: int) -> None:
    """gone, status:CODE and redirect answer their code (redirect with Location), no effect."""
    ep = endpoint_factory("e", spec)
    async with Receiver([ep]) as receiver:
        response = await post(session, receiver, ep, "msg_1", allow_redirects=False)
        assert response.status == status
        if status == 302:
            assert response.headers["Location"] == "http://127.0.0.1:9/x"
        assert receiver.effects == []


async def test_drop_first_closes_without_response_then_answers_200_as_duplicate(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory,
        caplog: pytest.LogCaptureFixture) -> None:
    """`drop_first` records the effect, closes the connection silently, then answers 200."""
    ep = endpoint_factory("c", "drop_first")
    caplog.set_level(logging.INFO)
    async with Receiver([ep]) as receiver:
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await post(session, receiver, ep, "msg_1")
        assert len(receiver.effects) == 1
        assert receiver.requests[0].status == "dropped"
        second = await post(session, receiver, ep, "msg_1")
        assert second.status == 200 and await second.json() == {"ok": True, "duplicate": True}
        assert len(receiver.effects) == 1
        assert [r.duplicate for r in receiver.requests] == [False, True]
    noisy = [r for r in caplog.records
             if r.name.startswith("aiohttp") and r.levelno >= logging.INFO]
    assert noisy == []


async def test_concurrency_gauge_sees_two_overlapping_and_one_sequential(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """Two overlapping `slow` requests raise the gauge to 2; sequential ones keep it at 1."""
    overlapped, sequential = endpoint_factory("p", "slow:0.3"), endpoint_factory("q", "slow:0.1")
    async with Receiver([overlapped, sequential]) as receiver:
        responses = await asyncio.gather(post(session, receiver, overlapped, "msg_1"),
                                         post(session, receiver, overlapped, "msg_2"))
        assert [r.status for r in responses] == [200, 200]
        for msg_id in ("msg_3", "msg_4"):
            assert (await post(session, receiver, sequential, msg_id)).status == 200
        assert receiver.max_concurrent("p") == 2
        assert receiver.max_concurrent("q") == 1
        assert receiver.in_flight("p") == receiver.in_flight("q") == 0


async def test_hang_never_answers_and_stop_releases_it(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """`hang` does not answer within a client timeout; stopping the receiver returns quickly."""
    ep = endpoint_factory("h", "hang")
    receiver = Receiver([ep])
    await receiver.start()
    try:
        with pytest.raises(TimeoutError):
            await post(session, receiver, ep, "msg_1", timeout=aiohttp.ClientTimeout(total=0.3))
        assert receiver.effects == [] and receiver.requests[0].status == "hung"
    finally:
        started = time.monotonic()
        await receiver.stop()
    assert time.monotonic() - started < 1.0


async def test_trickle_sends_headers_then_the_body_slowly(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """`trickle:0.02` answers 200 at once and delivers the body one byte per 0.02 s."""
    ep = endpoint_factory("t", "trickle:0.02")
    async with Receiver([ep]) as receiver:
        started = time.monotonic()
        async with session.post(receiver.url("t"), data=PAYLOAD,
                                headers=signed_headers(ep.secret, "msg_1")) as response:
            assert response.status == 200
            body = await response.read()
        assert json.loads(body) == {"ok": True}
        assert time.monotonic() - started >= 0.02 * len(body) * 0.8
        assert len(receiver.effects) == 1


async def test_summary_receipts_and_requests_log(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory,
        tmp_path: Path) -> None:
    """GET /_summary and /_receipts report counts and records; the log file gets JSON lines."""
    ok, gone = endpoint_factory("a"), endpoint_factory("g", "gone")
    log_path = tmp_path / "requests.jsonl"
    async with Receiver([ok, gone], requests_log=log_path) as receiver:
        await post(session, receiver, ok, "msg_1")
        await post(session, receiver, ok, "msg_1")
        await post(session, receiver, gone, "msg_2")
        async with session.post(receiver.url("nobody"), data=PAYLOAD) as response:
            assert response.status == 404
        async with session.get(f"http://127.0.0.1:{receiver.port}/_summary") as response:
            summary = await response.json()
        async with session.get(f"http://127.0.0.1:{receiver.port}/_receipts") as response:
            receipts = await response.json()
    assert summary["endpoints"]["a"] == {"behaviour": "ok", "requests": 2, "verified": 2,
                                         "effects": 1, "duplicates": 1, "max_concurrent": 1,
                                         "statuses": {"200": 2}}
    assert summary["totals"]["requests"] == 3 and summary["totals"]["statuses"] == {"200": 2,
                                                                                     "410": 1}
    assert len(receipts["effects"]) == 1 and len(receipts["requests"]) == 3
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [line["record"] for line in lines] == ["effect", "request", "request", "request"]


async def test_put_behaviour_switches_an_endpoint_down_and_back(
        session: aiohttp.ClientSession, endpoint_factory: EndpointFactory) -> None:
    """PUT /_behaviour/NAME with a spec changes how that endpoint answers from its next
    request on (an outage and a recovery on the same port); bad specs and names are refused."""
    ep = endpoint_factory("a")
    async with Receiver([ep]) as receiver:
        base = f"http://127.0.0.1:{receiver.port}/_behaviour"
        assert (await post(session, receiver, ep, "msg_1")).status == 200
        async with session.put(f"{base}/a", data="status:503") as response:
            assert response.status == 200
            assert await response.json() == {"endpoint": "a", "behaviour": "status:503"}
        assert (await post(session, receiver, ep, "msg_2")).status == 503
        async with session.put(f"{base}/a", data="nonsense") as response:
            assert response.status == 400
        async with session.put(f"{base}/nobody", data="ok") as response:
            assert response.status == 404
        async with session.put(f"{base}/a", data="ok") as response:
            assert response.status == 200
        assert (await post(session, receiver, ep, "msg_2")).status == 200
        assert receiver.summary()["endpoints"]["a"]["behaviour"] == "ok"


def test_parse_behaviour_and_endpoint_specs() -> None:
    """String specs parse into behaviours, round-trip through `.spec`, and bad ones raise."""
    assert parse_behaviour("fail:2") == Behaviour(kind="fail", count=2)
    assert parse_behaviour("always:500") == Behaviour(kind="status", status=500)
    assert parse_behaviour("redirect:http://x:1/y").url == "http://x:1/y"
    for spec in ("ok", "fail:3", "status:503", "retry_after:5", "slow:0.5", "trickle:1.0",
                 "gone", "hang", "drop_first", "redirect:http://h/"):
        assert parse_behaviour(spec).spec == spec
    for bad in ("", "nope", "fail", "fail:-1", "status:99", "ok:1", "slow:x", "redirect"):
        with pytest.raises(ConfigError):
            parse_behaviour(bad)
    for bad_endpoint in (Endpoint("_summary", new_secret()), Endpoint("a", "secret")):
        with pytest.raises(ConfigError):
            Receiver([bad_endpoint])
    endpoint = parse_endpoint("d=whsec_abc=:fail:2")
    assert (endpoint.name, endpoint.secret, endpoint.behaviour.count) == ("d", "whsec_abc=", 2)
    assert decide(Behaviour(kind="drop_first"), 2).action == "respond"


async def test_cli_subprocess_serves_and_exits_0_on_sigterm_with_summary(
        session: aiohttp.ClientSession) -> None:
    """The CLI prints its port, serves a signed request, and on SIGTERM exits 0 with a summary."""
    secret = new_secret()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookline.rehearsal.receiver", "--listen", "127.0.0.1:0",
        "--endpoint", f"a={secret}:ok", "--endpoint", f"d={new_secret()}:fail:2",
        cwd=REPO_ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 10))
        assert first["event"] == "receiver_listening" and first["port"] > 0
        url = f"http://127.0.0.1:{first['port']}/a"
        async with session.post(url, data=PAYLOAD, headers=signed_headers(secret, "m1")) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    summary = json.loads(stdout.decode().strip().splitlines()[-1])
    assert summary["endpoints"]["a"]["effects"] == 1
    assert summary["endpoints"]["d"]["behaviour"] == "fail:2"
    assert summary["totals"]["requests"] == 1
    assert b"receiver_request" in stderr

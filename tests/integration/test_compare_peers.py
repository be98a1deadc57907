"""The peers' code in `hookline bench --compare` on 127.0.0.1: the delivery step against the
receiver fixture (signed like hookline, the receiver verifies; hookline's retry rule decides
retry vs done), the Celery task retrying by it, and the peers' front door."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.rehearsal.compare import peer_tasks
from hookline.rehearsal.compare.peer_ingest import make_app
from hookline.rehearsal.compare.workload import read_receipts
from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.models import Done, Retry
from hookline.shared.signing import generate_secret, new_message_id

BODY = '{"id": "e1", "type": "bench.event", "data": {}}'


@pytest.fixture
async def receiver():
    """A receiver whose endpoint `flaky` answers 500 once per webhook-id, then 200."""
    secret = generate_secret()
    async with Receiver([Endpoint("flaky", secret, parse_behaviour("fail:1"))]) as rec:
        yield rec, secret


async def test_a_failed_attempt_is_retried_by_hookline_backoff_then_done(receiver, monkeypatch):
    """Attempt 1 gets a 500: Retry within the first backoff window; attempt 2 is Done, with
    the same webhook-id, both verified by the receiver."""
    rec, secret = receiver
    monkeypatch.setitem(peer_tasks.DESTINATIONS, "flaky", (rec.url("flaky"), secret))
    message_id = new_message_id()

    def two_attempts() -> tuple[object, object]:
        first = peer_tasks.attempt_delivery("flaky", message_id, BODY, 1)
        second = peer_tasks.attempt_delivery("flaky", message_id, BODY, 2)
        return first, second

    first, second = await asyncio.to_thread(two_attempts)
    assert isinstance(first, Retry)
    low, high = peer_tasks.BACKOFF.wait_bounds_s(1)
    assert low <= first.delay_s <= high
    assert first.error == "HTTP 500"
    assert isinstance(second, Done)
    assert [(r.verified, r.status, r.webhook_id) for r in rec.requests] == [
        (True, 500, message_id), (True, 200, message_id)]
    assert len(rec.effects) == 1
    effects, requests, unverified = read_receipts(rec.receipts())
    assert (len(effects), requests, unverified) == (1, 2, 0)


async def test_no_response_is_a_transient_failure():
    """A refused connection comes back as an error, never an exception."""
    result = await asyncio.to_thread(peer_tasks.post_signed, "http://127.0.0.1:9/x",
                                     generate_secret(), new_message_id(), b"{}")
    assert result.status_code is None and result.error == "ConnectionError"


async def test_the_celery_task_retries_with_the_backoff_countdown(receiver, monkeypatch):
    """Run eagerly (no broker), the Celery task retries a 500 with `self.retry` and is done
    on the next attempt: two verified requests, one effect."""
    from hookline.rehearsal.compare.celery_app import app, deliver

    rec, secret = receiver
    monkeypatch.setitem(peer_tasks.DESTINATIONS, "flaky", (rec.url("flaky"), secret))
    app.conf.task_always_eager = True
    try:
        result = await asyncio.to_thread(deliver.apply_async,
                                         args=("flaky", new_message_id(), BODY))
    finally:
        app.conf.task_always_eager = False
    assert result.get() == "done"
    assert [r.status for r in rec.requests] == [500, 200]


async def test_the_peer_front_door_enqueues_one_task_per_destination():
    """POST /v1/events answers 202 after one enqueue per destination, all with the same new
    webhook-id and the exact body; a body without id and type gets 400 and no task."""
    calls: list[tuple[str, str, str]] = []
    app = make_app(lambda *args: calls.append(args), ["d1", "d2", "d3"])
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        resp = await client.post("/v1/events", data=BODY)
        assert resp.status == 202
        message_id = (await resp.json())["message_id"]
        bad = await client.post("/v1/events", data='{"type": "x"}')
        assert bad.status == 400
    assert calls == [(name, message_id, BODY) for name in ("d1", "d2", "d3")]

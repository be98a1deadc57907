"""What deliveries say about their event, end to end on a real database (each backend in turn):
provider requests signed as GitHub, Stripe and Standard Webhooks senders sign them, posted to
the ingest app on 127.0.0.1, delivered by a real worker to a receiver on 127.0.0.1 that
verifies hookline's signature and records every header."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDictProxy
from standardwebhooks.webhooks import Webhook

from hookline.ingest.app import build_app
from hookline.rehearsal.github_samples import load_samples
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from tests.conftest import settle
from tests.integration.test_sources_api import (
    ADMIN_TOKEN,
    GH_SECRET,
    STD_SECRET,
    STRIPE_SECRET,
    github_headers,
    standard_headers,
    stripe_headers,
)
from tests.integration.test_worker import FAST, running_worker

CONFIG = Config(max_body_bytes=256 * 1024, admin_token=ADMIN_TOKEN, ingest_token=ADMIN_TOKEN)
ISSUES_SECRET = generate_secret()
ALL_SECRET = generate_secret()


class Recorder:
    """A receiver on 127.0.0.1: POST /{name} verifies hookline's signature with the
    destination's secret (standardwebhooks), records the headers and answers 204."""

    def __init__(self, secrets: dict[str, str]) -> None:
        self.secrets = secrets
        self.received: list[tuple[str, CIMultiDictProxy[str], bytes]] = []
        self.app = web.Application()
        self.app.router.add_post("/{name}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        name, body = request.match_info["name"], await request.read()
        Webhook(self.secrets[name]).verify(body, dict(request.headers))  # raises if forged
        self.received.append((name, request.headers, body))
        return web.Response(status=204)

    def headers_of(self, name: str, source_id: str) -> CIMultiDictProxy[str]:
        [found] = [h for n, h, _ in self.received
                   if n == name and h.get("webhook-source-id") == source_id]
        return found


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[Recorder, str]]:
    rec = Recorder({"issues": ISSUES_SECRET, "all": ALL_SECRET})
    async with TestServer(rec.app, host="127.0.0.1") as server:
        yield rec, str(server.make_url("/"))


async def test_source_events_reach_destinations_with_their_type_origin_and_provider_headers(
        real_store: Store, recorder: tuple[Recorder, str]) -> None:
    """A GitHub `issues` delivery and a `push` delivery (shipped examples), a Stripe event, a
    Standard Webhooks message and a POST /v1/events event go through ingest and a worker:
    the destination subscribed to `issues.*` gets the issues delivery only; every delivery
    carries webhook-event-type; source deliveries carry webhook-source, webhook-source-id
    and GitHub's X-GitHub-Event / -Delivery / -Hook-ID; no provider signature is passed on,
    hookline's own webhook-id is not the sender's, and a destination's custom header of the
    same name as a provider header does not replace it."""
    rec, base = recorder
    await real_store.add_destination(name="issues", url=base + "issues", secret=ISSUES_SECRET,
                                     event_types=["issues.*"], max_in_flight=4)
    await real_store.add_destination(name="all", url=base + "all", secret=ALL_SECRET,
                                     event_types=["*"], max_in_flight=4,
                                     headers={"x-github-event": "set-by-operator",
                                              "X-Team": "payments"})
    await real_store.add_source(name="gh", scheme="github", secret=GH_SECRET)
    await real_store.add_source(name="stripe", scheme="stripe", secret=STRIPE_SECRET)
    await real_store.add_source(name="std", scheme="standard", secret=STD_SECRET)
    samples = load_samples()
    issue = next(s for s in samples if s.github_event == "issues")
    push = next(s for s in samples if s.github_event == "push")
    stripe_body = b'{"id": "evt_1NG8Du2eZvKYlo2C", "object": "event", "type": "invoice.paid"}'
    std_body = b'{"type": "contact.created", "data": {}}'

    async with TestClient(TestServer(build_app(real_store, CONFIG), host="127.0.0.1")) as client:
        requests: list[tuple[str, bytes, dict[str, str]]] = [
            ("/v1/sources/gh", issue.body, {**github_headers(
                issue.body, issue.github_event, issue.delivery_id), "X-GitHub-Hook-ID": "4242"}),
            ("/v1/sources/gh", push.body, github_headers(push.body, "push", push.delivery_id)),
            ("/v1/sources/stripe", stripe_body, stripe_headers(stripe_body)),
            ("/v1/sources/std", std_body, standard_headers(std_body, "msg_sender_1")),
            ("/v1/events", b'{"id": "o-1", "type": "order.created", "data": {}}',
             {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"})]
        for path, body, headers in requests:
            async with client.post(path, data=body, headers=headers) as resp:
                assert resp.status == 202, await resp.text()
        async with running_worker(real_store, FAST):
            await settle(real_store)
    deadline = time.monotonic() + 10
    while len(rec.received) < 6 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)

    assert sorted(n for n, _, _ in rec.received) == ["all"] * 5 + ["issues"]
    for name in ("issues", "all"):
        got = rec.headers_of(name, issue.delivery_id)
        assert got["webhook-event-type"] == issue.event_type
        assert got["webhook-source"] == "gh"
        assert got.getall("X-GitHub-Event") == ["issues"]  # not the operator's value
        assert got["X-GitHub-Delivery"] == issue.delivery_id
        assert got["X-GitHub-Hook-ID"] == "4242"
        assert "X-Hub-Signature-256" not in got
        assert got["webhook-id"].startswith("msg_")
    assert rec.headers_of("all", issue.delivery_id)["X-Team"] == "payments"
    got_push = rec.headers_of("all", push.delivery_id)
    assert (got_push["webhook-event-type"], got_push["X-GitHub-Event"]) == ("push", "push")
    assert "X-GitHub-Hook-ID" not in got_push
    got_stripe = rec.headers_of("all", "evt_1NG8Du2eZvKYlo2C")
    assert (got_stripe["webhook-event-type"], got_stripe["webhook-source"]) == (
        "invoice.paid", "stripe")
    assert "Stripe-Signature" not in got_stripe
    got_std = rec.headers_of("all", "msg_sender_1")
    assert (got_std["webhook-event-type"], got_std["webhook-source"]) == ("contact.created",
                                                                          "std")
    assert got_std.getall("webhook-id") != ["msg_sender_1"]  # hookline's own id and signature
    [(_, api, _)] = [r for r in rec.received if "webhook-source-id" not in r[1]]
    assert api["webhook-event-type"] == "order.created" and "webhook-source" not in api
    for _, headers, _ in rec.received:
        assert headers.getall("content-type") == ["application/json"]
        assert len(headers.getall("webhook-signature")) == 1


def test_meaning_headers_cannot_be_a_destinations_custom_headers() -> None:
    """webhook-event-type, webhook-source and webhook-source-id are hookline's to set."""
    from hookline.shared.errors import InvalidSetting
    from hookline.shared.policy import rules
    for name in ("webhook-event-type", "Webhook-Source", "webhook-source-id"):
        with pytest.raises(InvalidSetting, match="cannot be overridden"):
            rules.headers({name: "x"})


def test_forwarded_values_must_be_single_and_printable() -> None:
    """A provider header sent twice, too long or not printable ASCII is left out (the event is
    still accepted); names outside the scheme's allowlist are never forwarded."""
    from hookline.shared.policy.forwarding import MAX_VALUE_CHARS, source_headers
    sent = {"x-github-event": ["issues"], "x-github-delivery": ["d1", "d2"],
            "x-github-hook-id": ["9" * (MAX_VALUE_CHARS + 1)], "x-hub-signature-256": ["s"]}
    got = source_headers("gh", "github", "d1", lambda n: sent.get(n.lower(), []))
    assert got == (("webhook-source", "gh"), ("webhook-source-id", "d1"),
                   ("X-GitHub-Event", "issues"))
    sent = {"x-github-event": ["issu\u00e9s"]}
    assert ("X-GitHub-Event", "issu\u00e9s") not in source_headers(
        "gh", "github", "d1", lambda n: sent.get(n.lower(), []))
    assert source_headers("s", "stripe", "evt_1", lambda n: ["x"]) == (
        ("webhook-source", "s"), ("webhook-source-id", "evt_1"))

"""POST /v1/sources/{name} through the real ingest app on 127.0.0.1 against a real database
(each backend in turn: a SQLite file, then PostgreSQL):
GitHub payload examples signed as GitHub signs, Stripe- and Standard-Webhooks-signed bodies,
rejections that store nothing, dedupe by the provider's id; plus the sources admin API and
`hookline sources`."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from standardwebhooks.webhooks import Webhook

from hookline.ingest.app import build_app
from hookline.rehearsal.github_samples import load_samples
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.supervisor.cli import main as cli_main
from tests.conftest import opened_store, query_db

GH_SECRET = "It's a Secret to Everybody"
STRIPE_SECRET = "whsec_test_3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
STD_SECRET = generate_secret()
ADMIN_TOKEN = "admin-token-for-tests"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# the largest GitHub example is ~32 KiB
CONFIG = Config(max_body_bytes=256 * 1024, admin_token=ADMIN_TOKEN, ingest_token=ADMIN_TOKEN)


@pytest.fixture
async def real_store(real_store: Store) -> Store:
    """The shared fixture's open store (each backend in turn), with a catch-all destination
    and three sources."""
    await real_store.add_destination(name="app", url="http://127.0.0.1:9/app",
                                     secret=generate_secret(), event_types=["*"],
                                     max_in_flight=4)
    await real_store.add_source(name="gh", scheme="github", secret=GH_SECRET)
    await real_store.add_source(name="stripe", scheme="stripe", secret=STRIPE_SECRET)
    await real_store.add_source(name="std", scheme="standard", secret=STD_SECRET)
    return real_store


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    """A client of the ingest app served on 127.0.0.1 (admin routes need ADMIN headers)."""
    async with TestClient(TestServer(build_app(real_store, CONFIG), host="127.0.0.1")) as c:
        yield c


async def stored_events(store_url: str) -> list[dict[str, Any]]:
    """Every stored event, read from the database with a separate connection."""
    return await query_db(store_url, "SELECT source, source_event_id, type, body FROM events "
                                     "ORDER BY id")


async def job_count(store_url: str) -> int:
    """How many jobs the database holds, read with a separate connection."""
    return int((await query_db(store_url, "SELECT count(*) AS n FROM jobs"))[0]["n"])


def github_headers(body: bytes, event: str, delivery: str,
                   secret: str = GH_SECRET) -> dict[str, str]:
    """The headers GitHub sends, HMAC-SHA256 hex of the raw body with the hook's secret."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery, "User-Agent": "GitHub-Hookshot/test",
            "Content-Type": "application/json"}


def stripe_headers(body: bytes, t: int | None = None) -> dict[str, str]:
    t = int(time.time()) if t is None else t
    digest = hmac.new(STRIPE_SECRET.encode(), f"{t}.".encode() + body,
                      hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={t},v1={digest}", "Content-Type": "application/json"}


def standard_headers(body: bytes, msg_id: str, t: int | None = None) -> dict[str, str]:
    """Signed by the standardwebhooks package."""
    t = int(time.time()) if t is None else t
    signature = Webhook(STD_SECRET).sign(msg_id, datetime.fromtimestamp(t, tz=UTC),
                                         body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(t), "webhook-signature": signature,
            "Content-Type": "application/json"}


async def post(client: TestClient[Any, Any], path: str, body: bytes,
               headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    async with client.post(path, data=body, headers=headers) as resp:
        assert resp.content_type == "application/json"
        return resp.status, await resp.json()


# -- accepted ------------------------------------------------------------------------------


async def test_github_payload_examples_are_accepted_stored_byte_exact_and_deduped(
        client, real_store, store_url):
    """Every shipped GitHub example, signed as GitHub signs, is answered 202 with one job;
    the stored body equals the sent bytes (non-ASCII examples included), the id is the
    delivery id and the type `event.action`; re-sending every delivery is 200 duplicate
    and stores nothing more."""
    samples = load_samples()
    assert len(samples) > 100 and any(not s.body.isascii() for s in samples)
    limit = asyncio.Semaphore(32)

    async def send(sample: Any) -> tuple[int, dict[str, Any]]:
        async with limit:
            return await post(client, "/v1/sources/gh", sample.body, github_headers(
                sample.body, sample.github_event, sample.delivery_id))

    first = await asyncio.gather(*(send(s) for s in samples))
    assert [status for status, _ in first] == [202] * len(samples), first[:3]
    assert all(answer["jobs"] == 1 for _, answer in first)

    stored = {row["source_event_id"]: row for row in await stored_events(store_url)}
    assert len(stored) == len(samples)
    for sample in samples:
        row = stored[sample.delivery_id]
        assert (row["source"], row["type"]) == ("gh", sample.event_type)
        assert bytes(row["body"]) == sample.body

    again = await asyncio.gather(*(send(s) for s in samples[:20]))
    assert {status for status, _ in again} == {200}
    assert all(a["duplicate"] is True and a["jobs"] == 0 for _, a in again)
    assert [a["event_id"] for _, a in again] == [a["event_id"] for _, a in first[:20]]
    assert len(await stored_events(store_url)) == len(samples)
    assert await job_count(store_url) == len(samples)


async def test_stripe_and_standard_webhooks_signed_bodies_are_accepted(client, real_store,
                                                                      store_url):
    """A Stripe-signed event and a Standard-Webhooks-signed one (standardwebhooks package)
    are 202 with a job; ids and types come from where each provider puts them."""
    stripe_body = ('{\n  "id": "evt_1NG8Du2eZvKYlo2CUI79vXWy",\n  "object": "event",\n'
                   '  "type": "invoice.paid",\n  "data": {"customer_name": "Zoë"}\n}').encode()
    status, answer = await post(client, "/v1/sources/stripe", stripe_body,
                                stripe_headers(stripe_body))
    assert (status, answer["jobs"]) == (202, 1), answer
    std_body = '{"type":"contact.created","timestamp":"2026-01-01T00:00:00Z","data":{"n":"ü"}}'
    status, answer = await post(client, "/v1/sources/std", std_body.encode(),
                                standard_headers(std_body.encode(), "msg_abc123"))
    assert (status, answer["jobs"]) == (202, 1), answer
    rows = await stored_events(store_url)
    assert [(r["source"], r["source_event_id"], r["type"], bytes(r["body"])) for r in rows] == [
        ("stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy", "invoice.paid", stripe_body),
        ("std", "msg_abc123", "contact.created", std_body.encode())]


# -- rejected, nothing stored --------------------------------------------------------------


async def test_bad_signatures_are_401_and_store_nothing_nor_burn_the_id(client, real_store,
                                                                       store_url):
    """Re-serialised body, ASCII-mangled signing, wrong secret, missing header, stale
    timestamp: each is 401 signature_invalid with a reason and stores no event and no job.
    The genuine request with the same ids is then accepted (a forgery claims no dedupe key)."""
    sample = next(s for s in load_samples() if not s.body.isascii())
    reserialised = json.dumps(json.loads(sample.body)).encode()
    mangled = sample.body.decode().encode("ascii", "replace")
    stripe_body = ('{"id": "evt_2", "type": "charge.succeeded", '
                   '"data": {"who": "Jérôme"}}').encode()
    std_body = b'{"type": "user.created", "data": {}}'
    missing = github_headers(sample.body, sample.github_event, sample.delivery_id)
    del missing["X-Hub-Signature-256"]
    attempts = [
        ("/v1/sources/gh", reserialised,
         github_headers(sample.body, sample.github_event, sample.delivery_id), "does not match"),
        ("/v1/sources/gh", sample.body,
         github_headers(mangled, sample.github_event, sample.delivery_id), "does not match"),
        ("/v1/sources/gh", sample.body, github_headers(
            sample.body, sample.github_event, sample.delivery_id, secret="nope" * 5),
         "does not match"),
        ("/v1/sources/gh", sample.body, missing, "missing X-Hub-Signature-256"),
        ("/v1/sources/gh", sample.body, {**missing, "X-Hub-Signature-256": "sha256=zz"},
         "malformed"),
        ("/v1/sources/stripe", stripe_body,
         stripe_headers(stripe_body, t=int(time.time()) - 3600), "old"),
        ("/v1/sources/stripe", stripe_body.replace(b"\xc3\xa9", b"e"),
         stripe_headers(stripe_body), "no v1 signature"),
        ("/v1/sources/std", std_body,
         standard_headers(std_body, "msg_x", t=int(time.time()) - 3600), "old"),
        ("/v1/sources/std", std_body, {"webhook-id": "msg_x"}, "missing webhook-timestamp"),
    ]
    for path, body, headers, reason in attempts:
        status, answer = await post(client, path, body, headers)
        assert status == 401, (path, reason, answer)
        assert answer["error"] == "signature_invalid" and reason in answer["detail"], answer
    assert await stored_events(store_url) == [] and await job_count(store_url) == 0

    genuine = [("/v1/sources/gh", sample.body,
                github_headers(sample.body, sample.github_event, sample.delivery_id)),
               ("/v1/sources/stripe", stripe_body, stripe_headers(stripe_body)),
               ("/v1/sources/std", std_body, standard_headers(std_body, "msg_x"))]
    for path, body, headers in genuine:
        status, answer = await post(client, path, body, headers)
        assert (status, answer.get("duplicate")) == (202, None), answer
    assert len(await stored_events(store_url)) == 3


async def test_unknown_source_unusable_event_and_oversized_body(client, real_store, store_url):
    """Unknown source: 404 source_not_found. Signed but without a delivery id: 400
    invalid_event naming the field. Over max_body_bytes: 413. Nothing stored by any."""
    body = b'{"action": "opened"}'
    headers = github_headers(body, "issues", "d-1")
    status, answer = await post(client, "/v1/sources/nope", body, headers)
    assert (status, answer["error"]) == (404, "source_not_found")
    del headers["X-GitHub-Delivery"]
    status, answer = await post(client, "/v1/sources/gh", body, headers)
    assert (status, answer["error"], answer["field"]) == (400, "invalid_event",
                                                           "X-GitHub-Delivery")
    big = b'{"pad": "' + b"x" * CONFIG.max_body_bytes + b'"}'
    status, answer = await post(client, "/v1/sources/gh", big,
                                github_headers(big, "issues", "d-2"))
    assert (status, answer["error"]) == (413, "body_too_large")
    assert await stored_events(store_url) == []


# -- admin API and CLI ---------------------------------------------------------------------


async def test_admin_api_adds_lists_and_removes_sources(client, real_store):
    """POST /v1/admin/sources returns a generated secret once (201) that then verifies
    requests; GET lists sources redacted; bad fields are 400, a taken name 409; after DELETE
    the route answers 404."""
    token_source = {"name": "tk", "scheme": "token"}
    async with client.post("/v1/admin/sources", headers=ADMIN, json=token_source) as r:
        assert r.status == 201
        token = (await r.json())["secret"]
    async with client.post("/v1/admin/sources", headers=ADMIN, json=token_source) as r:
        assert r.status == 409
    unknown_scheme = {"name": "x", "scheme": "svn"}
    async with client.post("/v1/admin/sources", headers=ADMIN, json=unknown_scheme) as r:
        assert (r.status, (await r.json())["error"]) == (400, "invalid_request")
    for reserved in ("api", "_hookline", "_test"):  # hookline's own sources
        async with client.post("/v1/admin/sources", headers=ADMIN,
                               json={"name": reserved, "scheme": "token"}) as r:
            assert (r.status, (await r.json())["field"]) == (400, "name"), reserved
    async with client.get("/v1/admin/sources", headers=ADMIN) as r:
        listed = await r.json()
    assert [s["name"] for s in listed] == ["gh", "stripe", "std", "tk"]
    assert all(token not in json.dumps(s) and GH_SECRET not in json.dumps(s) for s in listed)

    body = b'{"id": "order-1", "type": "order.created"}'
    status, answer = await post(client, "/v1/sources/tk", body,
                                {"Authorization": f"Bearer {token}"})
    assert (status, answer["jobs"]) == (202, 1)
    status, _ = await post(client, "/v1/sources/tk", body, {"Authorization": "Bearer wrong"})
    assert status == 401

    async with client.delete("/v1/admin/sources/tk", headers=ADMIN) as r:
        assert r.status == 200
    status, answer = await post(client, "/v1/sources/tk", body,
                                {"Authorization": f"Bearer {token}"})
    assert (status, answer["error"]) == (404, "source_not_found")


async def test_events_route_cannot_claim_a_provider_sources_ids(client, real_store):
    """POST /v1/events with `source` naming a configured source is 400 (field `source`) and
    stores nothing, so the provider's real delivery of that id is not suppressed; the same id
    then arrives from the provider as new."""
    body = json.dumps({"id": "order-9", "type": "order.created", "data": {},
                       "source": "tk2"}).encode()
    async with client.post("/v1/admin/sources", headers=ADMIN,
                           json={"name": "tk2", "scheme": "token"}) as r:
        token = (await r.json())["secret"]
    status, answer = await post(client, "/v1/events", body,
                                {**ADMIN, "Content-Type": "application/json"})
    assert (status, answer["error"], answer["field"]) == (400, "invalid_event", "source")
    assert (await real_store.stats()).events == 0
    status, answer = await post(client, "/v1/sources/tk2", b'{"id": "order-9", "type": "x"}',
                                {"Authorization": f"Bearer {token}"})
    assert (status, answer["jobs"]) == (202, 1)
    other = body.replace(b'"tk2"', b'"crm"')  # not a provider source: accepted
    status, _ = await post(client, "/v1/events", other,
                           {**ADMIN, "Content-Type": "application/json"})
    assert status == 202


def test_cli_sources_add_list_remove(store_url, capsys):
    """`hookline sources add` prints a generated secret once and stores it; `list --json`
    shows it redacted; `remove` removes; errors are one line: a missing stripe secret is a
    usage error (exit 2), an unknown name a runtime failure (exit 1)."""
    db = store_url
    assert cli_main(["--db", db, "init"]) == 0
    capsys.readouterr()
    assert cli_main(["--db", db, "sources", "add", "gh", "--scheme", "github"]) == 0
    secret = capsys.readouterr().out.split("secret (shown once): ")[1].strip()
    assert len(secret) >= 32
    assert cli_main(["--db", db, "sources", "add", "st", "--scheme", "stripe"]) == 2
    assert "needs --secret" in capsys.readouterr().err
    assert cli_main(["--db", db, "sources", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["scheme"]) for s in listed] == [("gh", "github")]
    assert secret not in json.dumps(listed)
    assert cli_main(["--db", db, "sources", "remove", "gh"]) == 0
    assert cli_main(["--db", db, "sources", "remove", "gh"]) == 1
    assert "no source named 'gh'" in capsys.readouterr().err

    async def stored_secret() -> list[str]:
        async with opened_store(db) as store:
            return [s.secret for s in await store.list_sources()]

    assert asyncio.run(stored_secret()) == []


@pytest.mark.parametrize(("source", "headers"), [
    ("stripe", {"Stripe-Signature": "t=\u00b2,v1=" + "0" * 64}),              # '²'.isdigit()
    ("stripe", {"Stripe-Signature": "t=" + "9" * 400 + ",v1=" + "0" * 64}),   # not a float
    ("std", {"webhook-id": "msg_1", "webhook-timestamp": "\u0663",             # Arabic-Indic 3
             "webhook-signature": "v1,AAAA"}),
    ("std", {"webhook-id": "msg_1", "webhook-timestamp": "9" * 5000,           # int() refuses
             "webhook-signature": "v1,AAAA"}),
])
async def test_non_ascii_or_huge_signed_timestamps_are_401_not_500(client, store_url, source,
                                                                    headers):
    """Timestamps of Unicode digits (sent as UTF-8 bytes) or thousands of digits are a
    malformed signature: 401 signature_invalid, nothing stored (they raised ValueError or
    OverflowError, answered 500, before; found by the hypothesis properties)."""
    body = b'{"id": "evt_1", "type": "invoice.paid"}'
    head = (f"POST /v1/sources/{source} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n")
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(head.encode("utf-8") + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"401", answer
    payload = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert payload["error"] == "signature_invalid" and "malformed" in payload["detail"]
    assert await stored_events(store_url) == []

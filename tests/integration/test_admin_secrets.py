"""A destination's secret and creation fields through the admin API: the real ingest app on
127.0.0.1, on a real database (each backend in turn). The deliveries they govern are checked
end to end in tests/acceptance/test_secret_rotation.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.policy import rules
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = "/v1/admin/destinations"


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def _call(client: TestClient[Any, Any], method: str, path: str, *,
                actor: str | None = None, **kwargs: Any) -> tuple[int, Any, Any]:
    headers = {**AUTH, **({"X-Hookline-Actor": actor} if actor else {})}
    async with client.request(method, path, headers=headers, **kwargs) as resp:
        return resp.status, await resp.json(), resp.headers


async def test_creation_takes_every_settable_field_and_refuses_unknown_ones(client,
                                                                           real_store):
    """POST stores every field its schema lists (timeout_s, rate_limit_per_s, ordered,
    headers, max_in_flight, event_types, secret); an unknown field is 400 naming it (and
    listing all), as is a bad policy value; nothing is stored for a refused body."""
    secret = generate_secret()
    status, made, _ = await _call(client, "POST", BASE, json={
        "name": "full", "url": "http://127.0.0.1:9/f", "secret": secret,
        "event_types": ["invoice.*"], "max_in_flight": 3, "headers": {"X-Tenant": "a"},
        "timeout_s": 2.5, "rate_limit_per_s": 4, "ordered": True})
    assert status == 201, made
    stored = await real_store.get_destination("full")
    assert (stored.timeout_s, stored.rate_limit_per_s, stored.ordered) == (2.5, 4.0, True)
    assert (stored.secret, stored.event_types, stored.max_in_flight, stored.headers) == (
        secret, ("invoice.*",), 3, (("X-Tenant", "a"),))
    assert made["secret"] != secret and made["timeout_s"] == 2.5 and made["ordered"] is True

    for body, field in (({"name": "x", "url": "http://127.0.0.1:9/x", "timeout": 5,
                          "colour": "red"}, "colour"),
                        ({"name": "x", "url": "http://127.0.0.1:9/x", "timeout_s": 0},
                         "timeout_s"),
                        ({"name": "x", "url": "http://127.0.0.1:9/x", "ordered": "yes"},
                         "ordered"),
                        ({"name": "x", "url": "http://127.0.0.1:9/x",
                          "rate_limit_per_s": -1}, "rate_limit_per_s")):
        status, refused, _ = await _call(client, "POST", BASE, json=body)
        assert (status, refused["error"], refused["field"]) == (400, "invalid_request", field)
        if field == "colour":
            assert refused["detail"].startswith("colour: unknown field(s) 'colour', 'timeout';")
            # Every field the route takes is listed, the tenant it takes apart too.
            accepted = refused["detail"].split("accepted: ")[1].split(", ")
            assert sorted(accepted) == sorted(["tenant", *rules.DESTINATION_FIELDS])
    assert [d.name for d in await real_store.list_destinations()] == ["full"]


async def test_rotate_reveal_and_expire_are_audited_with_who_asked(client, real_store):
    """Rotation answers the new secret whole (generated or given) with the previous one
    signing until now + overlap (default 24 h); the reveal shows the current secret; early
    expiry ends the overlap (a repeat says nothing was left to expire). Secret answers are
    not cacheable, and each call logs its event with the destination, the client address and
    X-Hookline-Actor, never the secret."""
    old = generate_secret()
    await real_store.add_destination(name="d", url="http://127.0.0.1:9/d", secret=old,
                                     event_types=["*"], max_in_flight=1)
    with capture_logs() as logs:
        status, rotated, headers = await _call(client, "POST", f"{BASE}/d/rotate-secret",
                                               actor="alice@example.com")
        assert status == 200 and headers["Cache-Control"] == "no-store"
        stored = await real_store.get_destination("d")
        assert rotated == {"name": "d", "secret": stored.secret,
                           "previous_secret": old[:10] + "…",
                           "previous_secret_until": stored.previous_secret_until}
        assert stored.secret != old and stored.previous_secret == old
        assert stored.previous_secret_until is not None
        overlap = stored.previous_secret_until - stored.created_at
        assert abs(overlap - rules.DEFAULT_ROTATION_OVERLAP_S) < 60

        given = generate_secret()
        status, rotated, _ = await _call(client, "POST", f"{BASE}/d/rotate-secret",
                                         json={"secret": given, "overlap_s": 30})
        assert status == 200 and rotated["secret"] == given
        status, shown, headers = await _call(client, "GET", f"{BASE}/d/secret", actor="ops")
        assert (status, shown["secret"], headers["Cache-Control"]) == (200, given, "no-store")

        status, out, _ = await _call(client, "POST", f"{BASE}/d/expire-previous-secret")
        assert (status, out) == (200, {"name": "d", "expired": True})
        assert (await real_store.get_destination("d")).active_secrets(9e9) == (given,)
        status, out, _ = await _call(client, "POST", f"{BASE}/d/expire-previous-secret",
                                     json={})
        assert (status, out) == (200, {"name": "d", "expired": False})

    audit = [(e["event"], e["destination"], e["by"], e["client"], e["actor"]) for e in logs
             if e["event"] in ("secret_rotated", "secret_revealed", "previous_secret_expired")]
    assert audit == [
        ("secret_rotated", "d", "admin_api", "127.0.0.1", "alice@example.com"),
        ("secret_rotated", "d", "admin_api", "127.0.0.1", None),
        ("secret_revealed", "d", "admin_api", "127.0.0.1", "ops"),
        ("previous_secret_expired", "d", "admin_api", "127.0.0.1", None),
        ("previous_secret_expired", "d", "admin_api", "127.0.0.1", None)]
    assert [e["generated"] for e in logs if e["event"] == "secret_rotated"] == [True, False]
    assert not any(given in str(e) or old in str(e) for e in logs)


BAD_SECRET_REQUESTS = [
    ("POST", "d/rotate-secret", {"overlap_s": -1}, 400, "overlap_s"),
    ("POST", "d/rotate-secret", {"overlap_s": 7 * 86400 + 1}, 400, "overlap_s"),
    ("POST", "d/rotate-secret", {"overlap_s": "24h"}, 400, "overlap_s"),
    ("POST", "d/rotate-secret", {"secret": "whsec_short"}, 400, "secret"),
    ("POST", "d/rotate-secret", {"secret": "SAME"}, 400, "secret"),
    ("POST", "d/rotate-secret", {"overlap": 60}, 400, "overlap"),
    ("POST", "d/expire-previous-secret", {"now": True}, 400, "now"),
    ("POST", "nope/rotate-secret", {}, 404, "name"),
    ("GET", "nope/secret", None, 404, "name"),
    ("POST", "nope/expire-previous-secret", None, 404, "name"),
]


async def test_bad_secret_requests_are_refused_and_change_nothing(client, real_store):
    """Out-of-bounds overlaps, bad or unchanged secrets and unknown fields are 400 naming the
    field; an unknown destination is 404; PATCH refuses a secret, pointing at rotation; the
    destination's secrets stay as they were."""
    secret = generate_secret()
    await real_store.add_destination(name="d", url="http://127.0.0.1:9/d", secret=secret,
                                     event_types=["*"], max_in_flight=1)
    for method, path, body, status, field in BAD_SECRET_REQUESTS:
        sent = {"secret": secret} if body == {"secret": "SAME"} else body
        got, answer, _ = await _call(client, method, f"{BASE}/{path}", json=sent)
        assert (got, answer.get("field")) == (status, field), (path, body, answer)
    got, answer, _ = await _call(client, "PATCH", f"{BASE}/d", json={"secret": secret})
    assert (got, answer["field"]) == (400, "secret") and "rotate-secret" in answer["detail"]
    after = await real_store.get_destination("d")
    assert (after.secret, after.previous_secret) == (secret, None)

"""Every admin 4xx caused by bad input names its `field`: each route of the admin API with the
bad inputs it refuses, through the real ingest app on 127.0.0.1 on a real SQLite file.

The field is the body field, query or path parameter the operator must change (`body` for a
body that is not a JSON object), and the detail starts with it, as the CLI prints it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.catalogue import event_type_fields
from hookline.shared.config import Config
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOOD_URL = "http://127.0.0.1:9/h"
SECRET = "whsec_" + "A" * 43 + "="
DEEP = b'{"a":' + b"[" * 3000 + b"]" * 3000 + b"}"
"""A body nested 3000 levels deep (past the interpreter's recursion limit)."""

UNREACHABLE_URLS = [
    "http://8.8.8.8:99999/x", "http://127.0.0.1:abc/", "http://example.com:0/",
    "http://exa mple.com/", "http://ex\nample.com/", "http://example.com/a b",
    "http://134744072/x", "http://2130706433:8101/x", "http://127.1:8101/x",
    "http://0x7f000001:8101/x", "http://0177.0.0.1/",
]
"""Destination URLs no send could ever reach (refused, not retried for days): a port out of
range or not a number, a space or control character, an IPv4 host in a legacy spelling."""

# (method, path, JSON body or raw bytes or None, status, error code, field)
BAD_INPUTS: list[tuple[str, str, Any, int, str, str]] = [
    ("POST", "/v1/admin/destinations", b"[1]", 400, "invalid_request", "body"),
    ("POST", "/v1/admin/destinations", b"{not json", 400, "invalid_request", "body"),
    ("POST", "/v1/admin/destinations", {"name": "x", "url": "ftp://x/"}, 400,
     "invalid_request", "url"),
    ("POST", "/v1/admin/destinations", {"name": "x", "url": GOOD_URL, "colour": 1}, 400,
     "invalid_request", "colour"),
    *[("POST", "/v1/admin/destinations", {"name": "x", "url": url}, 400, "invalid_request",
       "url") for url in UNREACHABLE_URLS],
    ("PATCH", "/v1/admin/destinations/d", {"url": "http://134744072/x"}, 400,
     "invalid_request", "url"),
    ("PATCH", "/v1/admin/destinations/d", {"rate_limit_per_s": 1e-300}, 400,
     "invalid_request", "rate_limit_per_s"),
    ("POST", "/v1/admin/destinations", {"name": "x", "url": "http://169.254.169.254/"}, 400,
     "destination_blocked", "url"),
    ("PATCH", "/v1/admin/destinations/d", {"max_in_flight": 0}, 400, "invalid_request",
     "max_in_flight"),
    ("PATCH", "/v1/admin/destinations/d", {}, 400, "invalid_request", "changes"),
    ("PATCH", "/v1/admin/destinations/d", {"body_format": "teams"}, 400, "invalid_request",
     "body_format"),
    ("PATCH", "/v1/admin/destinations/d", {"url": "http://169.254.169.254/"}, 400,
     "destination_blocked", "url"),
    ("POST", "/v1/admin/destinations/d/pause", {"reason": 5}, 400, "invalid_request", "reason"),
    # text no database can hold (a lone surrogate) and nesting past the depth limit
    ("POST", "/v1/admin/destinations/d/pause", {"reason": "\ud800"}, 400, "invalid_request",
     "body"),
    ("POST", "/v1/admin/destinations", {"name": "x", "url": GOOD_URL, "\udfff": 1}, 400,
     "invalid_request", "body"),
    ("POST", "/v1/admin/destinations", DEEP, 400, "invalid_request", "body"),
    ("PUT", "/v1/admin/tenants/sur", {"metadata": {"a": "\ud800"}}, 400, "invalid_request",
     "body"),
    ("PUT", "/v1/admin/tenants/sur", DEEP, 400, "invalid_request", "body"),
    ("PUT", "/v1/admin/event-types/a.b", {"description": "\ud800"}, 400, "invalid_request",
     "body"),
    ("PUT", "/v1/admin/event-types/a.b", DEEP, 400, "invalid_request", "body"),
    ("POST", "/v1/admin/event-types/import", DEEP, 400, "invalid_request", "body"),
    ("POST", "/v1/admin/destinations",
     {"name": "x", "url": GOOD_URL, "filter": {"data.x": {"$gtx": 1}}}, 400,
     "invalid_request", "filter"),
    ("PATCH", "/v1/admin/destinations/d", {"filter": {"payload.x": 1}}, 400,
     "invalid_request", "filter"),
    ("PATCH", "/v1/admin/destinations/d", {"filter": [1]}, 400, "invalid_request", "filter"),
    ("POST", "/v1/admin/destinations/d/filter-test", {"filter": {"$eq": 1}}, 400,
     "invalid_request", "filter"),
    ("POST", "/v1/admin/destinations/d/filter-test", {"last": 0}, 400, "invalid_request",
     "last"),
    ("POST", "/v1/admin/destinations/d/filter-test", {"lats": 5}, 400, "invalid_request",
     "lats"),
    ("POST", "/v1/admin/destinations/d/test", {"type": "a b"}, 400, "invalid_request", "type"),
    ("POST", "/v1/admin/destinations/d/test?wait=maybe", {}, 400, "invalid_request", "wait"),
    ("POST", "/v1/admin/destinations/d/rotate-secret", {"overlap": 1}, 400, "invalid_request",
     "overlap"),
    ("POST", "/v1/admin/destinations/d/rotate-secret", {"overlap_s": -1}, 400,
     "invalid_request", "overlap_s"),
    ("POST", "/v1/admin/destinations/d/expire-previous-secret", {"now": True}, 400,
     "invalid_request", "now"),
    ("POST", "/v1/admin/sources", {"name": "_hookline", "scheme": "token"}, 400,
     "invalid_request", "name"),
    ("POST", "/v1/admin/sources", {"name": "a/b", "scheme": "token", "secret": "t" * 20}, 400,
     "invalid_request", "name"),
    ("POST", "/v1/admin/sources", {"name": "gh", "scheme": "gh", "secret": "t" * 20}, 400,
     "invalid_request", "scheme"),
    ("POST", "/v1/admin/sources", {"name": "gh", "scheme": "token", "token": "t" * 20}, 400,
     "invalid_request", "token"),
    ("GET", "/v1/admin/jobs?status=lost", None, 400, "invalid_request", "status"),
    ("GET", "/v1/admin/jobs?limit=0", None, 400, "invalid_request", "limit"),
    ("GET", "/v1/admin/jobs/abc", None, 400, "invalid_request", "id"),
    ("GET", "/v1/admin/jobs/99999999999999999999", None, 400, "invalid_request", "id"),
    ("GET", "/v1/admin/jobs/abc/event", None, 400, "invalid_request", "id"),
    ("GET", "/v1/admin/stats?tenant=a%20b", None, 400, "invalid_request", "tenant"),
    ("GET", "/v1/admin/jobs/1/event?max_bytes=many", None, 400, "invalid_request",
     "max_bytes"),
    ("GET", "/v1/admin/dead?since=never", None, 400, "invalid_request", "since"),
    ("GET", "/v1/admin/dead?limit=100000", None, 400, "invalid_request", "limit"),
    ("POST", "/v1/admin/replay", {}, 400, "invalid_request", "job_id"),
    ("POST", "/v1/admin/replay", {"job_id": "one"}, 400, "invalid_request", "job_id"),
    ("POST", "/v1/admin/replay", {"all_dead": "yes"}, 400, "invalid_request", "all_dead"),
    ("POST", "/v1/admin/replay", {"job_id": 1, "dry_run": 1}, 400, "invalid_request",
     "dry_run"),
    ("POST", "/v1/admin/replay", {"job_id": 1, "destination": "d"}, 400, "invalid_request",
     "destination"),
    ("POST", "/v1/admin/replay", {"all_dead": True, "since": "someday"}, 400,
     "invalid_request", "since"),
    ("POST", "/v1/admin/replay", {"job": 1}, 400, "invalid_request", "job"),
    ("POST", "/v1/admin/purge", {"bodies_older_than": "40d"}, 400, "invalid_request",
     "bodies_older_than"),
    ("POST", "/v1/admin/purge", {"dedupe_keep": "soon"}, 400, "invalid_request",
     "dedupe_keep"),
    ("POST", "/v1/admin/purge", {"older_than": "1d"}, 400, "invalid_request", "older_than"),
    # a destination filter naming none of the tenant's destinations: 404, never an empty
    # answer; bad input is refused before the lookup
    ("GET", "/v1/admin/dead?destination=nobody", None, 404, "not_found", "destination"),
    ("GET", "/v1/admin/dead?destination=d&tenant=t", None, 404, "not_found", "destination"),
    ("GET", "/v1/admin/dead?destination=nobody&limit=0", None, 400, "invalid_request",
     "limit"),
    ("GET", "/v1/admin/events?destination=nobody", None, 404, "not_found", "destination"),
    ("GET", "/v1/admin/events?destination=nobody&status=lost", None, 400, "invalid_request",
     "status"),
    ("GET", "/v1/admin/events?destination=nobody&since=1h&until=2h", None, 400,
     "invalid_request", "until"),
    ("POST", "/v1/admin/replay", {"all_dead": True, "destination": "nobody"}, 404, "not_found",
     "destination"),
    ("POST", "/v1/admin/replay", {"all_dead": True, "destination": "nobody", "since": "x"}, 400,
     "invalid_request", "since"),
    ("POST", "/v1/admin/resend", {"destination": "nobody"}, 404, "not_found", "destination"),
    ("POST", "/v1/admin/retry-now", {"destination": "d", "tenant": "t"}, 404, "not_found",
     "destination"),
    ("GET", "/v1/admin/events?status=lost", None, 400, "invalid_request", "status"),
    ("GET", "/v1/admin/events?limit=0", None, 400, "invalid_request", "limit"),
    ("GET", "/v1/admin/events?before=x", None, 400, "invalid_request", "before"),
    ("GET", "/v1/admin/dead?before=x", None, 400, "invalid_request", "before"),
    ("GET", "/v1/admin/jobs?before=0", None, 400, "invalid_request", "before"),
    ("GET", "/v1/admin/events?since=yesterday", None, 400, "invalid_request", "since"),
    ("GET", "/v1/admin/events?since=1h&until=2h", None, 400, "invalid_request", "until"),
    ("GET", "/v1/admin/events/" + "x" * 600, None, 400, "invalid_request", "ref"),
    ("GET", "/v1/admin/events/e1?source=" + "s" * 600, None, 400, "invalid_request", "source"),
    ("POST", "/v1/admin/resend", {}, 400, "invalid_request", "destination"),
    ("POST", "/v1/admin/resend", {"destination": "d", "status": "pending"}, 400,
     "invalid_request", "status"),
    ("POST", "/v1/admin/resend", {"destination": "d", "limit": 0}, 400, "invalid_request",
     "limit"),
    ("POST", "/v1/admin/resend", {"destination": "d", "since": "1h", "until": "2h"}, 400,
     "invalid_request", "until"),
    ("POST", "/v1/admin/resend", {"destination": "d", "bogus": 1}, 400, "invalid_request",
     "bogus"),
    ("POST", "/v1/admin/retry-now", {"destination": "d", "status": "done"}, 400,
     "invalid_request", "status"),
    ("POST", "/v1/admin/jobs/x/resend", None, 400, "invalid_request", "id"),
    ("POST", "/v1/admin/jobs/1/resend", {"dry_run": "yes"}, 400, "invalid_request", "dry_run"),
    ("POST", "/v1/admin/jobs/1/resend", {"reason": "x" * 1001}, 400, "invalid_request",
     "reason"),
    ("POST", "/v1/admin/jobs/1/retry-now", {"job": 1}, 400, "invalid_request", "job"),
    ("GET", "/v1/admin/destination-stats?window=soon", None, 400, "invalid_request", "window"),
    ("GET", "/v1/admin/metrics/destinations?after=-1", None, 400, "invalid_request", "after"),
    ("GET", "/v1/admin/metrics/destinations?limit=1001", None, 400, "invalid_request",
     "limit"),
    ("GET", "/v1/admin/throughput?bucket=0", None, 400, "invalid_request", "bucket"),
    ("GET", "/v1/admin/throughput?window=30d&bucket=1", None, 400, "invalid_request",
     "bucket"),
    ("PUT", "/v1/admin/tenants/_mine", {}, 400, "invalid_request", "id"),
    ("PUT", "/v1/admin/tenants/acme", {"max_destinations": -1}, 400, "invalid_request",
     "max_destinations"),
    ("PUT", "/v1/admin/tenants/acme", {"metadata": [1]}, 400, "invalid_request", "metadata"),
    ("PUT", "/v1/admin/tenants/acme", {"plan": "gold"}, 400, "invalid_request", "plan"),
    ("PUT", "/v1/admin/tenants/acme", {"adopt_history": "yes"}, 400, "invalid_request",
     "adopt_history"),
    ("PUT", "/v1/admin/tenants/_default", {"disabled": True}, 400, "invalid_request",
     "disabled"),
    ("GET", "/v1/admin/tenants?limit=0", None, 400, "invalid_request", "limit"),
    ("DELETE", "/v1/admin/tenants/t?dry_run=perhaps", None, 400, "invalid_request", "dry_run"),
    ("GET", "/v1/admin/destinations/d?tenant=a%20b", None, 400, "invalid_request", "tenant"),
    ("POST", "/v1/admin/destinations", {"name": "x", "url": GOOD_URL, "tenant": "_x"}, 400,
     "invalid_request", "tenant"),
    ("POST", "/v1/admin/tenants/t/tokens", {"ttl_s": 90000}, 400, "invalid_request", "ttl_s"),
    ("POST", "/v1/admin/tenants/t/tokens", {"capabilities": ["fly"]}, 400, "invalid_request",
     "capabilities"),
    ("POST", "/v1/admin/tenants/t/tokens", {"read_only": "no"}, 400, "invalid_request",
     "read_only"),
    # the event-type catalogue (the fixture's holds invoice.paid)
    ("PUT", "/v1/admin/event-types/a*b", {}, 400, "invalid_request", "name"),
    ("PUT", "/v1/admin/event-types/x", b"[1]", 400, "invalid_request", "body"),
    ("PUT", "/v1/admin/event-types/x", {"colour": 1}, 400, "invalid_request", "colour"),
    ("PUT", "/v1/admin/event-types/x", {"name": "y"}, 400, "invalid_request", "name"),
    ("PUT", "/v1/admin/event-types/x", {"validation": "loud"}, 400, "invalid_request",
     "validation"),
    ("PUT", "/v1/admin/event-types/x", {"validation": "reject"}, 400, "invalid_request",
     "validation"),
    ("PUT", "/v1/admin/event-types/x", {"schemas": {"one": {}}}, 400, "invalid_request",
     "schemas.one"),
    ("PUT", "/v1/admin/event-types/x", {"schemas": {"01": {}, "1": {}}}, 400,
     "invalid_request", "schemas.01"),
    ("PUT", "/v1/admin/event-types/x", {"schemas": {"1": {"type": 12}}}, 400,
     "invalid_request", "schemas.1"),
    ("PUT", "/v1/admin/event-types/x", {"schemas": {"1": {"$ref": "#/$defs/none"}}}, 400,
     "invalid_request", "schemas.1"),
    ("PUT", "/v1/admin/event-types/x", {"schemas": {"1": {"type": "integer"}},
                                        "examples": {"1": "ten"}}, 400, "invalid_request",
     "examples.1"),
    ("PUT", "/v1/admin/event-types/x", {"examples": {"2": 1}}, 400, "invalid_request",
     "examples.2"),
    ("PUT", "/v1/admin/event-types/x", {"deprecated": "yes"}, 400, "invalid_request",
     "deprecated"),
    ("POST", "/v1/admin/event-types/invoice.paid/archive", {"archived": "yes"}, 400,
     "invalid_request", "archived"),
    ("POST", "/v1/admin/event-types/import", {"openapi": "3.0.3", "webhooks": {}}, 400,
     "invalid_request", "openapi"),
    ("POST", "/v1/admin/event-types/import", {"openapi": "3.1.0"}, 400, "invalid_request",
     "webhooks"),
    ("POST", "/v1/admin/event-types/import", {"openapi": "3.1.0", "webhooks": {"a": {}}}, 400,
     "invalid_request", "webhooks.a"),
    ("POST", "/v1/admin/destinations", {"name": "x", "url": GOOD_URL,
                                        "event_types": ["invoice.payed"]}, 422,
     "unknown_event_type", "event_types"),
    ("PATCH", "/v1/admin/destinations/d", {"event_types": ["user.*"]}, 422,
     "unknown_event_type", "event_types"),
]


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    """The ingest app with the admin token, on a store holding destination `d`."""
    await real_store.add_destination(name="d", url=GOOD_URL, secret=SECRET,
                                     event_types=["*"], max_in_flight=1)
    await real_store.put_tenant("t", TenantFields())
    await real_store.put_event_types([event_type_fields("invoice.paid", {})])
    app = build_app(real_store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


@pytest.mark.sqlite_only  # the rules run before the store; one backend shows them
@pytest.mark.parametrize(("method", "path", "body", "status", "code", "field"), BAD_INPUTS,
                         ids=[f"{m} {p[:60]} {f}" for m, p, _, _, _, f in BAD_INPUTS])
async def test_bad_admin_input_names_its_field(client: TestClient[Any, Any], method: str,
                                               path: str, body: Any, status: int, code: str,
                                               field: str) -> None:
    """The answer is the 4xx with its code, `field` naming the input, and a detail that
    starts with the field (the rule book's one message)."""
    sent: dict[str, Any] = ({"data": body} if isinstance(body, bytes)
                            else {} if body is None else {"json": body})
    async with client.request(method, path, headers=AUTH, **sent) as resp:
        answer = await resp.json()
        assert (resp.status, answer["error"]) == (status, code), answer
    assert answer.get("field") == field, answer
    if code == "invalid_request":
        assert answer["detail"].startswith(f"{field}: "), answer


# The tenant API's routes, with a valid tenant token of tenant `t` (which owns destination d).
BAD_TENANT_INPUTS: list[tuple[str, str, Any, int, str, str]] = [
    ("POST", "/v1/tenant/destinations", {"name": "x", "url": "ftp://x/"}, 400,
     "invalid_request", "url"),
    *[("POST", "/v1/tenant/destinations", {"name": "x", "url": url}, 400, "invalid_request",
       "url") for url in UNREACHABLE_URLS],
    ("POST", "/v1/tenant/destinations", {"name": "x", "url": GOOD_URL, "tenant": "t"}, 400,
     "invalid_request", "tenant"),
    ("PATCH", "/v1/tenant/destinations/d", {"max_in_flight": 0}, 400, "invalid_request",
     "max_in_flight"),
    ("POST", "/v1/tenant/destinations/d/rotate-secret", {"overlap_s": -1}, 400,
     "invalid_request", "overlap_s"),
    ("GET", "/v1/tenant/destinations/d/stats?window_s=0", None, 400, "invalid_request",
     "window_s"),
    ("PATCH", "/v1/tenant/destinations/d", {"filter": {"data.a": {"$in": 3}}}, 400,
     "invalid_request", "filter"),
    ("POST", "/v1/tenant/destinations/d/filter-test", {"filter": {"tenant.name": 1}}, 400,
     "invalid_request", "filter"),
    ("POST", "/v1/tenant/destinations/d/test", {"type": 5}, 400, "invalid_request", "type"),
    ("POST", "/v1/tenant/destinations/d/test", {"type": "\ud800"}, 400, "invalid_request",
     "body"),
    ("PATCH", "/v1/tenant/destinations/d", DEEP, 400, "invalid_request", "body"),
    ("POST", "/v1/tenant/destinations/d/recover", {"since": "never"}, 400, "invalid_request",
     "since"),
    ("GET", "/v1/tenant/jobs?status=lost", None, 400, "invalid_request", "status"),
    ("GET", "/v1/tenant/jobs/abc", None, 400, "invalid_request", "id"),
    ("GET", "/v1/tenant/jobs/abc/event", None, 400, "invalid_request", "id"),
    ("GET", "/v1/tenant/jobs/1/event?max_bytes=many", None, 400, "invalid_request",
     "max_bytes"),
    ("GET", "/v1/tenant/events?limit=0", None, 400, "invalid_request", "limit"),
    ("GET", "/v1/tenant/events?destination=nobody", None, 404, "not_found", "destination"),
    ("GET", "/v1/tenant/events?destination=nobody&limit=0", None, 400, "invalid_request",
     "limit"),
    ("GET", "/v1/tenant/jobs?destination=nobody", None, 404, "not_found", "destination"),
    ("GET", "/v1/tenant/jobs?destination=nobody&status=lost", None, 400, "invalid_request",
     "status"),
    ("POST", "/v1/tenant/jobs/1/resend", {"dry_run": "yes"}, 400, "invalid_request",
     "dry_run"),
    ("POST", "/v1/tenant/destinations", {"name": "x", "url": GOOD_URL,
                                         "event_types": ["invoice.payed"]}, 422,
     "unknown_event_type", "event_types"),
]


@pytest.mark.sqlite_only  # the rules run before the store; one backend shows them
@pytest.mark.parametrize(("method", "path", "body", "status", "code", "field"),
                         BAD_TENANT_INPUTS,
                         ids=[f"{m} {p[:60]} {f}" for m, p, _, _, _, f in BAD_TENANT_INPUTS])
async def test_bad_tenant_input_names_its_field(real_store: Store, method: str, path: str,
                                                body: Any, status: int, code: str,
                                                field: str) -> None:
    """The tenant API names the field of every bad input as the admin API does (a 404's
    detail names the missing destination; the others start with the field)."""
    await real_store.put_tenant("t", TenantFields())
    await real_store.add_destination(name="d", url=GOOD_URL, secret=SECRET,
                                     event_types=["*"], max_in_flight=1, tenant="t")
    await real_store.put_event_types([event_type_fields("invoice.paid", {})])
    app = build_app(real_store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        async with c.post("/v1/admin/tenants/t/tokens", json={}, headers=AUTH) as minted:
            token = (await minted.json())["token"]
        sent: dict[str, Any] = {"data": body} if isinstance(body, bytes) else {"json": body}
        async with c.request(method, path, **sent,
                             headers={"Authorization": f"Bearer {token}"}) as resp:
            answer = await resp.json()
    assert (resp.status, answer.get("error"), answer.get("field")) == (status, code, field), \
        answer
    if status == 404:
        assert answer["detail"] == "no destination named 'nobody'", answer["detail"]
    else:
        assert answer["detail"].startswith(field), answer["detail"]

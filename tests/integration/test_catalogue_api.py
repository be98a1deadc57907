"""The event-type catalogue through the real ingest app on 127.0.0.1 (each backend in turn):
its admin CRUD, subscriptions that cannot silently miss (admin and tenant API), validation at
publish (reject, warn, a named schema version, a rejected event beside accepted ones of the
same group commit), the tenant list, and the OpenAPI import/export round trip."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields

TOKEN = "t0ken-for-tests"
INGEST = "ingest-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
URL = "http://127.0.0.1:9/h"
AMOUNT = {"type": "object", "properties": {"amount": {"type": "integer", "minimum": 0},
                                           "currency": {"type": "string"}},
          "required": ["amount"]}


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=TOKEN, ingest_token=INGEST,
                                       allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def call(client: TestClient[Any, Any], method: str, path: str, *,
               token: str = TOKEN, **kwargs: Any) -> tuple[int, Any]:
    async with client.request(method, path, headers={"Authorization": f"Bearer {token}"},
                              **kwargs) as resp:
        return resp.status, await resp.json()


async def publish(client: TestClient[Any, Any], event_id: str, event_type: str, data: Any,
                  **extra: Any) -> tuple[int, Any]:
    return await call(client, "POST", "/v1/events", token=INGEST,
                      json={"id": event_id, "type": event_type, "data": data, **extra})


async def put_type(client: TestClient[Any, Any], name: str, **body: Any) -> tuple[int, Any]:
    return await call(client, "PUT", f"/v1/admin/event-types/{name}", json=body)


async def test_crud_and_an_empty_catalogue_changes_nothing(client):
    # Empty: any subscription and any payload, as before the catalogue.
    status, _ = await call(client, "POST", "/v1/admin/destinations",
                           json={"name": "any", "url": URL, "event_types": ["whatever.*"]})
    assert status == 201
    assert (await publish(client, "e0", "invoice.paid", {"amount": "lots"}))[0] == 202

    status, created = await put_type(client, "invoice.paid", description="paid",
                                     schemas={"1": AMOUNT}, examples={"1": {"amount": 5}},
                                     validation="reject")
    assert status == 201
    assert (created["name"], created["latest_version"], created["schemas"]["1"],
            created["examples"]["1"]) == ("invoice.paid", 1, AMOUNT, {"amount": 5})
    status, replaced = await put_type(client, "invoice.paid", description="paid, v2",
                                      schemas={"1": AMOUNT, "2": {**AMOUNT, "required": [
                                          "amount", "currency"]}}, validation="reject")
    assert status == 200 and replaced["latest_version"] == 2
    status, listed = await call(client, "GET", "/v1/admin/event-types")
    assert [t["name"] for t in listed["event_types"]] == ["invoice.paid"]
    status, archived = await call(client, "POST", "/v1/admin/event-types/invoice.paid/archive")
    assert status == 200 and archived["archived"]
    status, _ = await call(client, "DELETE", "/v1/admin/event-types/invoice.paid")
    assert status == 200
    status, gone = await call(client, "GET", "/v1/admin/event-types/invoice.paid")
    assert status == 404 and "invoice.paid" in gone["detail"]


async def test_subscriptions_must_match_the_catalogue(client, real_store: Store):
    await put_type(client, "invoice.paid")
    await put_type(client, "invoice.voided", deprecated=True)
    await put_type(client, "user.created", archived=True)
    dest = {"name": "d", "url": URL}
    status, refused = await call(client, "POST", "/v1/admin/destinations",
                                 json={**dest, "event_types": ["invoice.payed"]})
    assert (status, refused["error"], refused["field"], refused["event_type"],
            refused["nearest"]) == (422, "unknown_event_type", "event_types",
                                    "invoice.payed", "invoice.paid")
    assert "did you mean 'invoice.paid'" in refused["detail"]
    status, refused = await call(client, "POST", "/v1/admin/destinations",
                                 json={**dest, "event_types": ["user.created"]})
    assert (status, refused["error"]) == (422, "event_type_archived")
    status, refused = await call(client, "POST", "/v1/admin/destinations",
                                 json={**dest, "event_types": ["user.*"]})
    assert (status, refused["error"]) == (422, "event_type_archived")
    status, added = await call(client, "POST", "/v1/admin/destinations",
                               json={**dest, "event_types": ["invoice.*", "invoice.voided"]})
    assert status == 201 and added["warnings"] == ["event type 'invoice.voided' is deprecated"]
    status, changed = await call(client, "PATCH", "/v1/admin/destinations/d",
                                 json={"event_types": ["*"]})
    assert status == 200 and "warnings" not in changed
    status, refused = await call(client, "PATCH", "/v1/admin/destinations/d",
                                 json={"event_types": ["invoices.paid"]})
    assert (status, refused["nearest"]) == (422, "invoice.paid")

    # hookline's own operational events are not the catalogue's: always subscribable (a
    # misspelt one names the nearest), and the catalogue refuses the reserved namespace.
    for patterns in (["hookline.*"], ["hookline.destination.*", "invoice.paid"],
                     ["hookline.destination.failing"]):
        status, changed = await call(client, "PATCH", "/v1/admin/destinations/d",
                                     json={"event_types": patterns})
        assert status == 200 and changed["event_types"] == patterns, changed
    status, refused = await call(client, "PATCH", "/v1/admin/destinations/d",
                                 json={"event_types": ["hookline.destination.failng"]})
    assert (status, refused["error"], refused["nearest"]) == (
        422, "unknown_event_type", "hookline.destination.failing")
    status, refused = await call(client, "PUT", "/v1/admin/event-types/hookline.mine", json={})
    assert (status, refused["field"]) == (400, "name") and "reserved" in refused["detail"]

    # The tenant API goes through the same check, and lists the catalogue (archived hidden).
    await real_store.put_tenant("t", TenantFields())
    _, minted = await call(client, "POST", "/v1/admin/tenants/t/tokens", json={})
    status, refused = await call(client, "POST", "/v1/tenant/destinations",
                                 token=minted["token"],
                                 json={**dest, "event_types": ["invoice.payed"]})
    assert (status, refused["error"]) == (422, "unknown_event_type")
    status, listed = await call(client, "GET", "/v1/tenant/event-types",
                                token=minted["token"])
    assert status == 200 and listed["source"] == "catalogue"
    assert listed["event_types"] == ["invoice.paid", "invoice.voided"]
    assert [t["deprecated"] for t in listed["catalogue"]] == [False, True]


async def test_validation_at_publish(client, real_store: Store):
    await put_type(client, "invoice.paid", schemas={"1": AMOUNT, "2": {
        **AMOUNT, "required": ["amount", "currency"]}}, validation="reject")
    await put_type(client, "invoice.voided", schemas={"1": AMOUNT}, validation="warn")
    await call(client, "POST", "/v1/admin/destinations", json={"name": "d", "url": URL})

    status, refused = await publish(client, "r1", "invoice.paid", {"amount": -1,
                                                                   "currency": "EUR"})
    assert (status, refused["error"], refused["pointer"], refused["keyword"],
            refused["schema_version"]) == (400, "schema_mismatch", "/data/amount", "minimum", 2)
    # The latest version applies unless the event names one.
    status, refused = await publish(client, "r2", "invoice.paid", {"amount": 1})
    assert (status, refused["keyword"]) == (400, "required")
    assert (await publish(client, "r2", "invoice.paid", {"amount": 1},
                          schema_version=1))[0] == 202
    status, refused = await publish(client, "r3", "invoice.paid", {"amount": 1},
                                    schema_version=7)
    assert (status, refused["error"], refused["field"]) == (400, "invalid_event",
                                                            "schema_version")
    # Nothing of a rejected event is stored; its id stays free.
    assert (await publish(client, "r1", "invoice.paid", {"amount": 1, "currency": "EUR"}))[
        0] == 202

    # One group commit: the bad event is refused, the others of the batch are stored.
    answers = await asyncio.gather(*(
        publish(client, f"b{i}", "invoice.paid",
                {"amount": "x" if i == 3 else i, "currency": "EUR"}) for i in range(8)))
    assert [s for s, _ in answers] == [202] * 3 + [400] + [202] * 4

    # warn: accepted, marked and counted.
    status, accepted = await publish(client, "w1", "invoice.voided", {"amount": "ten"})
    assert status == 202 and accepted["jobs"] == 1
    match = await real_store.find_event(accepted["message_id"])
    assert match.event.schema_problem == (
        'v1 /data/amount fails `type`: "ten" is not of type "integer"')
    _, shown = await call(client, "GET", f"/v1/admin/events/{accepted['message_id']}")
    assert shown["schema_problem"].startswith("v1 /data/amount")
    async with client.get("/metrics", headers=AUTH) as resp:
        text = await resp.text()
    assert ('hookline_ingest_schema_mismatches_total{type="invoice.voided",validation="warn"} '
            '1.0') in text
    assert ('hookline_ingest_schema_mismatches_total{type="invoice.paid",validation="reject"} '
            '3.0') in text


OPENAPI = {
    "openapi": "3.1.0", "info": {"title": "Acme webhooks", "version": "1"},
    "components": {"schemas": {"Money": {"type": "object", "properties": {
        "amount": {"type": "integer"}}, "required": ["amount"]}}},
    "webhooks": {
        "invoice.paid": {"post": {"description": "an invoice was paid", "requestBody": {
            "content": {"application/json": {
                "schema": {"type": "object", "properties": {
                    "type": {"type": "string"}, "data": {"$ref": "#/components/schemas/Money"}}},
                "example": {"type": "invoice.paid", "data": {"amount": 3}}}}}}},
        "user.deleted": {"post": {"deprecated": True, "requestBody": {"content": {
            "application/json": {"schema": {"type": "object"}}}}}},
    }}


async def test_import_then_export_round_trip(client):
    status, outcome = await call(client, "POST", "/v1/admin/event-types/import", json=OPENAPI)
    assert status == 200 and outcome == {"created": ["invoice.paid", "user.deleted"],
                                         "new_version": [], "unchanged": []}
    _, paid = await call(client, "GET", "/v1/admin/event-types/invoice.paid")
    assert paid["description"] == "an invoice was paid" and paid["examples"]["1"] == {
        "amount": 3}
    assert paid["schemas"]["1"]["$ref"] == "#/$defs/Money"
    _, document = await call(client, "GET", "/v1/admin/event-types/export")
    assert document["openapi"].startswith("3.1") and document["webhooks"]["user.deleted"][
        "post"]["deprecated"]
    # Importing the export again changes nothing.
    status, outcome = await call(client, "POST", "/v1/admin/event-types/import",
                                 json=document)
    assert outcome == {"created": [], "new_version": [],
                       "unchanged": ["invoice.paid", "user.deleted"]}
    # A changed schema becomes the next version.
    document["webhooks"]["user.deleted"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]["properties"]["data"] = {"type": "object",
                                                               "required": ["id"]}
    _, outcome = await call(client, "POST", "/v1/admin/event-types/import", json=document)
    assert outcome["new_version"] == ["user.deleted"]
    _, deleted = await call(client, "GET", "/v1/admin/event-types/user.deleted")
    assert deleted["latest_version"] == 2


@pytest.mark.sqlite_only  # the schema rules run before the store
async def test_a_remote_ref_is_refused_not_fetched(client):
    """A `$ref` to a URL would be fetched by the admin API's host (and by every ingest that
    compiles it): refused as a schema that does not stand alone, with no request made."""
    fetched: list[str] = []

    class Schemas(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Schemas)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/amount.json"
        status, refused = await put_type(client, "invoice.paid", schemas={"1": {"$ref": url}})
    finally:
        server.shutdown()
        server.server_close()
    assert (status, refused["field"]) == (400, "schemas.1"), refused
    assert "remote references are not fetched" in refused["detail"]
    assert fetched == []

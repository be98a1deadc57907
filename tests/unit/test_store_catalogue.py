"""The event-type catalogue in the store (migration 015), on both backends: types with
versioned schemas and examples, the change counter ingest polls, archive and removal, and
warn mode's mark on a stored event."""

from __future__ import annotations

import json

import pytest

from hookline.shared.catalogue import EventType, event_type_fields
from hookline.shared.errors import NotFound
from hookline.shared.models import Accepted, NewEvent
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields

INVOICE_V1 = {"type": "object", "properties": {"amount": {"type": "integer"}},
              "required": ["amount"]}
INVOICE_V2 = {**INVOICE_V1, "properties": {"amount": {"type": "integer"},
                                           "currency": {"type": "string"}}}


def invoice_paid(**extra: object) -> EventType:
    return event_type_fields("invoice.paid", {
        "description": "an invoice was paid", "schemas": {"1": INVOICE_V1, "2": INVOICE_V2},
        "examples": {"2": {"amount": 100, "currency": "EUR"}}, "validation": "reject",
        **extra})


async def test_put_list_get_and_the_revision(store: Store) -> None:
    assert await store.list_event_types() == []
    start = await store.catalogue_revision()
    [(stored, created)] = await store.put_event_types([invoice_paid()])
    assert created and stored.latest_version == 2
    assert stored.schemas == {1: INVOICE_V1, 2: INVOICE_V2}
    assert stored.examples == {2: {"amount": 100, "currency": "EUR"}}
    assert stored.validation == "reject" and not stored.deprecated and not stored.archived
    assert await store.catalogue_revision() == start + 1
    # Replacing keeps created_at, replaces the versions and counts another change.
    [(again, created)] = await store.put_event_types([invoice_paid(
        schemas={"1": INVOICE_V1}, examples={}, deprecated=True)])
    assert not created and again.schemas == {1: INVOICE_V1} and again.examples == {}
    assert again.deprecated and again.created_at == stored.created_at
    assert await store.catalogue_revision() == start + 2
    assert [t.name for t in await store.list_event_types()] == ["invoice.paid"]
    assert (await store.get_event_type("invoice.paid")).deprecated


async def test_archive_and_remove(store: Store) -> None:
    await store.put_event_types([invoice_paid(), event_type_fields("user.created", {})])
    archived = await store.archive_event_type("invoice.paid")
    assert archived.archived and archived.schemas  # its schemas stay
    assert not (await store.archive_event_type("invoice.paid", archived=False)).archived
    await store.remove_event_type("invoice.paid")
    assert [t.name for t in await store.list_event_types()] == ["user.created"]
    with pytest.raises(NotFound, match=r"invoice\.paid"):
        await store.get_event_type("invoice.paid")
    with pytest.raises(NotFound):
        await store.remove_event_type("invoice.paid")
    with pytest.raises(NotFound):
        await store.archive_event_type("nope")


async def test_an_event_keeps_its_schema_mark(store: Store) -> None:
    [result] = await store.add_events([NewEvent(
        source="api", source_event_id="e1", type="invoice.paid", body=b'{"x": 1}',
        schema_problem="v1 /data/amount fails `required`")])
    assert isinstance(result, Accepted)
    match = await store.find_event(result.message_id)
    assert match.event.schema_problem == "v1 /data/amount fails `required`"


async def test_a_test_delivery_sends_the_catalogue_example(store: Store) -> None:
    """A test delivery sends the catalogue's example of a type the destination subscribes to
    (its latest version that has one); a type asked for without an example, or a
    destination subscribed to no catalogue type, gets the `hookline.ping` data."""
    await store.put_event_types([invoice_paid(), event_type_fields("user.created", {})])
    for name, patterns in (("billing", ["invoice.*"]), ("users", ["user.*"])):
        await store.add_destination(name=name, url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0",
                                    event_types=patterns, max_in_flight=1)

    async def sent(name: str, event_type: str | None = None) -> tuple[str, dict[str, object]]:
        test = await store.send_test_event(name, tenant="_default", event_type=event_type)
        body = json.loads((await store.event_body(test.job_id, 65536)).head)
        assert body["test"] is True and body["type"] == test.type
        return test.type, body["data"]

    assert await sent("billing") == ("invoice.paid", {"amount": 100, "currency": "EUR"})
    assert await sent("billing", "invoice.paid") == ("invoice.paid",
                                                     {"amount": 100, "currency": "EUR"})
    kind, data = await sent("users")  # user.created has no example
    assert kind == "hookline.ping" and data["destination"] == "users"
    kind, data = await sent("users", "user.created")
    assert kind == "user.created" and data["destination"] == "users"
    await store.archive_event_type("invoice.paid")  # archived: never chosen
    assert (await sent("billing"))[0] == "hookline.ping"


async def test_a_tenants_test_delivery_names_the_tenant_as_its_events_do(store: Store) -> None:
    """A test event for a tenant's destination carries `tenant` in its body, like the
    events published for that tenant (a receiver routing by it sees the ping too); the
    default tenant's carries none, like events published without one."""
    await store.put_tenant("acme", TenantFields())
    for tenant in ("acme", "_default"):
        await store.add_destination(name="billing", url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0",
                                    event_types=["*"], max_in_flight=1, tenant=tenant)
    acme = await store.send_test_event("billing", tenant="acme", event_type=None)
    ours = await store.send_test_event("billing", tenant="_default", event_type=None)
    bodies = [json.loads((await store.event_body(t.job_id, 65536)).head) for t in (acme, ours)]
    assert (bodies[0]["tenant"], bodies[0]["test"]) == ("acme", True)
    assert "tenant" not in bodies[1] and bodies[1]["test"] is True

"""The receiver kit's optional payload check (hookline_client.validate_payload) against the
catalogue's export: with a validator the application passes (jsonschema-rs here), and with
the `jsonschema` package the kit imports when none is passed."""

from __future__ import annotations

import json

import jsonschema_rs
import pytest
from hookline_client import PayloadInvalid, validate_payload, webhook_schemas

from hookline.shared.catalogue import event_type_fields
from hookline.shared.catalogue_openapi import export_openapi

AMOUNT = {"type": "object", "properties": {"amount": {"type": "integer", "minimum": 1}},
          "required": ["amount"], "$defs": {"unused": {"type": "string"}}}
SCHEMAS = webhook_schemas(json.loads(json.dumps(export_openapi([
    event_type_fields("invoice.paid", {"schemas": {"1": AMOUNT}})]))))


def body(data: object, event_type: str = "invoice.paid") -> bytes:
    return json.dumps({"id": "e1", "type": event_type, "data": data}).encode()


def rs_validator(schema: object, document: object) -> None:
    jsonschema_rs.validate(schema, document)


@pytest.mark.parametrize("validator", [rs_validator, None], ids=["jsonschema-rs", "jsonschema"])
def test_a_payload_is_checked_against_its_type(validator):
    assert validate_payload(body({"amount": 3}), SCHEMAS, validator=validator)["data"] == {
        "amount": 3}
    with pytest.raises(PayloadInvalid) as info:
        validate_payload(body({"amount": 0}), SCHEMAS, validator=validator)
    assert (info.value.event_type, info.value.pointer) == ("invoice.paid", "/data/amount")
    with pytest.raises(PayloadInvalid):
        validate_payload(body({"total": 3}), SCHEMAS, validator=validator)


def test_a_type_without_a_schema_passes_and_a_non_object_is_refused():
    assert validate_payload(body("anything", "user.created"), SCHEMAS)["type"] == "user.created"
    with pytest.raises(PayloadInvalid):
        validate_payload(b"[1]", SCHEMAS)
    for not_json in (b"not json", b"", b'{"type": "\xff"}', b"[" * 100_000):
        with pytest.raises(PayloadInvalid) as info:
            validate_payload(not_json, SCHEMAS)
        assert info.value.event_type == "?", info.value
    with pytest.raises(ValueError, match="webhooks"):
        webhook_schemas({"openapi": "3.1.0"})

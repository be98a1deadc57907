"""hookline.ingest.validation.parse_event: every rule of the POST /v1/events envelope, without a
socket."""

from __future__ import annotations

import json

import pytest

from hookline.ingest.validation import BodyTooLarge, parse_event, parse_published
from hookline.shared.errors import InvalidEvent, InvalidInput
from hookline.shared.policy.inputs import MAX_JSON_DEPTH as MAX_DEPTH
from hookline.shared.policy.inputs import json_document

LIMIT = 1024 * 1024


def rejected(body: bytes, limit: int = LIMIT) -> InvalidEvent:
    """Parse `body`, expecting a rejection; return the error."""
    with pytest.raises(InvalidEvent) as info:
        parse_event(body, limit)
    return info.value


def envelope(**fields: object) -> bytes:
    base: dict[str, object] = {"id": "evt_1", "type": "invoice.paid", "data": {"n": 1}}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}).encode()


def test_valid_event_keeps_exact_bytes_and_defaults_source_to_api():
    """A valid body becomes a NewEvent whose body is the very bytes received."""
    body = '  {"type":"a.b",  "data": {"z": 1, "a": "é"}, "id": "evt_1"}\n'.encode()
    event = parse_event(body, LIMIT)
    assert event.body == body
    assert (event.source, event.source_event_id, event.type) == ("api", "evt_1", "a.b")


def test_explicit_source_is_used():
    """`source` given in the body becomes the event's source."""
    assert parse_event(envelope(source="github"), LIMIT).source == "github"


@pytest.mark.parametrize("data", [None, 0, "x", [], {}, [1, [2, {"a": None}]]])
def test_data_may_be_any_json_value(data: object):
    """`data` is required but may be any JSON value, null included."""
    assert parse_event(envelope(data=data), LIMIT).type == "invoice.paid"


def test_non_utf8_bytes_are_rejected():
    """Bytes that are not UTF-8 are refused, naming the body."""
    err = rejected(b'{"id": "e", "type": "t", "data": "\xff\xfe"}')
    assert err.field == "body" and "UTF-8" in err.detail


@pytest.mark.parametrize("body", [b"", b"   \n", b"not json", b'{"id": "e"', b"{'id': 1}"])
def test_empty_or_malformed_json_is_rejected(body: bytes):
    """Empty bodies and text that is not JSON are refused, naming the body."""
    assert rejected(body).field == "body"


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_standard_number_constants_are_rejected(constant: bytes):
    """NaN and Infinity are not JSON, whatever Python's json module tolerates."""
    err = rejected(b'{"id": "e", "type": "t", "data": ' + constant + b"}")
    assert err.field == "body" and "not valid JSON" in err.detail


@pytest.mark.parametrize("body", [b"[]", b'[{"id": "e", "type": "t", "data": 1}]', b'"x"',
                                  b"42", b"null", b"true"])
def test_top_level_must_be_an_object(body: bytes):
    """An array or scalar at the top level is refused."""
    err = rejected(body)
    assert err.field == "body" and "JSON object" in err.detail


@pytest.mark.parametrize("missing", ["id", "type", "data"])
def test_required_keys(missing: str):
    """Each of id, type and data is required, and the error names it."""
    err = rejected(envelope(**{missing: ...}))
    assert err.field == missing and "required" in err.detail


def test_unknown_top_level_keys_are_named():
    """Keys outside id/type/data/source are refused, and the detail names them all."""
    err = rejected(envelope(extra=1, other=2))
    assert err.field == "extra"
    assert "'extra'" in err.detail and "'other'" in err.detail


def test_many_or_huge_unknown_keys_are_echoed_capped():
    """Client-chosen key names appear in the error only capped in length and number."""
    err = rejected(envelope(**{"k" * 100_000: 1}, **{f"x{i}": i for i in range(1000)}))
    assert len(err.field) <= 40 and len(err.detail) < 400
    assert "and 996 more" in err.detail


def test_repeated_top_level_key_is_rejected():
    """A key given twice at the top level is refused (parsers disagree on which wins)."""
    err = rejected(b'{"id": "a", "type": "t", "data": 1, "id": "b"}')
    assert err.field == "id" and "more than once" in err.detail


def test_repeated_key_inside_data_is_left_alone():
    """Inside `data` the bytes are the sender's business: a repeated key there is kept."""
    body = b'{"id": "a", "type": "t", "data": {"k": 1, "k": 2}}'
    assert parse_event(body, LIMIT).body == body


@pytest.mark.parametrize("value", [1, 1.5, None, True, ["e"], {"e": 1}])
def test_id_must_be_a_string(value: object):
    """A number (or any non-string) id is refused."""
    err = rejected(envelope(id=value))
    assert err.field == "id" and "must be a string" in err.detail


@pytest.mark.parametrize("value", ["evt.1", "", "a b", "é", "x" * 129, "a\n", "a/b"])
def test_id_charset_and_length(value: str):
    """An id with a dot, a space, non-ASCII, a newline, or over 128 characters is refused."""
    assert rejected(envelope(id=value)).field == "id"


def test_id_at_the_limits_is_accepted():
    """Ids of 1 and 128 characters from the allowed alphabet pass."""
    for value in ("a", "A-z_0:9" + "x" * 121):
        assert parse_event(envelope(id=value), LIMIT).source_event_id == value


@pytest.mark.parametrize("value", ["", "a b", "a\tb", "a\x00b", "t\n", "x" * 129, "é"])
def test_type_is_a_strict_token(value: str):
    """A type with whitespace or control characters, empty, or over 128 characters is refused."""
    assert rejected(envelope(type=value)).field == "type"


def test_huge_type_is_refused_without_echoing_it():
    """A megabyte-long type is refused and the detail does not repeat it."""
    err = rejected(envelope(type="t" * 500_000))
    assert err.field == "type" and len(err.detail) < 200


def test_type_must_be_a_string():
    """A non-string type is refused."""
    assert rejected(envelope(type=7)).field == "type"


@pytest.mark.parametrize("value", ["", "a.b", "a b", "x" * 65, None, 3])
def test_source_rules(value: object):
    """A source that is not a 1-64 character token of [A-Za-z0-9_-] is refused."""
    assert rejected(envelope(source=value)).field == "source"


@pytest.mark.parametrize("value", ["_test", "_hookline", "_mine"])
def test_sources_hookline_makes_itself_are_reserved(value: str):
    """A publisher cannot post as hookline's own sources (tenants would see its event as a
    test delivery or an operational event); a `_` inside a name is fine."""
    error = rejected(envelope(source=value))
    assert error.field == "source" and "hookline's own" in str(error)
    assert parse_event(envelope(source="my_app"), LIMIT).source == "my_app"


def test_nesting_up_to_the_limit_is_accepted():
    """Exactly MAX_DEPTH levels (the envelope is level 1) pass."""
    data = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    body = b'{"id": "e", "type": "t", "data": ' + data.encode() + b"}"
    assert parse_event(body, LIMIT).body == body


def test_nesting_past_the_limit_is_rejected():
    """One level more than MAX_DEPTH is refused."""
    data = '{"a": ' * MAX_DEPTH + "1" + "}" * MAX_DEPTH
    err = rejected(b'{"id": "e", "type": "t", "data": ' + data.encode() + b"}")
    assert err.field == "body" and "nested deeper" in err.detail


def test_an_integer_too_long_to_convert_is_refused_in_our_words():
    """A 5,000-digit integer (past the interpreter's 4,300) is refused naming the limit and
    what to send instead, not with the interpreter's advice to raise its limit; the admin
    API's and the CLI's parser says the same."""
    digits = b"1" * 5000
    err = rejected(b'{"id": "e", "type": "t", "data": ' + digits + b"}")
    assert err.field == "body" and err.detail == (
        "holds an integer of more than 4,300 digits (send a number that long as a string)")
    with pytest.raises(InvalidInput) as refused:
        json_document("body", b'{"n": ' + digits + b"}")
    assert str(refused.value) == f"body: {err.detail}"


def test_pathological_nesting_does_not_crash():
    """Half a million open brackets are refused cleanly (no RecursionError, no crash)."""
    err = rejected(b"[" * 500_000)
    assert err.field == "body"


def test_brackets_inside_strings_do_not_count_as_nesting():
    """Brackets within string values are text, not structure."""
    body = json.dumps({"id": "e", "type": "t", "data": "[{" * 1000}).encode()
    assert parse_event(body, LIMIT).body == body


def test_body_over_the_limit_is_too_large():
    """A body longer than max_body_bytes raises BodyTooLarge (answered 413, not 400)."""
    body = envelope(data="x" * 100)
    with pytest.raises(BodyTooLarge):
        parse_event(body, len(body) - 1)
    assert parse_event(body, len(body)).body == body


@pytest.mark.parametrize("version", ["1", 0, 1.5, True, 10_001])
def test_a_schema_version_must_be_a_whole_number(version: object):
    """`schema_version` (the catalogue schema version `data` follows) is 1..10000."""
    assert rejected(envelope(schema_version=version)).field == "schema_version"


def test_a_schema_version_is_given_with_the_data():
    """The parsed `data` and the named version come with the event, for the catalogue."""
    event, data, version = parse_published(envelope(schema_version=2), LIMIT)
    assert (event.type, data, version) == ("invoice.paid", {"n": 1}, 2)

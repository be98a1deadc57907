"""Properties of `POST /v1/events` validation (ingest/validation.py `parse_event`) for any
input: arbitrary bytes raise nothing but InvalidEvent, every valid envelope round-trips with
its body bytes unchanged whatever its formatting, and ids holding `.` or a control character
are refused."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.ingest.validation import DEFAULT_SOURCE, parse_event
from hookline.shared.errors import InvalidEvent
from hookline.shared.policy.inputs import clip

PROPERTY = settings(max_examples=200, derandomize=True, database=None, deadline=None)
LIMIT = 64 * 1024

ids = st.from_regex(r"[A-Za-z0-9_:-]{1,128}", fullmatch=True)
types = st.from_regex(r"[A-Za-z0-9_.:-]{1,128}", fullmatch=True)
sources = st.from_regex(r"[A-Za-z0-9-][A-Za-z0-9_-]{0,63}", fullmatch=True)  # `_x`: reserved
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)


def encodings() -> st.SearchStrategy[dict[str, Any]]:
    """json.dumps options that change the bytes but not the value."""
    return st.fixed_dictionaries({
        "ensure_ascii": st.booleans(), "sort_keys": st.booleans(),
        "indent": st.one_of(st.none(), st.integers(0, 4), st.just("\t")),
        "separators": st.sampled_from([None, (",", ":"), (" , ", " : ")]),
    })


@PROPERTY
@given(body=st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.sampled_from(["id", "type", "data", "source", "x"]), json_values,
                    max_size=5).map(lambda v: json.dumps(v).encode()),
))
def test_arbitrary_bytes_raise_only_invalid_event(body):
    """Any bytes (JSON or not) give a NewEvent or an InvalidEvent whose field is `body`, an
    envelope field, or one of the document's own top-level keys (clipped to 40 characters;
    the empty key included); never another exception."""
    try:
        event = parse_event(body, LIMIT)
    except InvalidEvent as exc:
        assert exc.detail
        fields = {"body", "id", "type", "data", "source"}
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        if isinstance(document, dict):
            fields |= {clip(key) for key in document}
        assert exc.field in fields, (exc.field, body)
        return
    assert event.body == body


@PROPERTY
@given(event_id=ids, event_type=types, source=st.one_of(st.none(), sources), data=json_values,
       options=encodings(), order=st.permutations(["id", "type", "data", "source"]),
       padding=st.sampled_from(["", " ", "\n", "\t \r\n"]))
def test_valid_envelope_round_trips_with_body_bytes_unchanged(event_id, event_type, source,
                                                              data, options, order, padding):
    """Any valid envelope, however encoded (key order, spacing, escapes), parses to its id,
    type and source, and the event's body is the exact bytes received."""
    fields = {"id": event_id, "type": event_type, "data": data, "source": source}
    document = {key: fields[key] for key in order if fields[key] is not None or key == "data"}
    body = (padding + json.dumps(document, **options) + padding).encode()
    event = parse_event(body, LIMIT)
    assert event.body == body
    assert (event.source_event_id, event.type) == (event_id, event_type)
    assert event.source == (source if source is not None else DEFAULT_SOURCE)


@PROPERTY
@given(prefix=st.text(alphabet="abc_:-", max_size=10),
       suffix=st.text(alphabet="xyz09", max_size=10),
       bad=st.one_of(st.just("."), st.characters(categories=["Cc"])))
def test_ids_with_a_dot_or_control_character_are_refused(prefix, suffix, bad):
    """An id holding `.` (Standard Webhooks ids must not) or any control character (NUL, CR,
    LF, DEL, C1 included) is refused with InvalidEvent on the `id` field."""
    body = json.dumps({"id": prefix + bad + suffix, "type": "t", "data": 1}).encode()
    try:
        parse_event(body, LIMIT)
    except InvalidEvent as exc:
        assert exc.field == "id"
        return
    raise AssertionError("an id with a dot or control character was accepted")

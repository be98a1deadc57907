"""Validation of `POST /v1/events` bodies: pure functions, no I/O.

The accepted body is a JSON object (UTF-8) of the form
`{"id": str, "type": str, "data": any JSON, "source"?: str, "tenant"?: str,
"schema_version"?: int}` (`schema_version`: the catalogue schema version `data` follows,
ingest/catalogue_cache.py; the latest when absent). What is
stored and delivered is exactly the received bytes: the parsed value is used only to check the
envelope and to pull out the idempotency key and the type, and is never re-serialised.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from hookline.shared.errors import InvalidEvent
from hookline.shared.models import DEFAULT_TENANT, NewEvent
from hookline.shared.policy.inputs import (
    EVENT_ID_RE,
    EVENT_TYPE_RE,
    MAX_JSON_DEPTH,
    RESERVED_SOURCE_PREFIX,
    SOURCE_NAME_RE,
    clip,
    json_kind,
    json_problem,
    long_integer_problem,
    refuse_unknown,
    token,
)
from hookline.shared.policy.notify import reserved_type_problem
from hookline.shared.tenant_models import tenant_id

DEFAULT_SOURCE = "api"

_REQUIRED = ("id", "type", "data")
_ALLOWED = frozenset({*_REQUIRED, "source", "tenant", "schema_version"})
MAX_SCHEMA_VERSION = 10_000


class BodyTooLarge(InvalidEvent):
    """The body is longer than the configured limit (ingest answers 413, not 400)."""

    def __init__(self, max_body_bytes: int) -> None:
        super().__init__("body", f"larger than {max_body_bytes} bytes")
        self.max_body_bytes = max_body_bytes


def parse_event(body: bytes, max_body_bytes: int) -> NewEvent:
    """Check one `POST /v1/events` body and build the event to store (see
    :func:`parse_published`, which also gives its `data`)."""
    return parse_published(body, max_body_bytes)[0]


def parse_published(body: bytes, max_body_bytes: int) -> tuple[NewEvent, Any, int | None]:
    """Check one `POST /v1/events` body and build the event to store.

    Args:
        body: the request body exactly as received.
        max_body_bytes: largest accepted body, in bytes.

    Returns:
        The event, whose `body` is `body` itself (never re-serialised); its parsed `data`;
        and the schema version it names (None: not named).

    Raises:
        BodyTooLarge: `body` is longer than `max_body_bytes`.
        InvalidEvent: any other rule is broken; `field` names the offending part (`body` for
            the document as a whole, else the top-level key).
    """
    if len(body) > max_body_bytes:
        raise BodyTooLarge(max_body_bytes)
    document = _decode(body)
    if not isinstance(document, dict):
        _fail("body", f"must be a JSON object, not {json_kind(document)}")
    refuse_unknown(document, _ALLOWED, error=InvalidEvent, what="key")
    for name in _REQUIRED:
        if name not in document:
            _fail(name, "is required")
    version = document.get("schema_version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or not 1 <= version <= MAX_SCHEMA_VERSION):
        _fail("schema_version", f"must be a whole number from 1 to {MAX_SCHEMA_VERSION}")
    source = _token(document, "source", SOURCE_NAME_RE, default=DEFAULT_SOURCE)
    if source.startswith(RESERVED_SOURCE_PREFIX):
        _fail("source", f"names starting with {RESERVED_SOURCE_PREFIX!r} are hookline's own "
                        "(_test, _hookline)")
    return NewEvent(
        source=source,
        source_event_id=_token(document, "id", EVENT_ID_RE),
        type=_event_type(document),
        body=bytes(body),
        tenant=(tenant_id(document["tenant"], reserved_ok=True, error=InvalidEvent)
                if "tenant" in document else DEFAULT_TENANT),
    ), document["data"], version


def _event_type(document: dict[str, Any]) -> str:
    """The `type`: a token outside the reserved `hookline.` namespace (operational events)."""
    event_type = _token(document, "type", EVENT_TYPE_RE)
    if (problem := reserved_type_problem(event_type)) is not None:
        _fail("type", problem)
    return event_type


def _decode(body: bytes) -> Any:
    """Parse strict JSON (UTF-8, no NaN/Infinity, no repeated top-level key, bounded depth)."""
    if not body.strip():
        _fail("body", "is empty; expected a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail("body", f"is not valid UTF-8 (byte {exc.start})")
    try:
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM", text, 0)
        document = _DECODER.decode(text)
    except RecursionError:
        # The C decoder recurses per level and stops at the interpreter's recursion limit,
        # far below a stack overflow; anything that deep is far past MAX_JSON_DEPTH anyway.
        _fail("body", f"is nested deeper than {MAX_JSON_DEPTH} levels")
    except json.JSONDecodeError as exc:
        _fail("body", f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except ValueError as exc:  # from _reject_constant, or an integer too long to convert
        _fail("body", long_integer_problem(exc) or str(exc))
    if (problem := json_problem(document, MAX_JSON_DEPTH, check_text=False)) is not None:
        _fail("body", problem)
    if isinstance(document, dict):
        # The outermost object closes last, so its pairs are the last ones the hook saw.
        # A repeated key there would let us and a receiver read different ids or types.
        seen: set[str] = set()
        for key, _ in _last_object[0]:
            if key in seen:
                _fail(clip(key), "appears more than once")
            seen.add(key)
    return document


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"is not valid JSON: {name} is not a JSON number")


_last_object: list[list[tuple[str, Any]]] = [[]]
"""The key/value pairs of the object the decoder closed last (decoding is synchronous, so
the one decoder below serves every request of the process in turn)."""


def _keep_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    _last_object[0] = pairs
    return dict(pairs)


# One decoder for the process: json.loads with hooks would build a new one per body.
_DECODER = json.JSONDecoder(object_pairs_hook=_keep_pairs, parse_constant=_reject_constant)


def _token(document: dict[str, Any], name: str, pattern: re.Pattern[str],
           default: str | None = None) -> str:
    """The string at `document[name]`, checked against `pattern` (whole string)."""
    if name not in document and default is not None:
        return default
    return token(name, document[name], pattern, error=InvalidEvent)


def _fail(field: str, detail: str) -> NoReturn:
    raise InvalidEvent(field, detail)

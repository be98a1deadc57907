"""Optional: check a received delivery's payload against the event-type catalogue's schema.

`hookline event-types export` (or `GET /v1/admin/event-types/export`) writes the catalogue as
an OpenAPI 3.1 document whose `webhooks` hold, per event type, the JSON Schema (draft
2020-12) of the delivered body. :func:`webhook_schemas` reads it; :func:`validate_payload`
checks one body.

The kit stays standard-library only: validation itself needs a JSON Schema library, chosen by
the application. Pass `validator` (any callable `validator(schema, document)` that raises on a
mismatch, e.g. one built on jsonschema-rs or fastjsonschema), or install `jsonschema`, which
is then imported on the first call that needs it (never at import time).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from hookline_client.errors import HooklineClientError

Validator = Callable[[Any, Any], object]
"""`validator(schema, document)`: returns when `document` matches, raises otherwise."""


class PayloadInvalid(HooklineClientError, ValueError):
    """A received payload does not match its event type's schema.

    Attributes:
        event_type: the payload's `type`.
        pointer: JSON Pointer of the failing location in the body (`/data/amount`), when
            the validator says ("" otherwise).
        reason: the validator's explanation.
    """

    def __init__(self, event_type: str, pointer: str, reason: str) -> None:
        super().__init__(f"{event_type}: {pointer or '/'}: {reason}")
        self.event_type = event_type
        self.pointer = pointer
        self.reason = reason


def webhook_schemas(document: Mapping[str, Any]) -> dict[str, Any]:
    """{event type: JSON Schema of the delivered body} from an OpenAPI 3.1 `webhooks`
    document (each webhook's `post` application/json requestBody schema).

    Raises:
        ValueError: the document has no `webhooks` object.
    """
    webhooks = document.get("webhooks")
    if not isinstance(webhooks, Mapping):
        raise ValueError("not an OpenAPI webhooks document: no `webhooks` object")
    schemas: dict[str, Any] = {}
    for name, item in webhooks.items():
        media = (((item.get("post") or {}).get("requestBody") or {}).get("content") or {}).get(
            "application/json") if isinstance(item, Mapping) else None
        if isinstance(media, Mapping) and "schema" in media:
            schemas[str(name)] = media["schema"]
    return schemas


def validate_payload(payload: bytes | Mapping[str, Any], schemas: Mapping[str, Any], *,
                     validator: Validator | None = None) -> Mapping[str, Any]:
    """Check a delivered body against the schema of its `type` (call it after `verify`).

    Args:
        payload: the body as received (bytes of JSON), or already parsed.
        schemas: {event type: body schema}, e.g. from :func:`webhook_schemas`; a type not
            in it passes unchecked.
        validator: `validator(schema, document)` raising on a mismatch; None: the
            `jsonschema` package (draft 2020-12), imported now.

    Returns:
        The parsed payload.

    Raises:
        PayloadInvalid: it does not match its type's schema (or is not a JSON object, or
            its bytes are not JSON at all; then `event_type` is "?").
        ModuleNotFoundError: no `validator` was given and `jsonschema` is not installed.
    """
    document = _parsed(payload) if isinstance(payload, bytes | bytearray) else payload
    if not isinstance(document, Mapping):
        raise PayloadInvalid("?", "", "the payload is not a JSON object")
    event_type = str(document.get("type", "?"))
    schema = schemas.get(event_type)
    if schema is None:
        return document
    if validator is not None:
        try:
            validator(schema, document)
        except Exception as exc:  # any library's mismatch error, re-raised as ours
            raise PayloadInvalid(event_type, _pointer_of(exc), str(exc)) from exc
        return document
    import jsonschema  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415  (optional: only when no validator is given)

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(document))
    if error is not None:
        raise PayloadInvalid(event_type, _pointer(list(error.absolute_path)), error.message)
    return document


def _parsed(payload: bytes | bytearray) -> Any:
    """The received bytes as JSON. Raises PayloadInvalid when they are not JSON (or not
    UTF-8, or nested past the interpreter's recursion limit)."""
    try:
        return json.loads(payload)
    except RecursionError:
        raise PayloadInvalid("?", "", "the payload is nested too deeply to parse") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
        raise PayloadInvalid("?", "", f"the payload is not JSON: {exc}") from None


def _pointer(path: list[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _pointer_of(exc: Exception) -> str:
    """The failing location an error of a known library carries (jsonschema, jsonschema-rs),
    as a JSON Pointer; "" when it carries none."""
    for attribute in ("absolute_path", "instance_path"):
        path = getattr(exc, attribute, None)
        if path is not None:
            return _pointer(list(path))
    return ""

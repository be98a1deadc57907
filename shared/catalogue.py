"""The event-type catalogue: what a type is, the rules its fields follow, and the checks that
use it (a destination's subscriptions, an event's `data` against its schema).

A catalogue type (named as Svix names them: `name`, `description`, `schemas`, `deprecated`,
`archived`) has versioned JSON Schemas (draft 2020-12) of the event's `data`, an example of
`data` per version, and a validation mode: `off`, `warn` (accept, count, mark the event) or
`reject` (400 `schema_mismatch`, nothing stored). The catalogue is optional: while it holds
no type, nothing here refuses anything.

Schemas are compiled with jsonschema-rs (`jsonschema_rs.Draft202012Validator`), once per
schema version (ingest/catalogue_cache.py keeps the compiled ones).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema_rs

from hookline.shared.endpoint_models import subscribes
from hookline.shared.errors import InvalidInput
from hookline.shared.policy import inputs, notify

Validation = Literal["off", "warn", "reject"]
VALIDATION_MODES: tuple[Validation, ...] = ("off", "warn", "reject")
EVENT_TYPE_FIELDS = ("name", "description", "schemas", "examples", "validation", "deprecated",
                     "archived")
"""The fields `PUT /v1/admin/event-types/{name}` (and an import) takes."""
MAX_DESCRIPTION_CHARS = 2000
MAX_SCHEMA_VERSION = 10_000
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


class SubscriptionRefused(InvalidInput):
    """A destination's subscription matches no catalogue type, or only archived ones (422).

    Attributes:
        event_type: the refused subscription pattern.
        nearest: the closest catalogue name (difflib), or None when none is close.
        code: `unknown_event_type` or `event_type_archived`.
    """

    def __init__(self, code: str, event_type: str, detail: str,
                 nearest: str | None) -> None:
        super().__init__("event_types", detail)
        self.code = code
        self.event_type = event_type
        self.nearest = nearest


@dataclass(frozen=True, slots=True, kw_only=True)
class EventType:
    """One catalogue type.

    Attributes:
        name: the event type (the event type rules of POST /v1/events).
        description: what it means, for the people who subscribe.
        schemas: {version: JSON Schema of `data`}, versions from 1.
        examples: {version: an example `data`} for the versions that have one.
        validation: what ingest does with an event whose `data` fails its schema.
        deprecated: still sent; subscribing to it answers with a warning.
        archived: hidden from tenants; it can no longer be newly subscribed.
        created_at, updated_at: unix seconds (store clock).
    """

    name: str
    description: str = ""
    schemas: Mapping[int, Any] = field(default_factory=dict)
    examples: Mapping[int, Any] = field(default_factory=dict)
    validation: Validation = "off"
    deprecated: bool = False
    archived: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def latest_version(self) -> int | None:
        """The highest schema version (None: the type has no schema)."""
        return max(self.schemas) if self.schemas else None

    @classmethod
    def from_rows(cls, row: Mapping[str, Any], schema_rows: Sequence[Mapping[str, Any]],
                  ) -> EventType:
        """Build from an `event_types` row and its `event_type_schemas` rows."""
        return cls(name=row["name"], description=row["description"],
                   validation=row["validation"], deprecated=bool(row["deprecated"]),
                   archived=bool(row["archived"]), created_at=float(row["created_at"]),
                   updated_at=float(row["updated_at"]),
                   schemas={int(r["version"]): json.loads(r["schema"]) for r in schema_rows},
                   examples={int(r["version"]): json.loads(r["example"]) for r in schema_rows
                             if r["example"] is not None})


def event_type_view(event_type: EventType, *, with_schemas: bool = True) -> dict[str, Any]:
    """The JSON shape of a catalogue type (admin API, CLI `--json`, export's source)."""
    view: dict[str, Any] = {
        "name": event_type.name, "description": event_type.description,
        "validation": event_type.validation, "deprecated": event_type.deprecated,
        "archived": event_type.archived, "latest_version": event_type.latest_version,
        "created_at": event_type.created_at, "updated_at": event_type.updated_at}
    if with_schemas:
        view["schemas"] = {str(v): s for v, s in sorted(event_type.schemas.items())}
        view["examples"] = {str(v): e for v, e in sorted(event_type.examples.items())}
    return view


# -- input rules ---------------------------------------------------------------------------


def event_type_name(value: Any, field_name: str = "name") -> str:
    """A catalogue type's name: the event type rules (no wildcard), outside the `hookline.`
    namespace (hookline's own operational events, never published). Raises InvalidInput."""
    name = inputs.token(field_name, value, inputs.EVENT_TYPE_RE)
    problem = notify.reserved_type_problem(name)
    if problem is not None:
        raise InvalidInput(field_name, problem)
    return name


def event_type_fields(name: str, body: Mapping[str, Any]) -> EventType:
    """Check a type's definition (a PUT body, or one type of an import) and build it.

    Args:
        name: the type's name (the path's); a body `name` must equal it.
        body: {description?, schemas?, examples?, validation?, deprecated?, archived?};
            `schemas` and `examples` map versions ("1", "2", ...) to JSON values.

    Returns:
        The type to store (its times are the store's to set).

    Raises:
        InvalidInput: an unknown field, a bad name, version, mode or flag, a schema that is
            not a valid draft 2020-12 schema, an example without a schema version or one
            that its schema refuses; `field` names it (`schemas.2`, `examples.1`, ...).
    """
    inputs.refuse_unknown(body, EVENT_TYPE_FIELDS)
    checked = event_type_name(name)
    if "name" in body and body["name"] != checked:
        raise InvalidInput("name", f"is {inputs.clip(str(body['name']))!r} but the path names "
                                   f"{checked!r}")
    description = body.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidInput("description", f"must be a string of at most "
                                          f"{MAX_DESCRIPTION_CHARS} characters")
    validation = body.get("validation", "off")
    if validation not in VALIDATION_MODES:
        raise InvalidInput("validation", f"must be one of {', '.join(VALIDATION_MODES)}, "
                                         f"not {validation!r}")
    schemas = {version: _schema(f"schemas.{version}", value)
               for version, value in _versions("schemas", body.get("schemas", {})).items()}
    examples = _versions("examples", body.get("examples", {}))
    for version, example in examples.items():
        if version not in schemas:
            raise InvalidInput(f"examples.{version}", "names no schema version")
        problem = first_problem(compile_schema(schemas[version]), example, prefix="")
        if problem is not None:
            raise InvalidInput(f"examples.{version}", f"does not match its schema: {problem}")
    if validation != "off" and not schemas:
        raise InvalidInput("validation", f"{validation!r} needs at least one schema version")
    return EventType(name=checked, description=description, schemas=schemas,
                     examples=examples, validation=validation,
                     deprecated=inputs.flag("deprecated", body.get("deprecated")),
                     archived=inputs.flag("archived", body.get("archived")))


def _versions(field_name: str, value: Any) -> dict[int, Any]:
    """{version: value} from an object keyed by version numbers ("1", "2", ...)."""
    if not isinstance(value, dict):
        raise InvalidInput(field_name, f"must be an object keyed by version, not "
                                       f"{inputs.json_kind(value)}")
    out: dict[int, Any] = {}
    for key, item in value.items():
        text = str(key)
        # Written plainly ("1", not "01" or "1 "), so two keys never name one version.
        if (not text.isascii() or not text.isdigit() or text != str(int(text))
                or not 1 <= int(text) <= MAX_SCHEMA_VERSION):
            raise InvalidInput(f"{field_name}.{inputs.clip(text)}",
                               f"a version must be a whole number from 1 to "
                               f"{MAX_SCHEMA_VERSION}, written without leading zeros")
        out[int(text)] = item
    return dict(sorted(out.items()))


def _schema(field_name: str, value: Any) -> Any:
    """A JSON Schema (draft 2020-12) that compiles. Raises InvalidInput(field_name)."""
    if not isinstance(value, dict | bool):
        raise InvalidInput(field_name, f"must be a JSON Schema object, not "
                                       f"{inputs.json_kind(value)}")
    if isinstance(value, dict) and value.get("$schema", DRAFT_2020_12) not in (
            DRAFT_2020_12, DRAFT_2020_12 + "#"):
        raise InvalidInput(field_name, f"$schema must be {DRAFT_2020_12} (draft 2020-12)")
    try:
        jsonschema_rs.meta.validate(value)
    except jsonschema_rs.ValidationError as error:
        raise InvalidInput(field_name, f"is not a valid JSON Schema at "
                                       f"{pointer(error.instance_path) or '/'}: "
                                       f"{error.message[:200]}") from None
    compile_schema(value, field_name)
    return value


def compile_schema(schema: Any, field_name: str = "schemas") -> jsonschema_rs.Draft202012Validator:
    """The compiled validator of a draft 2020-12 schema (compile once, validate often).

    Raises:
        InvalidInput: it does not compile (an unresolvable or remote `$ref`, a bad regex,
            ...).
    """
    try:
        return jsonschema_rs.Draft202012Validator(schema, retriever=_no_remote_refs)
    except (jsonschema_rs.ValidationError, ValueError) as exc:
        raise InvalidInput(field_name, f"does not compile: {str(exc).splitlines()[0][:300]}"
                           ) from None


def _no_remote_refs(uri: str) -> Any:
    """jsonschema-rs's retriever: a schema must stand alone (`$defs`), so a `$ref` to a URL is
    refused instead of fetched (from the admin API's host, and again from every ingest)."""
    raise ValueError("remote references are not fetched; put the schema under $defs")


def pointer(path: Sequence[str | int]) -> str:
    """The JSON Pointer (RFC 6901) of a path of keys and indexes (`""` for the root)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """Where a value first fails its schema.

    Attributes:
        pointer: the JSON Pointer of the failing location (in the event: `/data/...`).
        keyword: the schema keyword that failed (`type`, `required`, `maximum`, ...).
        message: the validator's explanation.
    """

    pointer: str
    keyword: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer or '/'} fails `{self.keyword}`: {self.message[:200]}"


def first_problem(validator: jsonschema_rs.Draft202012Validator, value: Any, *,
                  prefix: str = "/data") -> SchemaProblem | None:
    """None when `value` satisfies the compiled schema, else where it first fails.

    Args:
        validator: from :func:`compile_schema`.
        value: the parsed JSON value (an event's `data`).
        prefix: the pointer of `value` itself in its document.
    """
    if validator.is_valid(value):  # the fast path: no error object is built
        return None
    try:
        validator.validate(value)
    except jsonschema_rs.ValidationError as error:
        schema_path = list(error.schema_path)
        keyword = str(schema_path[-1]) if schema_path else "schema"
        return SchemaProblem(prefix + pointer(error.instance_path), keyword, error.message)
    return None


# -- subscriptions ---------------------------------------------------------------------------


def check_subscriptions(catalogue: Sequence[EventType], patterns: Sequence[str], *,
                        already: Sequence[str] = ()) -> list[str]:
    """Check a destination's subscription patterns against the catalogue.

    With an empty catalogue every pattern passes (hookline as without a catalogue).
    Otherwise each pattern (exact, `prefix.*` or `*`) must match a catalogue type that is not
    archived; a pattern the destination `already` had is not refused for archived types
    (only new subscriptions are).

    Args:
        catalogue: every catalogue type (schemas not needed).
        patterns: the destination's subscriptions, as the rule book returned them.
        already: its subscriptions before this change (empty for a new destination).

    Returns:
        Warnings: one per pattern naming a deprecated type exactly.

    Raises:
        SubscriptionRefused: a pattern matches no type (`unknown_event_type`, with the
            nearest name), or only archived ones (`event_type_archived`).
    """
    if not catalogue:
        return []
    by_name = {t.name: t for t in catalogue}
    warnings: list[str] = []
    for pattern in patterns:
        if notify.is_operational(pattern):  # hookline's own events: not the catalogue's
            _check_operational(pattern)
            continue
        matched = [t for t in catalogue if subscribes((pattern,), t.name)]
        if not matched:
            nearest = nearest_name(pattern, list(by_name))
            hint = f"; did you mean {nearest!r}?" if nearest else ""
            raise SubscriptionRefused(
                "unknown_event_type", pattern,
                f"{inputs.clip(pattern)!r} matches no type in the event-type catalogue{hint}",
                nearest)
        if all(t.archived for t in matched) and pattern not in already:
            raise SubscriptionRefused(
                "event_type_archived", pattern,
                f"{inputs.clip(pattern)!r} matches only archived catalogue types; archived "
                "types cannot be newly subscribed", None)
        exact = by_name.get(pattern)
        if exact is not None and exact.deprecated:
            warnings.append(f"event type {pattern!r} is deprecated")
    return warnings


def nearest_name(name: str, known: Sequence[str]) -> str | None:
    """The known name most like `name` (difflib, ignoring case: `INVOICE.PAID` is nearest
    `invoice.paid`), or None when none is close."""
    by_folded: dict[str, str] = {}
    for known_name in known:
        by_folded.setdefault(known_name.casefold(), known_name)
    found = difflib.get_close_matches(name.removesuffix(".*").casefold(), list(by_folded),
                                      n=1, cutoff=0.6)
    return by_folded[found[0]] if found else None


def _check_operational(pattern: str) -> None:
    """A subscription in the `hookline.` namespace must match one of hookline's operational
    event types (the catalogue never holds them). Raises SubscriptionRefused with the
    nearest of them."""
    if any(subscribes((pattern,), known) for known in notify.TYPES):
        return
    nearest = nearest_name(pattern, list(notify.TYPES))
    hint = f"; did you mean {nearest!r}?" if nearest else ""
    raise SubscriptionRefused(
        "unknown_event_type", pattern,
        f"{inputs.clip(pattern)!r} matches none of hookline's operational event types{hint}",
        nearest)

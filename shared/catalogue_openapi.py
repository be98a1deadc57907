"""The event-type catalogue to and from an OpenAPI 3.1 document's `webhooks` section, the form
in which SaaS teams already describe the webhooks they send.

Each webhook is keyed by its event type; its `post` operation's `requestBody` (content
`application/json`) carries the schema and example of the delivered body. What hookline
delivers is the event as published, `{"id", "type", "data", ...}`, so:

* export writes that envelope's schema, with the type's latest schema version as `data`
  (and its example as the body's example); `x-hookline-validation` and
  `x-hookline-schema-version` keep what OpenAPI has no words for;
* import takes `properties.data` of a schema that is such an envelope (an object whose
  properties hold `data` and `type`), else the whole schema, as the schema of `data`.
  `$ref`s to `#/components/schemas/...` are carried into the schema's own `$defs`. A type
  not in the catalogue is created with that schema as version 1; one whose latest schema
  differs gets it as a new version; one whose latest schema is the same is left unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hookline.shared.catalogue import DRAFT_2020_12, EventType, event_type_fields
from hookline.shared.errors import InvalidInput
from hookline.shared.policy import inputs

_COMPONENT_REF = "#/components/schemas/"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportPlan:
    """What importing a document does to the catalogue.

    Attributes:
        writes: the types to create or replace (whole definitions).
        created, new_version, unchanged: type names by outcome.
    """

    writes: list[EventType] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    new_version: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def export_openapi(catalogue: Sequence[EventType], *, title: str = "Webhooks",
                   version: str = "1") -> dict[str, Any]:
    """An OpenAPI 3.1 document whose `webhooks` describe the catalogue's types that are not
    archived (each with its latest schema version)."""
    webhooks: dict[str, Any] = {}
    for event_type in catalogue:
        if event_type.archived:
            continue
        latest = event_type.latest_version
        data_schema = copy.deepcopy(event_type.schemas[latest] if latest is not None else {})
        defs = None
        if isinstance(data_schema, dict):  # $defs move up to the body schema, the root
            defs = data_schema.pop("$defs", None)
            data_schema.pop("$schema", None)
        body_schema: dict[str, Any] = {
            "type": "object", "required": ["id", "type", "data"],
            "properties": {"id": {"type": "string"},
                           "type": {"type": "string", "const": event_type.name},
                           "data": data_schema}}
        if defs:
            body_schema["$defs"] = defs
        media: dict[str, Any] = {"schema": body_schema}
        if latest is not None and latest in event_type.examples:
            media["example"] = {"id": "evt_example", "type": event_type.name,
                                "data": event_type.examples[latest]}
        operation: dict[str, Any] = {
            "operationId": event_type.name, "summary": event_type.name,
            "description": event_type.description,
            "requestBody": {"required": True, "content": {"application/json": media}},
            "responses": {"2XX": {"description": "received"}},
            "x-hookline-validation": event_type.validation}
        if latest is not None:
            operation["x-hookline-schema-version"] = latest
        if event_type.deprecated:
            operation["deprecated"] = True
        webhooks[event_type.name] = {"post": operation}
    return {"openapi": "3.1.0", "info": {"title": title, "version": version},
            "jsonSchemaDialect": DRAFT_2020_12, "webhooks": webhooks}


def plan_import(document: Any, catalogue: Sequence[EventType]) -> ImportPlan:
    """What importing `document` (an OpenAPI 3.1 document) into `catalogue` writes.

    Raises:
        InvalidInput: not an OpenAPI 3.1 document with a `webhooks` object, a webhook name
            that breaks the event type rules, an operation without a JSON body schema, a
            `$ref` that names no component, or a schema the catalogue refuses; `field`
            names the place (`webhooks.invoice.paid.post`, ...).
    """
    if not isinstance(document, dict):
        raise InvalidInput("body", "must be an OpenAPI document (a JSON object)")
    openapi = document.get("openapi")
    if not isinstance(openapi, str) or not openapi.startswith("3.1"):
        raise InvalidInput("openapi", f"must be 3.1.x, not {openapi!r}")
    webhooks = document.get("webhooks")
    if not isinstance(webhooks, dict) or not webhooks:
        raise InvalidInput("webhooks", "must be a non-empty object (the webhooks section)")
    components = (document.get("components") or {}).get("schemas") or {}
    existing = {t.name: t for t in catalogue}
    plan = ImportPlan()
    for name, item in webhooks.items():
        where = f"webhooks.{inputs.clip(str(name))}"
        operation = item.get("post") if isinstance(item, dict) else None
        if not isinstance(operation, dict):
            raise InvalidInput(where, "has no `post` operation")
        media = (((operation.get("requestBody") or {}).get("content") or {})
                 .get("application/json"))
        if not isinstance(media, dict) or not isinstance(media.get("schema"), dict | bool):
            raise InvalidInput(f"{where}.post", "has no application/json requestBody schema")
        schema = _inline_refs(media["schema"], components, f"{where}.post")
        example = _example(media)
        if _is_envelope(schema):
            defs = schema.get("$defs")
            schema = schema["properties"]["data"]
            if defs and isinstance(schema, dict):
                schema = {**schema, "$defs": defs}
            if isinstance(example, dict) and "data" in example:
                example = example["data"]
        old = existing.get(str(name))
        plan_one(plan, str(name), old, schema, example, operation, where)
    return plan


def plan_one(plan: ImportPlan, name: str, old: EventType | None, schema: Any, example: Any,
             operation: Mapping[str, Any], where: str) -> None:
    """Add one webhook's outcome to `plan` (see the module docstring)."""
    schemas = dict(old.schemas) if old is not None else {}
    examples = dict(old.examples) if old is not None else {}
    if old is not None and old.latest_version is not None and schemas[old.latest_version] == schema:
        plan.unchanged.append(name)
        return
    version = (old.latest_version or 0) + 1 if old is not None else 1
    schemas[version] = schema
    if example is not None:
        examples[version] = example
    body = {"description": str(operation.get("description") or operation.get("summary") or
                               (old.description if old else "")),
            "schemas": {str(v): s for v, s in schemas.items()},
            "examples": {str(v): e for v, e in examples.items()},
            "validation": operation.get("x-hookline-validation",
                                        old.validation if old else "off"),
            "deprecated": bool(operation.get("deprecated", old.deprecated if old else False)),
            "archived": old.archived if old else False}
    try:
        plan.writes.append(event_type_fields(name, body))
    except InvalidInput as exc:
        raise InvalidInput(f"{where}.{exc.field}", exc.detail) from None
    (plan.new_version if old is not None else plan.created).append(name)


def _is_envelope(schema: Any) -> bool:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return isinstance(properties, dict) and "data" in properties and "type" in properties


def _example(media: Mapping[str, Any]) -> Any:
    if "example" in media:
        return media["example"]
    examples = media.get("examples")
    if isinstance(examples, dict):
        for item in examples.values():
            if isinstance(item, dict) and "value" in item:
                return item["value"]
    return None


def _inline_refs(schema: Any, components: Mapping[str, Any], where: str) -> Any:
    """`schema` with `#/components/schemas/X` refs pointing at its own `$defs/X` (every
    component it reaches, transitively), so it stands alone."""
    needed: dict[str, Any] = {}

    def rewrite(node: Any) -> Any:
        if isinstance(node, list):
            return [rewrite(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: rewrite(v) for k, v in node.items()}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_COMPONENT_REF):
            target = ref[len(_COMPONENT_REF):]
            if target not in components:
                raise InvalidInput(where, f"$ref {inputs.clip(ref)!r} names no component")
            out["$ref"] = f"#/$defs/{target}"
            if target not in needed:
                needed[target] = None  # placed before the walk: a cycle stops here
                needed[target] = rewrite(components[target])
        return out

    result = rewrite(schema)
    if needed and isinstance(result, dict):
        result["$defs"] = {**result.get("$defs", {}), **needed}
    return result

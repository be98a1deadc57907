"""`hookline event-types list|get|put|archive|remove|import|export`: the event-type catalogue
(shared/catalogue.py), read and changed in the store directly, so they work whether or not
the service runs (a running service applies a change within a second:
ingest/catalogue_cache.py). `--json` prints what the admin API answers. Exit codes: 0 ok,
1 not found, 2 bad input (the rule book's message, naming the field).

`put NAME` creates a type or changes the fields given; `--schema FILE` adds the schema as
the next version (with `--example FILE` as its example); `--file FILE` replaces the whole
definition with a JSON object shaped like the admin API's PUT body. `import FILE` reads an
OpenAPI 3.1 document (JSON; YAML when PyYAML is installed) and `export` writes one
(shared/catalogue_openapi.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hookline.shared.catalogue import (
    VALIDATION_MODES,
    EventType,
    event_type_fields,
    event_type_name,
    event_type_view,
)
from hookline.shared.catalogue_openapi import ImportPlan, export_openapi, plan_import
from hookline.shared.config import Config
from hookline.shared.errors import InvalidInput, NotFound
from hookline.shared.logs import get_logger
from hookline.shared.store import Store
from hookline.supervisor.cli.common import (
    async_command,
    operator,
    print_json,
    print_record,
    print_table,
    with_store,
)
from hookline.supervisor.cli.files import read_json_file, write_text_file


def register(sub: Any) -> None:
    """Add the `event-types` group to the CLI."""
    group = sub.group("event-types", help="the event-type catalogue (types, schemas, examples)")
    lst = group.add_parser("list", help="catalogue types by name")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(handler=async_command(list_cmd))
    get = group.add_parser("get", help="one type with its schemas and examples (JSON)")
    get.add_argument("name")
    get.set_defaults(handler=async_command(get_cmd))
    put = group.add_parser("put", help="create a type, or change the fields given")
    put.add_argument("name")
    put.add_argument("--description")
    put.add_argument("--schema", metavar="FILE", type=Path,
                     help="a JSON Schema (draft 2020-12) of `data`: the next version")
    put.add_argument("--example", metavar="FILE", type=Path,
                     help="an example `data` (JSON) for that version (needs --schema)")
    put.add_argument("--validation", choices=VALIDATION_MODES,
                     help="what ingest does with `data` that fails the schema")
    put.add_argument("--deprecated", action=argparse.BooleanOptionalAction)
    put.add_argument("--file", metavar="FILE", type=Path,
                     help="the whole definition as JSON (the admin API's PUT body)")
    put.add_argument("--json", action="store_true")
    put.set_defaults(handler=async_command(put_cmd))
    archive = group.add_parser("archive", help="hide a type from tenants; no new "
                                               "subscriptions to it")
    archive.add_argument("name")
    archive.add_argument("--restore", action="store_true", help="un-archive it")
    archive.add_argument("--json", action="store_true")
    archive.set_defaults(handler=async_command(archive_cmd))
    remove = group.add_parser("remove", help="delete a type and its schemas")
    remove.add_argument("name")
    remove.set_defaults(handler=async_command(remove_cmd))
    imp = group.add_parser("import", help="the webhooks of an OpenAPI 3.1 document")
    imp.add_argument("file", type=Path)
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(handler=async_command(import_cmd))
    exp = group.add_parser("export", help="the catalogue as an OpenAPI 3.1 webhooks document")
    exp.add_argument("--out", type=Path, help="write to FILE (default: standard output)")
    exp.add_argument("--title", default="Webhooks")
    exp.set_defaults(handler=async_command(export_cmd))


def warn_about(warnings: list[str]) -> None:
    """Print the catalogue's warnings about a destination's subscriptions to stderr."""
    for warning in warnings:
        print(f"hookline: warning: {warning}", file=sys.stderr)


async def list_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event-types list`."""
    found = await with_store(config, lambda s: s.list_event_types())
    views = [event_type_view(t, with_schemas=args.json) for t in found]
    if args.json:
        print_json({"event_types": views})
    else:
        print_table(views, ["name", "latest_version", "validation", "deprecated", "archived",
                            "description"])
    return 0


async def get_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event-types get NAME`: the admin API's view, as JSON."""
    name = event_type_name(args.name)
    print_json(event_type_view(await with_store(config, lambda s: s.get_event_type(name))))
    return 0


async def put_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event-types put NAME [...]` (see the module docstring)."""
    name = event_type_name(args.name)
    if args.example is not None and args.schema is None:
        raise InvalidInput("example", "--example goes with --schema (its version)")
    given, schema, example = (None if path is None else read_json_file(path, option,
                                                                        yaml_ok=True)
                              for path, option in ((args.file, "--file"),
                                                   (args.schema, "--schema"),
                                                   (args.example, "--example")))

    async def put(store: Store) -> tuple[EventType, bool]:
        try:
            old: EventType | None = await store.get_event_type(name)
        except NotFound:
            old = None
        body = given if given is not None else _changed_body(old, args, schema, example)
        if not isinstance(body, dict):
            raise InvalidInput("file", "must hold a JSON object")
        [(stored, created)] = await store.put_event_types([event_type_fields(name, body)])
        return stored, created

    stored, created = await with_store(config, put)
    get_logger().info("event_type_put", event_type=name, created=created,
                      versions=sorted(stored.schemas), **operator())
    if args.json:
        print_json(event_type_view(stored))
    else:
        print(f"{'created' if created else 'updated'} event type {name} "
              f"(latest schema version: {stored.latest_version or 'none'}, "
              f"validation {stored.validation})")
    return 0


def _changed_body(old: EventType | None, args: argparse.Namespace, schema: Any,
                  example: Any) -> dict[str, Any]:
    """The PUT body: `old` with the flags given applied (a schema becomes the next version)."""
    body: dict[str, Any] = {} if old is None else {
        "description": old.description, "validation": old.validation,
        "deprecated": old.deprecated, "archived": old.archived,
        "schemas": {str(v): s for v, s in old.schemas.items()},
        "examples": {str(v): e for v, e in old.examples.items()}}
    if args.description is not None:
        body["description"] = args.description
    if args.validation is not None:
        body["validation"] = args.validation
    if args.deprecated is not None:
        body["deprecated"] = args.deprecated
    if schema is not None:
        version = str((old.latest_version or 0) + 1 if old is not None else 1)
        body.setdefault("schemas", {})[version] = schema
        if example is not None:
            body.setdefault("examples", {})[version] = example
    return body


async def archive_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event-types archive NAME [--restore]`."""
    name = event_type_name(args.name)
    stored = await with_store(config, lambda s: s.archive_event_type(name, not args.restore))
    get_logger().info("event_type_archived", event_type=name, archived=stored.archived,
                      **operator())
    if args.json:
        print_json(event_type_view(stored))
    else:
        print(f"{'archived' if stored.archived else 'restored'} event type {name}")
    return 0


async def remove_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event-types remove NAME`."""
    name = event_type_name(args.name)
    await with_store(config, lambda s: s.remove_event_type(name))
    get_logger().info("event_type_removed", event_type=name, **operator())
    print(f"removed event type {name}")
    return 0


async def import_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event-types import FILE`: an OpenAPI 3.1 document's webhooks."""
    document = read_json_file(args.file, "file", yaml_ok=True)

    async def load(store: Store) -> ImportPlan:
        plan = plan_import(document, await store.list_event_types())
        if plan.writes:
            await store.put_event_types(plan.writes)
        return plan

    plan = await with_store(config, load)
    get_logger().info("event_types_imported", created=len(plan.created),
                      new_version=len(plan.new_version), **operator())
    outcome = {"created": plan.created, "new_version": plan.new_version,
               "unchanged": plan.unchanged}
    if args.json:
        print_json(outcome)
    else:
        print_record({k: ", ".join(v) or "-" for k, v in outcome.items()})
    return 0


async def export_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event-types export [--out FILE]`: an OpenAPI 3.1 webhooks document."""
    found = await with_store(config, lambda s: s.list_event_types())
    text = json.dumps(export_openapi(found, title=args.title), indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_text_file(args.out, text, "--out")
        print(f"wrote {len(found)} event type(s) to {args.out}", file=sys.stderr)
    return 0

"""`hookline sources add|list|remove`: inbound provider sources, read and changed in the store
directly, so they work whether or not the service runs. A running ingest sees a change within
its source cache TTL (ingest/sources_api.py, 1 s)."""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared.config import Config
from hookline.shared.endpoint_models import SOURCE_SCHEMES
from hookline.shared.policy.sources import check_source, generate_source_secret
from hookline.shared.views import source_removed_view, source_view
from hookline.supervisor.cli.common import (
    add_named,
    print_json,
    print_table,
    run_command,
    with_store,
)


def register(sub: Any) -> None:
    """Add the `sources` command group to the CLI."""
    group = sub.group("sources", help="manage inbound sources (POST /v1/sources/NAME)")
    add = group.add_parser("add", help="register a source")
    add.add_argument("name")
    add.add_argument("--scheme", required=True, choices=SOURCE_SCHEMES,
                     help="how its requests are verified")
    add.add_argument("--secret", help="its signing secret or bearer token; generated and "
                                      "printed once if omitted (not for stripe)")
    add.add_argument("--json", action="store_true")
    add.set_defaults(handler=lambda c, a: run_command(lambda: sources_add(c, a)))
    lst = group.add_parser("list", help="list sources (secrets hidden)")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(handler=lambda c, a: run_command(lambda: sources_list(c, a)))
    rm = group.add_parser("remove", help="remove a source; its requests get 404 from then on")
    rm.add_argument("name")
    rm.add_argument("--json", action="store_true")
    rm.set_defaults(handler=lambda c, a: run_command(lambda: sources_remove(c, a)))


async def sources_add(config: Config, args: argparse.Namespace) -> int:
    """`hookline sources add NAME --scheme S [--secret X]`: prints a generated secret once.

    Raises:
        InvalidSetting: an invalid field or a stripe source without --secret (exit 2).
        Conflict: the name is taken (exit 1).
    """
    secret = args.secret if args.secret is not None else generate_source_secret(args.scheme)
    check_source(args.name, args.scheme, secret)  # before opening the store
    source = await with_store(config, lambda s: add_named(s.add_source(
        name=args.name, scheme=args.scheme, secret=secret)))
    if args.json:  # a generated secret is shown once, as the admin API does
        print_json(source_view(source, generated_secret=secret if args.secret is None
                               else None))
    else:
        print(f"added source {source.name} ({source.scheme}): POST /v1/sources/{source.name}")
        if args.secret is None:
            print(f"secret (shown once): {secret}")
    return 0


async def sources_list(config: Config, args: argparse.Namespace) -> int:
    """`hookline sources list [--json]`: secrets show only a short prefix."""
    rows = [source_view(s) for s in await with_store(config, lambda s: s.list_sources())]
    if args.json:
        print_json(rows)
        return 0
    print_table(rows, ["name", "scheme", "secret", "created_at"])
    return 0


async def sources_remove(config: Config, args: argparse.Namespace) -> int:
    """`hookline sources remove NAME [--json]`. Raises NotFound (exit code 1) for an unknown
    name."""
    await with_store(config, lambda s: s.remove_source(args.name))
    if args.json:
        print_json(source_removed_view(args.name))
    else:
        print(f"removed source {args.name}")
    return 0

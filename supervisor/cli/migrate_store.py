"""`hookline migrate-store --from sqlite:///… --to postgresql://…`: move up to PostgreSQL
without losing queued work (see shared/store/copy.py and OPERATIONS.md)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from hookline.shared.config import Config
from hookline.shared.db_url import is_postgres_url, parse_db_url, relative_url_hint
from hookline.shared.errors import ConfigError
from hookline.shared.process.service_lock import ServiceLocked, hold_database
from hookline.shared.store.copy import copy_sqlite_to_postgres
from hookline.supervisor.cli.common import fail, run_command


def register(sub: Any) -> None:
    """Add `migrate-store` to the CLI."""
    p = sub.add_parser("migrate-store",
                       help="copy a SQLite database into an empty PostgreSQL one (stop the "
                            "service first)")
    p.add_argument("--from", dest="source", required=True,
                   help="the SQLite database: a path, or sqlite:////ABSOLUTE/PATH "
                        "(sqlite:///PATH is relative)")
    p.add_argument("--to", dest="target", required=True,
                   help="the PostgreSQL database URL (postgresql://…); its tables must be empty")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=migrate_store_command)


def migrate_store_command(config: Config, args: argparse.Namespace) -> int:
    """Validate the two URLs, copy, print the row counts. Exit 1 on failure, 2 on usage."""
    source: str = args.source
    try:
        path = parse_db_url(source).path
    except ConfigError:
        path = None
    if path is None:
        return fail(f"--from must be a SQLite database (a path, or sqlite:////ABSOLUTE/PATH), not "
                    f"{source!r}", 2)
    if not is_postgres_url(args.target):
        return fail(f"--to must be a postgresql:// URL, not {args.target!r}", 2)

    if not os.path.isfile(path):
        return fail(f"--from: no SQLite database at {os.path.abspath(path)}"
                    f"{relative_url_hint(source)}", 2)
    # Held for the whole copy: a claim or an event committed by a service started meanwhile
    # would be lost to PostgreSQL.
    try:
        lock = hold_database(path, "hookline migrate-store")
    except ServiceLocked as exc:
        if exc.holder.command is not None:
            return fail(f"--from: {os.path.abspath(path)} is being copied already "
                        f"({exc.holder.describe()}): wait for it to end", 1)
        return fail(f"--from: {os.path.abspath(path)} is being served ({exc.holder.describe()}): "
                    "stop the service first, then copy", 1)
    except OSError as exc:
        return fail(f"--from: cannot lock {os.path.abspath(path)} against a service starting "
                    f"({path}.serve.lock: {exc.strerror or exc}): run as the service's user", 1)

    async def run() -> int:
        result = await copy_sqlite_to_postgres(path, args.target)
        if args.json:
            print(json.dumps(result.rows))
        else:
            width = max(map(len, result.rows), default=0)
            for table, n in result.rows.items():
                print(f"{table:<{width}} {n} rows copied")
            print("done: point every host at the PostgreSQL URL (--db / HOOKLINE_DB)")
        return 0

    with lock:
        return run_command(run)

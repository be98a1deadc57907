"""`hookline serve`, `hookline init`, `hookline config show`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from hookline.shared.config import Config
from hookline.shared.errors import ConfigError, StoreError
from hookline.shared.faults import is_transient
from hookline.shared.logs import configure_logging
from hookline.shared.process.lifecycle import pid_file, runtime_dir
from hookline.shared.store import Store
from hookline.shared.store.checks import storage_preflight
from hookline.shared.store.preflight import database_file, describe_database
from hookline.supervisor.cli.common import (
    USAGE_EXIT,
    fail,
    print_record,
    refuse_migrating_beside,
    run_command,
    with_store,
)
from hookline.supervisor.cli.preflight import service_problems


def register(sub: Any) -> None:
    """Add the service commands to the CLI."""
    docs = Config.docs()
    serve = sub.add_parser("serve", help="run ingest and the workers (the service)")
    serve.add_argument("--workers", type=int, help=docs["workers"])
    serve.add_argument("--ingest-processes", type=int, help=docs["ingest_processes"])
    serve.add_argument("--listen", help=docs["listen"])
    serve.add_argument("--check", action="store_true",
                       help="validate configuration and database access (the storage "
                            "checks of serve, including PRAGMA quick_check), that no other "
                            "serve runs on this database or runtime folder, that both "
                            "tokens are set and that the listen address can be bound; "
                            "creates nothing; exit 0 ok, 2 a problem found (each on a line), "
                            "1 the check could not be completed (the database unreachable); "
                            "a database that refuses the settings is 2")
    serve.set_defaults(handler=serve_command)

    init = sub.add_parser(
        "init", help="create the configured database and bring its schema up to date",
        description="Create the configured database (a SQLite file, 0600) when it is missing "
                    "and apply every migration; on an existing database only the pending "
                    "migrations run, so running it again changes nothing. The service "
                    "(`hookline serve`) also creates a missing database; every other command "
                    "refuses one, so a mistyped --db cannot become a new, empty database.")
    init.set_defaults(handler=init_command)

    cfg = sub.group("config", help="the effective configuration")
    show = cfg.add_parser("show", help="print every setting (secrets redacted)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=config_show)



def config_show(config: Config, args: argparse.Namespace) -> int:
    """`hookline config show [--json]`: every effective setting, secrets as `***`; the JSON
    keeps each setting's own type (seconds as numbers)."""
    settings = config.redacted()
    if args.json:
        print(json.dumps(settings, indent=2))
    else:
        # Unset runtime paths default to places beside the database (or the working folder):
        # show where, since two hosts on one PostgreSQL must not share them.
        for key, effective in (("runtime_dir", runtime_dir), ("pid_file", pid_file)):
            if not settings.get(key):
                settings[key] = f"(default) {os.path.abspath(effective(config))}"
        print_record(settings)
    return 0


def serve_command(config: Config, args: argparse.Namespace) -> int:
    """Run the service, or with --check only probe the configuration, database and address."""
    from hookline.supervisor import serve  # noqa: PLC0415  (keeps `hookline jobs` light)

    if not args.check:
        return serve.run(config)

    path = database_file(config.db)
    missing = path if path is not None and not os.path.exists(path) else None

    async def probe() -> int:
        # The storage preflight of `serve` (shared/store/checks.py), also for a database not
        # created yet, raising the same refusals (exit 2, as `serve` and `init`).
        storage_preflight(config.db, allow_network_filesystem=config.allow_network_filesystem)
        if missing is not None:
            # --check creates nothing: a missing file is what serve (or init) will create.
            print(f"database {missing} does not exist yet: `hookline serve` or "
                  "`hookline init` creates it", file=sys.stderr)
            return 0
        refuse_migrating_beside(config)  # the check opens (and migrates) the database
        try:
            checked = await serve.check(config)
        except StoreError as exc:
            if is_transient(exc):
                raise  # unreachable, restarting: a failure at run time (1)
            # Refused credentials, a missing database, a schema too new: the settings (or
            # the server's) must change, as for a problem found (2).
            raise ConfigError(str(exc)) from exc
        if checked is not None:  # a sentence, not serve's JSON log line
            print(checked.sentence(), file=sys.stderr)
        return 0

    # The CLI's exit codes: 2 for what the settings (or the host) must change, a refusal of
    # serve's, a database that refuses them (credentials, no such database) or a problem
    # found below; 1 for a failure at run time, such as the database unreachable, after
    # which the rest was not checked.
    code = run_command(probe)
    if code != 0:
        print("check failed" if code == USAGE_EXIT else "check not completed",
              file=sys.stderr)
        return code
    problems = service_problems(config)
    for problem in problems:
        fail(problem, USAGE_EXIT)
    if problems:
        print("check failed", file=sys.stderr)
        return USAGE_EXIT
    print("ok", file=sys.stderr)
    return 0


def init_command(config: Config, args: argparse.Namespace) -> int:
    """Create the configured database if missing and migrate it; say which happened."""
    # stdout: the summary; the log file gets `schema_migrated` too, as the service's would
    configure_logging("init", config.log_level, stream=sys.stderr, log_file=config.log_file)
    path = database_file(config.db)
    existed = path is None or os.path.exists(path)

    migrated: list[int | None] = []

    async def migrate() -> int:
        migrated.append(await with_store(config, _migrated_from, create=True))
        return 0

    code = run_command(migrate)
    if code != 0:
        return code
    found = migrated[0] if migrated else None
    done = ("nothing to migrate" if found is None else "schema created" if found == 0
            else f"migrated forward from schema {found}")
    if path is None:
        print(f"{describe_database(config.db)} ready: {done} (nothing else changed)")
    elif existed:
        print(f"database {path} already existed: {done}, nothing else changed")
    else:
        print(f"created database {path} (mode 0600) with the current schema")
    return 0


async def _migrated_from(store: Store) -> int | None:
    """Opening the store is the whole work of `hookline init` (it applies migrations): the
    schema it migrated from (None: nothing to migrate)."""
    return store.migrated_from

"""Helpers shared by the CLI command modules: store access, output, errors, exit codes.

Output, the same in every command:
- `--json` prints exactly what the admin API answers for the same thing: build it with the
  resource's function in shared/views.py (add one there for a new resource, and call it from
  the API handler too) and print it with :func:`print_json`.
- Human output is aligned text: :func:`print_table` for a list of records (one row each),
  :func:`print_record` for one record (`key  value` lines), or a one-line sentence for an
  action (`paused billing (maintenance)`). Pass them the view's dict: values are spelled by
  field name (supervisor/cli/human.py): `*_at`/`*_until`/`*_since` unix seconds become
  ISO 8601 UTC, other `*_s` durations human units, `*_bytes` sizes, booleans yes/no, lists
  comma-separated, None `-`. Never print a dict, list, dataclass or float with str() or an
  f-string; use `show(name, value)` from supervisor/cli/human.py inside a sentence.

Exit codes, the same in every command: 0 success; 1 a runtime failure (not found, conflict,
a name already taken, the store unreachable); 2 a usage or validation error (bad flags, a
value the rule book refuses, a destination address the outbound guard blocks, a missing
input file, a configuration error, a database refused as unable to keep the delivery
promise). Fix a 2 by changing the command; a 1 may
pass on retry or after changing the system.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from hookline.shared.config import Config
from hookline.shared.errors import (
    ConfigError,
    Conflict,
    DestinationBlocked,
    HooklineError,
    InvalidInput,
    InvalidSetting,
    StoreError,
)
from hookline.shared.policy import inputs
from hookline.shared.policy.netguard import vet_destination
from hookline.shared.process.service_lock import database_served_by
from hookline.shared.store import Store, store_for
from hookline.shared.store.backup_format import BackupError, schema_version
from hookline.shared.store.preflight import database_file
from hookline.shared.store.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from hookline.supervisor.cli.human import show
from hookline.supervisor.cli.who import invoking_user, user_name

T = TypeVar("T")


async def with_store(config: Config, fn: Callable[[Store], Awaitable[T]], *,
                     create: bool = False) -> T:
    """Open the configured store, run `fn(store)`, close it. A missing SQLite file is
    refused with DatabaseMissing (exit 2) unless `create`: a mistyped path must not become
    a new, empty database. A SQLite file that a running `hookline serve` holds and that
    needs migrating is refused (StoreError, exit 1): see :func:`refuse_migrating_beside`."""
    refuse_migrating_beside(config)
    store = store_for(config, create=create)
    await store.open()
    try:
        return await fn(store)
    finally:
        await store.close()


def refuse_migrating_beside(config: Config) -> None:
    """Refuse to open a SQLite database that another process must have alone: one that
    `hookline migrate-store` is copying (its writes, and the store's open, would wait for
    the copy's lock), or one whose schema is older than this hookline's while a
    `hookline serve` holds it: opening would migrate it under that (older) service, whose
    statements may then fail until it is restarted. After an upgrade, restart the service
    first (it migrates the database at start); then the CLI works again.

    Raises:
        StoreError: so refused (the message names the holder and what to do).
    """
    path = database_file(config.db)
    if path is None or not os.path.isfile(path):
        return
    try:
        holder = database_served_by(path)
    except OSError:
        return  # cannot tell: the store's own open says what it can
    if holder is None:
        return
    if holder.command is not None:
        raise StoreError(f"database {path} is being copied by {holder.describe()}: wait for "
                         "it to end, then use the database it copies to")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            found = schema_version(db)
    except (sqlite3.Error, BackupError):
        return  # no schema yet, or a newer hookline's: the store's own open says what to do
    if found >= SQLITE_SCHEMA_VERSION:
        return
    raise StoreError(f"database {path} has schema {found}, older than this hookline's "
                     f"({SQLITE_SCHEMA_VERSION}), and {holder.describe()} holds it: migrating "
                     "it now would break that service; restart the service on this version "
                     "first (it migrates the database at start), then run this again")


USAGE_EXIT = 2
"""Exit code of a usage or validation error (argparse uses it too)."""
RUNTIME_EXIT = 1
"""Exit code of an operation that failed at run time."""

#: Rule-book fields whose value a CLI flag gives: the message names the flag too.
FIELD_FLAGS = {
    "event_types": "--event-type", "max_in_flight": "--max-in-flight", "headers": "--header",
    "secret": "--secret", "scheme": "--scheme", "bodies_older_than": "--bodies-older-than",
    "metadata_older_than": "--metadata-older-than", "dedupe_keep": "--dedupe-keep",
    "timeout_s": "--timeout", "rate_limit_per_s": "--rate-limit", "ordered": "--ordered",
    "propagate_trace": "--propagate-trace",
    "overlap_s": "--overlap", "tenant": "--tenant", "metadata": "--metadata",
    "max_destinations": "--max-destinations", "filter": "--filter", "last": "--last",
}


def id_number(text: str) -> int:
    """argparse's type for a job or event id: a whole number from 1 to 2**63 - 1 (what the
    store's ids can be), so a mistyped one is a usage error (exit 2), not a failed lookup or
    a database driver's overflow.

    Raises:
        argparse.ArgumentTypeError: naming the range.
    """
    try:
        return inputs.whole_number("id", text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("id: ")) from None


def add_page_flags(parser: argparse.ArgumentParser, *, what: str, default: int,
                   before_help: str) -> None:
    """`--limit` (1 to MAX_LIST_LIMIT, `default`) and `--before ID` (the next page, after
    the hint's ID) of a listing of `what` (e.g. "dead letters")."""
    parser.add_argument("--limit", type=int, default=default,
                        help=f"most {what} listed (1 to {inputs.MAX_LIST_LIMIT}; default "
                             f"{default}); when more exist, stderr says "
                             "`(N shown; more: --before ID)`")
    parser.add_argument("--before", type=id_number, metavar="ID", help=before_help)


def run_command(fn: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run an async command; a HooklineError becomes a one-line message: exit 2 for a
    ConfigError (an invalid value, a configuration or storage refusal: fix the command or
    the settings), 1 for any other (the operation failed)."""
    try:
        return asyncio.run(fn())
    except ConfigError as exc:
        return fail_usage(exc)
    except HooklineError as exc:
        return fail(str(exc), RUNTIME_EXIT)


def async_command(fn: Callable[[Config, argparse.Namespace], Coroutine[Any, Any, int]]
                  ) -> Callable[[Config, argparse.Namespace], int]:
    """A command handler running `async fn(config, args) -> exit code` in
    :func:`run_command` (a ConfigError exits 2, any other HooklineError 1, with one line)."""
    return lambda config, args: run_command(lambda: fn(config, args))


def fail_usage(exc: ConfigError) -> int:
    """Print a validation error (with the CLI flag of an InvalidSetting's field) and return
    exit code 2."""
    flag = FIELD_FLAGS.get(exc.field) if isinstance(exc, InvalidSetting) else None
    text = str(exc)
    return fail(f"{text} ({flag})" if flag and flag not in text else text, USAGE_EXIT)


async def vet_url(url: str, config: Config) -> None:
    """The outbound guard's creation-time check of a destination URL, as a usage error: a
    blocked address is bad input (exit 2), fixed by another URL or by `allow_networks`.

    Raises:
        InvalidSetting("url"): the guard refuses the address (its reason names the setting
            that would allow it).
    """
    try:
        await vet_destination(url, config.address_policy)
    except DestinationBlocked as exc:
        raise InvalidSetting("url", str(exc)) from None


async def add_named(add: Awaitable[T]) -> T:
    """Await a store `add_*` call whose fields the rule book already passed: a ConfigError
    it still raises is a taken name, a runtime conflict (exit 1), not a usage error."""
    try:
        return await add
    except InvalidSetting:
        raise
    except ConfigError as exc:
        raise Conflict(str(exc)) from exc


def operator() -> dict[str, str]:
    """Who runs a CLI action, for its audit line: `by` "operator", `os_user` (the effective
    user's login name, or the uid when the system has none) and, when someone switched to it
    with `sudo -u`, `su` or `runuser`, `invoked_by` naming that person (supervisor/cli/who.py).
    """
    who = {"by": "operator", "os_user": user_name(os.geteuid())}
    if (invoker := invoking_user()) is not None:
        who["invoked_by"] = invoker
    return who


def fail(message: str, code: int = 1) -> int:
    """Print `hookline: message` to stderr and return `code`."""
    print(f"hookline: {message}", file=sys.stderr)
    return code


def print_more_hint(shown: int, last_id: int) -> None:
    """Say that a listing stopped at its --limit with more rows after it, and how to page on:
    `(100 shown; more: --before ID)`, ID the last row's. On stderr: stdout (the table, or
    `--json`'s list) stays what scripts read."""
    print(f"({shown} shown; more: --before {last_id})", file=sys.stderr)


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Print `rows` as an aligned text table of `columns` (headers upper-cased); each cell is
    spelled by :func:`hookline.supervisor.cli.human.show` for its column name and cut to 60
    characters. An empty table prints its header and `(none)`."""
    cells = [[_cell(c, r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    headers = [heading(c) for c in columns]
    widths = [max(w, len(h)) for w, h in zip(widths, headers, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(none)")


def heading(column: str) -> str:
    """A column's heading: its name upper-cased, without a unit suffix the cells already
    spell (`duration_s` -> `DURATION`, `body_bytes` -> `BODY`); times keep `_AT`."""
    for suffix in ("_s", "_bytes"):
        if (column.endswith(suffix) and not column.endswith("_per_s")
                and show(column, 1) != "1"):
            return column[: -len(suffix)].upper()
    return column.upper()


def print_record(record: Mapping[str, Any], keys: Sequence[str] | None = None) -> None:
    """Print one record as aligned `key  value` lines, in `keys` order (default: the
    record's own order), each value spelled by :func:`hookline.supervisor.cli.human.show`."""
    names = list(record) if keys is None else list(keys)
    width = max((len(k) for k in names), default=0)
    for name in names:
        print(f"{name.ljust(width)}  {show(name, record.get(name))}".rstrip())


def print_json(value: Any) -> None:
    """Print `value` (a view from shared/views.py) as one line of JSON: `--json` output."""
    print(json.dumps(value))


def _cell(column: str, value: Any) -> str:
    text = show(column, value)
    return text if len(text) <= 60 else text[:57] + "..."

"""Admin commands that talk to the store directly, so they work with the service stopped.

Each returns an exit code: 0 success, 1 the operation failed (not found, conflict, store
error), 2 bad usage. Output is a human table, or JSON with `--json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from shared.config import Config
from shared.errors import HooklineError
from shared.signing import generate_secret, secret_key
from shared.store import Store, open_store

T = TypeVar("T")


async def with_store(config: Config, fn: Callable[[Store], Awaitable[T]]) -> T:
    """Open the configured store, run `fn(store)`, close it."""
    store = open_store(config.db, synchronous=config.synchronous,
                       busy_timeout_s=config.busy_timeout_s)
    await store.open()
    try:
        return await fn(store)
    finally:
        await store.close()


async def destinations_add(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations add NAME URL`: prints the secret once when it was generated."""
    secret = args.secret or generate_secret()
    secret_key(secret)  # raises ConfigError for a malformed secret before anything is stored
    if not args.url.startswith(("http://", "https://")):
        return fail(f"URL must start with http:// or https://, not {args.url!r}")
    dest = await with_store(config, lambda s: s.add_destination(
        name=args.name, url=args.url, secret=secret,
        event_types=args.event_type or ["*"], max_in_flight=args.max_in_flight))
    if args.json:
        print(json.dumps({**dest.redacted(), "secret": secret if not args.secret else None}))
    else:
        print(f"added destination {dest.name} -> {dest.url}")
        if not args.secret:
            print(f"signing secret (shown once): {secret}")
    return 0


async def destinations_list(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations list`: secrets are never shown."""
    rows = [d.redacted() for d in await with_store(config, lambda s: s.list_destinations())]
    if args.json:
        print(json.dumps(rows))
        return 0
    print_table(rows, ["name", "url", "event_types", "max_in_flight", "paused"])
    return 0


async def jobs(config: Config, args: argparse.Namespace) -> int:
    """`hookline jobs [--status S]`: newest first."""
    rows = [_job_dict(j) for j in await with_store(
        config, lambda s: s.list_jobs(status=args.status, limit=args.limit))]
    if args.json:
        print(json.dumps(rows))
        return 0
    print_table(rows, ["id", "message_id", "event_type", "destination", "status", "attempts",
                       "last_error"])
    return 0


async def stats(config: Config, args: argparse.Namespace) -> int:
    """`hookline stats`: counts by status, events, attempts, oldest pending age."""
    st = await with_store(config, lambda s: s.stats())
    out = {"jobs": st.jobs_by_status, "events": st.events, "attempts": st.attempts,
           "oldest_pending_age_s": st.oldest_pending_age_s}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


def _job_dict(job: Any) -> dict[str, Any]:
    return {name: getattr(job, name) for name in job.__slots__}


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """Print `rows` as an aligned text table of `columns`."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(none)")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fail(message: str, code: int = 1) -> int:
    """Print `hookline: message` to stderr and return `code`."""
    print(f"hookline: {message}", file=sys.stderr)
    return code


def run_command(fn: Callable[[], Awaitable[int]]) -> int:
    """Run an async command; a HooklineError becomes a one-line message and exit code 1."""
    import asyncio  # noqa: PLC0415

    try:
        return asyncio.run(fn())
    except HooklineError as exc:
        return fail(str(exc))

"""Helpers shared by the CLI command modules: store access, tables, errors, exit codes.

Exit codes: 0 success, 1 the operation failed (not found, conflict, store error), 2 usage
(including a database refused as unable to keep the delivery promise).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from shared.config import Config
from shared.errors import HooklineError
from shared.storage_checks import StorageRefused
from shared.store import Store, store_for

T = TypeVar("T")


async def with_store(config: Config, fn: Callable[[Store], Awaitable[T]]) -> T:
    """Open the configured store, run `fn(store)`, close it."""
    store = store_for(config)
    await store.open()
    try:
        return await fn(store)
    finally:
        await store.close()


def run_command(fn: Callable[[], Awaitable[int]]) -> int:
    """Run an async command; a HooklineError becomes a one-line message and exit code 1,
    or 2 when the database was refused (:class:`StorageRefused`: fix the configuration)."""
    try:
        return asyncio.run(fn())
    except StorageRefused as exc:
        return fail(str(exc), 2)
    except HooklineError as exc:
        return fail(str(exc))


def fail(message: str, code: int = 1) -> int:
    """Print `hookline: message` to stderr and return `code`."""
    print(f"hookline: {message}", file=sys.stderr)
    return code


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


def as_dict(record: Any) -> dict[str, Any]:
    """A slotted frozen dataclass row as a plain dict."""
    return {name: getattr(record, name) for name in record.__slots__}

"""What the service checks of its database before it starts, whichever backend it is.

:func:`preflight` runs the storage checks once per service start (`hookline serve`, and
`serve --check`): on SQLite the folder, its filesystem and WAL mode
(:func:`hookline.shared.store.checks.storage_preflight`), then `PRAGMA quick_check` within a time
budget; nothing on PostgreSQL (opening it tells). The clock is re-anchored separately, once
the service holds its locks (:func:`hookline.shared.store.clock.reanchor_at_serve_start`).
:func:`database_file` and :func:`describe_database` let the CLI speak of the database without
knowing its backend.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookline.shared.db_url import sqlite_path
from hookline.shared.logs import get_logger
from hookline.shared.store.checks import quick_check, storage_preflight

if TYPE_CHECKING:
    from hookline.shared.config import Config

INCOMPLETE_REASON = ("stopped at quick_check_timeout_s; starting with the rest of the file "
                     "unchecked")


@dataclass(frozen=True)
class QuickCheck:
    """The outcome of `PRAGMA quick_check` on a SQLite database at start."""

    db: str
    finished: bool  # False: stopped at quick_check_timeout_s, the rest of the file unchecked
    seconds: float

    def log(self) -> None:
        """Log it as `serve` does: `quick_check_ok`, or `quick_check_incomplete` (warning)."""
        if self.finished:
            get_logger().info("quick_check_ok", db=self.db, seconds=self.seconds)
        else:
            get_logger().warning("quick_check_incomplete", db=self.db, seconds=self.seconds,
                                 reason=INCOMPLETE_REASON)

    def sentence(self) -> str:
        """It in words, for `serve --check`."""
        took = f"{self.seconds * 1000:.0f} ms"
        if self.finished:
            return f"database {self.db}: PRAGMA quick_check ok ({took})"
        return f"database {self.db}: PRAGMA quick_check {INCOMPLETE_REASON} ({took})"


async def preflight(config: Config) -> QuickCheck | None:
    """The storage checks of a service start (module docstring), before the store is opened.

    `PRAGMA quick_check` reads the whole file, so it runs here, once per service start, for
    at most `config.quick_check_timeout_s` seconds (0 = skip), not in each child (children
    are respawned) nor in each CLI command.

    Returns:
        What `PRAGMA quick_check` found, or None when it did not run (PostgreSQL, or
        `quick_check_timeout_s` = 0).

    Raises:
        StorageRefused: the database cannot keep the delivery promise there (damaged, in
            memory, a network filesystem without the opt-in, no WAL mode, ...).
    """
    storage_preflight(config.db, allow_network_filesystem=config.allow_network_filesystem)
    path = sqlite_path(config.db)
    if path is None or config.quick_check_timeout_s <= 0:
        return None
    started = time.monotonic()
    finished = await asyncio.to_thread(quick_check, path, timeout_s=config.quick_check_timeout_s,
                                       busy_timeout_s=config.busy_timeout_s)
    return QuickCheck(db=path, finished=finished, seconds=round(time.monotonic() - started, 3))


def database_file(db: str) -> str | None:
    """The absolute path of the file the `db` setting keeps its data in; None for a database
    on a server (nothing local to create or look for).

    Raises:
        ConfigError, StorageRefused: as :func:`hookline.shared.db_url.parse_db_url`.
    """
    path = sqlite_path(db)
    return None if path is None else os.path.abspath(path)


def describe_database(db: str) -> str:
    """The database in a few words for a message: `database /abs/path`, or the server's kind.

    Raises:
        ConfigError, StorageRefused: as :func:`hookline.shared.db_url.parse_db_url`.
    """
    path = database_file(db)
    return "PostgreSQL database" if path is None else f"database {path}"

"""Named SQL queries and ordered migrations, one set per backend, loaded once.

`<backend>.sql` holds blocks introduced by `-- name: one-line description`, and
`common.sql` those whose text is the same in every dialect; the same names exist for every
backend, with the same parameters and result columns. `<backend>_migrations/NNN_*.sql` are
applied in order at start.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_BLOCK = re.compile(r"^-- ([a-z_]+): .*$", re.MULTILINE)


@cache
def load_queries(backend: str) -> dict[str, str]:
    """Return {query name: SQL text} for `backend` (e.g. `sqlite`): common.sql's and its own.

    Raises:
        ValueError: a slip in a query file (:func:`parse_blocks`), or a name in both
            common.sql and the backend's file.
    """
    common, own = _blocks("common"), _blocks(backend)
    if both := sorted(common.keys() & own.keys()):
        raise ValueError(f"queries in both common.sql and {backend}.sql: {', '.join(both)}")
    return {**common, **own}


def _blocks(file: str) -> dict[str, str]:
    return parse_blocks(resources.files(__package__).joinpath(f"{file}.sql").read_text(),
                        f"{file}.sql")


def parse_blocks(text: str, file: str) -> dict[str, str]:
    """{query name: SQL text} of one query file's `text` (`file`: its name, for errors).

    Raises:
        ValueError: a block holds no statement (only comments), or a name comes twice.
            Either is a slip in the file, most likely a comment line inside a block's
            leading comment that reads `-- word: ...`, which starts a block of its own:
            reword it. (Such a line below the first line of SQL splits the statement in
            two without an error here; the statements then fail when run.)
    """
    parts = _BLOCK.split(text)
    # parts = [preamble, name1, sql1, name2, sql2, ...]
    found: dict[str, str] = {}
    for name, sql in zip(parts[1::2], parts[2::2], strict=True):
        statement = "\n".join(line for line in sql.splitlines()
                              if not line.lstrip().startswith("--")).strip()
        if not statement:
            raise ValueError(f"{file}: query {name!r} holds no statement (a comment line "
                             "reading '-- word: ...' starts a new query)")
        if name in found:
            raise ValueError(f"{file}: query {name!r} is defined twice")
        found[name] = sql.strip()
    return found


def newest_migration_on_disk(backend: str) -> int:
    """The highest migration number among `backend`'s migration files as they are on disk
    now (0 when none), read afresh on every call: what a process started now would migrate
    a database to (see supervisor/code_on_disk.py)."""
    folder = resources.files(__package__).joinpath(f"{backend}_migrations")
    return max((int(entry.name.split("_", 1)[0]) for entry in folder.iterdir()
                if entry.name.endswith(".sql")), default=0)


@cache
def load_migrations(backend: str) -> tuple[tuple[int, str], ...]:
    """Return ((version, SQL script), ...) in ascending version order."""
    folder = resources.files(__package__).joinpath(f"{backend}_migrations")
    steps = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            steps.append((int(entry.name.split("_", 1)[0]), entry.read_text()))
    return tuple(sorted(steps))

"""Run a per-row `INSERT ... VALUES (...)` for a whole batch as few SQLite statements.

A named query written for one row (`INSERT INTO t (a, b, c) VALUES (:a, :b, :now) ...
RETURNING id, a`) is run for N rows as statements of `VALUES (?, ?, ?), (?, ?, ?), ...`:
SQLite binds and inserts every row in one call, instead of one Python `execute` per row.
This is ingest's hot path: the events and jobs of a group commit.

Two costs are avoided on purpose:

* Compiling statements without end: a statement holds at most ROWS_PER_STATEMENT rows, so
  there are at most that many distinct statements per query, and they stay in the
  connection's statement cache (STATEMENT_CACHE_SIZE, the connection's setting).
* Fetching RETURNING rows one by one: Python's sqlite3 releases the GIL for every row it
  steps, and the event loop thread, busy answering requests, takes it each time, so each
  row waited for a turn of the GIL (measured: 20-45 us per row beside a busy thread, against
  4-6 us alone). Instead, the rows inserted are read back as ONE row: every rowid above the
  table's largest before the insert (the tables are AUTOINCREMENT, so a new rowid is above
  every earlier one, and the caller's transaction holds the write lock), as a JSON array.
  So such an insert must let SQLite choose the rowid: a row given an explicit id below the
  table's largest would not be read back.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ROWS_PER_STATEMENT = 64
"""Most rows one statement inserts (a batch of 93 jobs: 64 + 29)."""
STATEMENT_CACHE_SIZE = 256
"""Statements the SQLite connection keeps compiled: room for every size of both multi-row
inserts (events, jobs) beside the store's other named queries."""

_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)\s*\(", re.IGNORECASE)
_VALUES = re.compile(r"\bVALUES\s*\(([^()]*)\)", re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b(.*)$", re.IGNORECASE | re.DOTALL)
_NAME = re.compile(r"^\w+$")
_DO_UPDATE = re.compile(r"\bDO\s+UPDATE\b", re.IGNORECASE)
_PARAM = re.compile(r"^:(\w+)$")


@dataclass(frozen=True, slots=True)
class RowInsert:
    """A one-row INSERT split around its VALUES tuple: `head VALUES (row) tail`, with the
    parameter name of each column of the tuple, its table, and the columns its RETURNING
    clause names (empty without one; `tail` no longer holds it)."""

    head: str
    names: tuple[str, ...]
    tail: str
    table: str
    returning: tuple[str, ...]

    def sql(self, rows: int) -> str:
        """The statement for `rows` rows, with positional parameters and no RETURNING."""
        one = "(" + ", ".join("?" * len(self.names)) + ")"
        return f"{self.head}VALUES {', '.join([one] * rows)}{self.tail}"

    def read_back_sql(self) -> str:
        """One row, one column: the RETURNING columns of every row whose rowid is above the
        parameter, as a JSON array of arrays in rowid order."""
        columns = ", ".join(self.returning)  # identifiers of our own named query (row_insert)
        return (f"SELECT json_group_array(json_array({columns})) FROM "  # noqa: S608
                f"(SELECT {columns} FROM {self.table} WHERE rowid > ? ORDER BY rowid)")


@functools.cache
def row_insert(sql: str) -> RowInsert | None:
    """`sql` split as a RowInsert when it is an `INSERT INTO table (...)` whose one VALUES
    tuple holds only `:name` parameters and whose RETURNING clause (if any) names plain
    columns; None for any other statement (run it once per row instead), an upsert that
    updates included: the row it updates keeps its rowid, so a read-back by rowid misses it."""
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    table = _INSERT.match(code)
    found = list(_VALUES.finditer(code))
    if table is None or len(found) != 1:
        return None
    names = []
    for item in found[0].group(1).split(","):
        param = _PARAM.match(item.strip())
        if param is None:
            return None
        names.append(param.group(1))
    start, end = found[0].span()
    tail = code[end:]
    if _DO_UPDATE.search(tail):
        return None
    returning: tuple[str, ...] = ()
    clause = _RETURNING.search(tail)
    if clause is not None:
        returning = tuple(column.strip() for column in clause.group(1).split(","))
        if not all(_NAME.match(column) for column in returning):
            return None
        tail = tail[:clause.start()].rstrip()
    return RowInsert(code[:start], tuple(names), tail, table.group(1), returning)


@functools.cache
def _statement(insert: RowInsert, rows: int) -> str:
    return insert.sql(rows)


def chunk_sizes(rows: int, most: int) -> list[int]:
    """`rows` cut into chunks of at most `most` (>= 1), the full ones first."""
    return [most] * (rows // most) + ([rows % most] if rows % most else [])


def insert_rows(db: sqlite3.Connection, insert: RowInsert, columns: Sequence[str],
                rows: Sequence[Sequence[Any]], extra: dict[str, Any]) -> list[dict[str, Any]]:
    """Insert every row of `rows` inside the caller's write transaction and return what the
    RETURNING clause names for each row inserted (a row skipped by `ON CONFLICT DO NOTHING`
    returns nothing, as with RETURNING), as dicts in insertion order.

    Args:
        db: the connection, inside a write transaction (BEGIN IMMEDIATE).
        insert: the statement (row_insert).
        columns: the name of each value of a row, in order.
        rows: the rows' values.
        extra: the value of a tuple parameter that is not a column (e.g. `now`).

    Raises:
        RuntimeError: `insert` has a RETURNING clause and `db` is not in a transaction.
        KeyError: a parameter of the tuple is neither a column nor in `extra`.
        sqlite3.Error: as the statement raises it (the caller's transaction rolls back).
    """
    where = {name: i for i, name in enumerate(columns)}
    fixed = {name: extra[name] for name in insert.names if name not in where}
    picks = [(where.get(name, -1), name) for name in insert.names]
    per_statement = max(1, min(ROWS_PER_STATEMENT,
                               db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
                               // max(1, len(insert.names))))
    before = 0
    if insert.returning and not db.in_transaction:  # else another writer could slip in
        raise RuntimeError(f"a multi-row insert into {insert.table} read back by rowid "
                           "needs the caller's write transaction")
    if insert.returning:
        largest = f"SELECT coalesce(max(rowid), 0) FROM {insert.table}"  # noqa: S608  (ours)
        before = db.execute(largest).fetchone()[0]
    at = 0
    for size in chunk_sizes(len(rows), per_statement):
        db.execute(_statement(insert, size),
                   [row[i] if i >= 0 else fixed[name]
                    for row in rows[at:at + size] for i, name in picks])
        at += size
    if not insert.returning:
        return []
    [inserted] = db.execute(insert.read_back_sql(), (before,)).fetchone()
    return [dict(zip(insert.returning, values, strict=True))
            for values in json.loads(inserted)]

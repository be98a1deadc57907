"""Run a per-row `INSERT ... VALUES (...)` for a whole batch as few SQLite statements.

A named query written for one row (`INSERT INTO t (a, b, c) VALUES (:a, :b, :now) ...
RETURNING id, a`) is run for N rows as statements of `VALUES (?, ?, ?), (?, ?, ?), ...`:
SQLite binds and inserts every row in one call, instead of one Python `execute` per row.
This is ingest's hot path: the events and jobs of a group commit.

Three costs are avoided on purpose:

* Compiling statements without end: a statement holds at most ROWS_PER_STATEMENT rows, so
  there are at most that many distinct statements per query, and they stay in the
  connection's statement cache (STATEMENT_CACHE_SIZE, the connection's setting).
* Fetching RETURNING rows one by one: Python's sqlite3 releases the GIL for every row it
  steps, and the event loop thread, busy answering requests, takes it each time, so each
  row waited for a turn of the GIL (measured: 20-45 us per row beside a busy thread, against
  4-6 us alone).
* Statements for the read-back at all, in the common case. Each `execute` gives the GIL up
  too (a wait of about 0.2 ms beside ingest's busy event loop, while the write lock is held).
  The rows one statement inserts, when it inserts every row it was given, have consecutive
  rowids ending at its last insert rowid: SQLite gives each new row the next rowid above the
  table's largest (above every rowid ever used, for these AUTOINCREMENT tables), and nothing
  else writes between the rows of one statement. So row k got `last - n + 1 + k`, and the
  RETURNING values are that rowid (the table's INTEGER PRIMARY KEY) and values the row
  bound, as bound: no statement runs to read them. (A value SQLite's type affinity would
  convert is read back instead.) An insert that may skip rows (`ON CONFLICT ... DO
  NOTHING`) reads the table's largest rowid first, since a skipped row still uses up a
  rowid: when one statement skipped any row, every row above that largest is read back
  at the end, in ONE statement, as ONE row of JSON (in the caller's transaction: it holds
  the write lock, so those rows are this batch's). So such an insert must let SQLite choose
  the rowid, of an AUTOINCREMENT table (one that binds the rowid, or whose table is not
  AUTOINCREMENT, is refused: its rowids need not follow each other).
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
_ON_CONFLICT = re.compile(r"\bON\s+CONFLICT\b", re.IGNORECASE)
_PARAM = re.compile(r"^:(\w+)$")


@dataclass(frozen=True, slots=True)
class RowInsert:
    """A one-row INSERT split around its VALUES tuple: `head VALUES (row) tail`, with the
    parameter name of each column of the tuple, its table, the columns its RETURNING clause
    names (empty without one; `tail` no longer holds it), and the INSERT's column list (the
    column each parameter is stored in)."""

    head: str
    names: tuple[str, ...]
    tail: str
    table: str
    returning: tuple[str, ...]
    columns: tuple[str, ...]
    skips: bool
    """`ON CONFLICT ... DO NOTHING`: a row may be left out."""

    def sql(self, rows: int) -> str:
        """The statement for `rows` rows, with positional parameters and no RETURNING."""
        one = "(" + ", ".join("?" * len(self.names)) + ")"
        return f"{self.head}VALUES {', '.join([one] * rows)}{self.tail}"

    def read_back_sql(self, ranged: bool) -> str:
        """One row, one column: the RETURNING columns of every row whose rowid is above the
        parameter (`ranged`: between the two parameters, inclusive), as a JSON array of
        arrays in rowid order."""
        columns = ", ".join(self.returning)  # identifiers of our own named query (row_insert)
        rowids = "rowid BETWEEN ? AND ?" if ranged else "rowid > ?"
        return (f"SELECT json_group_array(json_array({columns})) FROM "  # noqa: S608  (identifiers of our own named query)
                f"(SELECT {columns} FROM {self.table} WHERE {rowids} ORDER BY rowid)")


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
    columns = tuple(c.strip() for c in code[table.end():].split(")", 1)[0].split(","))
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
    if len(columns) != len(names) or not all(_NAME.match(column) for column in columns):
        return None
    return RowInsert(code[:start], tuple(names), tail, table.group(1), returning, columns,
                     skips=bool(_ON_CONFLICT.search(tail)))


@functools.cache
def _statement(insert: RowInsert, rows: int) -> str:
    return insert.sql(rows)


def chunk_sizes(rows: int, most: int) -> list[int]:
    """`rows` cut into chunks of at most `most` (>= 1), the full ones first."""
    return [most] * (rows // most) + ([rows % most] if rows % most else [])


_PYTHON_TYPES = {"INTEGER": int, "TEXT": str, "BLOB": bytes, "REAL": float}


TableShape = tuple[str | None, dict[str, type]]
"""(the column that is a table's rowid, its INTEGER PRIMARY KEY AUTOINCREMENT, or None for
a table without one; the Python type each column of a plain declared type stores a value
of as given)."""

_QUOTED_OR_COMMENT = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/",
                                re.DOTALL)
_AUTOINCREMENT = re.compile(r"\bAUTOINCREMENT\b", re.IGNORECASE)


def table_shape(db: sqlite3.Connection, table: str) -> TableShape:
    """The shape of `table`, read from the schema; kept in the connection's `table_shapes`
    dict when it has one (the store's connections), read again each time otherwise."""
    shapes: dict[str, TableShape] | None = getattr(db, "table_shapes", None)
    if shapes is not None and table in shapes:
        return shapes[table]
    info = db.execute(f"PRAGMA table_info({table})").fetchall()  # ours: row_insert's name
    keys = [row[1] for row in info if row[5]]
    declared = {row[1]: str(row[2]).upper() for row in info}
    # Only AUTOINCREMENT makes every new rowid the next one (a plain rowid table at its
    # largest rowid picks them at random), and SQLite allows it only on the rowid itself
    # (not on `PRIMARY KEY DESC`, nor in a WITHOUT ROWID table).
    found = db.execute("SELECT sql FROM sqlite_temp_master WHERE type = 'table' AND name = ?1 "
                       "COLLATE NOCASE UNION ALL SELECT sql FROM sqlite_master "
                       "WHERE type = 'table' AND name = ?1 COLLATE NOCASE", (table,)).fetchone()
    autoincrement = found and _AUTOINCREMENT.search(_QUOTED_OR_COMMENT.sub(" ", found[0]))
    rowid = keys[0] if autoincrement and len(keys) == 1 else None
    shape = (rowid, {column: _PYTHON_TYPES[kind] for column, kind in declared.items()
                     if kind in _PYTHON_TYPES})
    if shapes is not None:
        shapes[table] = shape
    return shape


def insert_rows(db: sqlite3.Connection, insert: RowInsert, columns: Sequence[str],
                rows: Sequence[Sequence[Any]], extra: dict[str, Any]) -> list[dict[str, Any]]:
    """Insert every row of `rows` inside the caller's write transaction and return what the
    RETURNING clause names for each row inserted (a row skipped by `ON CONFLICT DO NOTHING`
    returns nothing, as with RETURNING), as dicts in insertion order.

    Args:
        db: the connection, inside a write transaction (BEGIN IMMEDIATE) when the insert
            may skip rows and returns any.
        insert: the statement (row_insert).
        columns: the name of each value of a row, in order.
        rows: the rows' values.
        extra: the value of a tuple parameter that is not a column (e.g. `now`).

    Raises:
        RuntimeError: `insert` has a RETURNING clause and its table is not AUTOINCREMENT,
            or it binds the rowid itself, or it may skip rows and `db` is not in a
            transaction (nothing is inserted).
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
    returned = _returned_from_rows(db, insert, where) if insert.returning else None
    if insert.returning and insert.skips:
        if not db.in_transaction:  # else another writer could slip in before the read-back
            raise RuntimeError(f"a multi-row insert into {insert.table} read back by rowid "
                               "needs the caller's write transaction")
        largest = f"SELECT coalesce(max(rowid), 0) FROM {insert.table}"  # noqa: S608  (ours)
        before = db.execute(largest).fetchone()[0]
    found: list[dict[str, Any]] = []
    skipped = False
    at = 0
    for size in chunk_sizes(len(rows), per_statement):
        chunk = rows[at:at + size]
        cursor = db.execute(_statement(insert, size),
                            [row[i] if i >= 0 else fixed[name]
                             for row in chunk for i, name in picks])
        at += size
        inserted, last = cursor.rowcount, cursor.lastrowid
        if inserted != size:
            if not insert.skips:
                raise RuntimeError(f"{inserted} of {size} rows inserted into {insert.table}")
            skipped = True
        if skipped or not insert.returning or last is None:
            continue
        first = last - size + 1
        if returned is not None and _as_stored(returned, chunk, fixed):
            found += [{column: first + k if index is None else
                       (row[index] if isinstance(index, int) else fixed[index])
                       for column, index, _ in returned} for k, row in enumerate(chunk)]
        else:
            found += _read_back(db, insert, first, last)
    if skipped and insert.returning:
        return _read_back(db, insert, before)
    return found


def _read_back(db: sqlite3.Connection, insert: RowInsert, *rowids: int) -> list[dict[str, Any]]:
    """The RETURNING columns of the rows above `rowids[0]` (or between both), in ONE step."""
    [packed] = db.execute(insert.read_back_sql(ranged=len(rowids) == 2), rowids).fetchone()
    return [dict(zip(insert.returning, values, strict=True)) for values in json.loads(packed)]


_Returned = list[tuple[str, int | str | None, type | None]]


def _returned_from_rows(db: sqlite3.Connection, insert: RowInsert,
                        where: dict[str, int]) -> _Returned | None:
    """How each RETURNING column comes from an inserted row without reading it back: None
    for the rowid, the row's value index or `extra`'s parameter name for a bound column,
    with the Python type the column stores as given; None when a column is neither (a
    default, an expression: then rows are read back).

    Raises:
        RuntimeError: the table is not AUTOINCREMENT, or `insert` binds its rowid: the
            rows' rowids cannot be counted back from the statement, nor read back above
            the table's largest.
    """
    rowid, types = table_shape(db, insert.table)
    if rowid is None or rowid in insert.columns:
        raise RuntimeError(f"a multi-row insert into {insert.table} returning rows needs an "
                           "AUTOINCREMENT table that chooses each rowid itself")
    param_of = dict(zip(insert.columns, insert.names, strict=True))
    returned: _Returned = []
    for column in insert.returning:
        if column == rowid:
            returned.append((column, None, None))
        elif column in param_of and column in types:
            param = param_of[column]
            returned.append((column, where.get(param, param), types[column]))
        else:
            return None
    return returned


def _as_stored(returned: _Returned, chunk: Sequence[Sequence[Any]],
               fixed: dict[str, Any]) -> bool:
    """Whether every bound value a RETURNING column takes is stored as given: of its
    column's declared type, or NULL (else SQLite's type affinity may convert it)."""
    for _, index, kind in returned:
        if index is None or kind is None:
            continue
        values = [row[index] for row in chunk] if isinstance(index, int) else [fixed[index]]
        if not all(value is None or type(value) is kind for value in values):
            return False
        if kind is float and not all(value == value for value in values):
            return False  # a NaN is stored as NULL
    return True

"""The store's multi-row inserts (shared/store/sqlite_rows.py) answer exactly what running
the same named query once per row answers, ids included, and what is stored: for any batch
of events with repeats (inside the batch, of stored events, at any row of a statement),
the jobs of the events answered, values SQLite's type affinity converts, and after
deletes, explicitly placed ids (as a restored snapshot holds) and a moved sqlite_sequence.

Two copies of one real store database take the same steps: one through `insert_rows`
(ids counted back from the statement, or read back), the other through plain one-row
`INSERT ... RETURNING` statements, the oracle."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.shared.store.sqlite import Q, SqliteStore
from hookline.shared.store.sqlite_rows import (
    ROWS_PER_STATEMENT,
    TableShape,
    insert_rows,
    row_insert,
)

PROPERTY = settings(max_examples=60, derandomize=True, database=None, deadline=None)
EVENT_COLUMNS = ("message_id", "tenant_id", "source", "source_event_id", "type", "body",
                 "forwarded_headers", "trace_context", "schema_problem")
JOB_COLUMNS = ("event_ids", "destination_ids")
DESTINATIONS = 3
KEYS = 90  # idempotency keys drawn from few enough that batches repeat each other


class _Connection(sqlite3.Connection):
    """Keeps the table shapes as the store's connections do (read once per table)."""

    table_shapes: dict[str, TableShape] | None = None


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated store database with DESTINATIONS destinations, as one file."""
    path = tmp_path_factory.mktemp("rows") / "template.db"

    async def create() -> None:
        async with SqliteStore(str(path)) as store:
            for n in range(DESTINATIONS):
                await store.add_destination(name=f"d{n}", url=f"http://127.0.0.1:9/{n}",
                                            secret="whsec_" + "A" * 32, event_types=["*"],
                                            max_in_flight=1)

    asyncio.run(create())
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = DELETE")  # the WAL folded in: one file to copy
    db.close()
    return path


class Pair:
    """The batched copy and the one-row copy of the template, stepped alike."""

    def __init__(self, template: Path) -> None:
        self.batched, self.one_by_one = (self._open(template, name)
                                         for name in ("batched.db", "one.db"))
        self.serial = 0

    @staticmethod
    def _open(template: Path, name: str) -> sqlite3.Connection:
        path = template.with_name(name)
        shutil.copyfile(template, path)
        db = sqlite3.connect(path, isolation_level=None, factory=_Connection)
        assert isinstance(db, _Connection)
        db.table_shapes = {}
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA foreign_keys = ON")
        return db

    def close(self) -> None:
        self.batched.close()
        self.one_by_one.close()

    def both(self, sql: str, params: Sequence[Any] = ()) -> None:
        for db in (self.batched, self.one_by_one):
            db.execute(sql, params)

    def insert(self, name: str, columns: tuple[str, ...], rows: Sequence[Sequence[Any]],
               now: float) -> list[dict[str, Any]]:
        """Run the named insert both ways in one write transaction each; assert both answer
        alike and the batched answer is what the batched copy stores. The answer."""
        insert = row_insert(Q[name])
        assert insert is not None
        self.both("BEGIN IMMEDIATE")
        got = insert_rows(self.batched, insert, columns, rows, {"now": now})
        want: list[dict[str, Any]] = []
        for row in rows:
            want += [dict(r) for r in self.one_by_one.execute(
                Q[name], {"now": now, **dict(zip(columns, row, strict=True))})]
        self.both("COMMIT")
        assert got == want
        table = insert.table
        returned = ", ".join(insert.returning)
        for answer in got:
            stored = self.batched.execute(f"SELECT {returned} FROM {table} "
                                          "WHERE id = ?", (answer["id"],)).fetchone()
            assert dict(stored) == answer
        return got

    def events(self, keys: Sequence[int | str | float], now: float) -> list[dict[str, Any]]:
        rows = []
        for key in keys:
            self.serial += 1
            # An int or float key is stored as TEXT (type affinity), so answered as text.
            source = "api" if not isinstance(key, int) or key % 2 else "stripe"
            rows.append((f"msg_{self.serial}", "_default", source, key, "t",
                         b"\xff\x00" + self.serial.to_bytes(4, "big"), None, None, None))
        return self.insert("insert_event", EVENT_COLUMNS, rows, now)

    def jobs(self, answered: Sequence[dict[str, Any]], now: float) -> None:
        stored = [r["id"] for r in self.batched.execute(
            "SELECT id FROM events ORDER BY id DESC LIMIT 3")]
        event_ids = [r["id"] for r in answered] + stored
        pairs: list[tuple[Any, Any]] = [(e, d) for e in event_ids
                                        for d in range(1, DESTINATIONS + 1)]
        if pairs:
            pairs[len(pairs) // 2] = (str(pairs[len(pairs) // 2][0]), 1)  # '7' stored as 7
        self.insert("insert_jobs", JOB_COLUMNS, pairs, now)

    def disturb(self, how: str) -> None:
        """Move the tables' rowids the way deletes, restores or copies can."""
        self.both("BEGIN IMMEDIATE")
        if how == "delete the newest events":
            top = self.batched.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]
            self.both("DELETE FROM jobs WHERE event_id > ?", (top - 5,))
            self.both("DELETE FROM events WHERE id > ?", (top - 5,))
        elif how.startswith("an event placed "):
            top = self.batched.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]
            self.serial += 1
            self.both("INSERT INTO events (id, message_id, source, source_event_id, type, body,"
                      " received_at) VALUES (?, ?, 'placed', ?, 't', x'00', 0)",
                      (max(top + 1, int(how.rsplit(" ", 1)[1])), f"msg_{self.serial}",
                       str(self.serial)))
        elif how == "sqlite_sequence ahead":
            self.both("UPDATE sqlite_sequence SET seq = seq + 1000")
        elif how == "sqlite_sequence behind":
            self.both("UPDATE sqlite_sequence SET seq = 0")
        self.both("COMMIT")


@pytest.fixture
def pair(template: Path) -> Iterator[Pair]:
    both = Pair(template)
    yield both
    both.close()


_SIZES = st.sampled_from([1, 2, ROWS_PER_STATEMENT - 1, ROWS_PER_STATEMENT,
                          ROWS_PER_STATEMENT + 1, 2 * ROWS_PER_STATEMENT,
                          2 * ROWS_PER_STATEMENT + 1]) | st.integers(0, 140)
_KEY = st.integers(0, KEYS).map(str) | st.integers(0, KEYS) | st.just(2.5)
_DISTURBANCES = st.sampled_from([
    "none", "delete the newest events", "an event placed at 5000",
    f"an event placed at {2**62}", "sqlite_sequence ahead", "sqlite_sequence behind"])
"""(`an event placed at N`: at N, or above the newest event when N is taken.)"""


@st.composite
def _batch(draw: st.DrawFn) -> tuple[str, list[int | str | float]]:
    """A disturbance, then a batch's keys: mostly distinct strings, some repeated, a few
    of another type, in a batch sized around the statement bound."""
    size = draw(_SIZES)
    fresh = draw(st.integers(0, 10**6))
    keys: list[int | str | float] = [f"new-{fresh}-{n}" for n in range(size)]
    for at in draw(st.lists(st.integers(0, max(0, size - 1)), max_size=6 if size else 0)):
        keys[at] = draw(_KEY)
    if size and draw(st.booleans()):  # a repeat at the first, middle or last row of each
        for start in range(0, size, ROWS_PER_STATEMENT):  # statement, or none of them
            end = min(size, start + ROWS_PER_STATEMENT) - 1
            at = draw(st.sampled_from([start, (start + end) // 2, end, -1]))
            if at >= 0:
                keys[at] = draw(_KEY)
    return draw(_DISTURBANCES), keys


@PROPERTY
@given(steps=st.lists(_batch(), min_size=1, max_size=4))
def test_any_batch_answers_what_one_row_statements_answer(
        template: Path, steps: list[tuple[str, list[int | str | float]]]) -> None:
    both = Pair(template)
    try:
        for n, (disturbance, keys) in enumerate(steps):
            both.disturb(disturbance)
            both.jobs(both.events(keys, now=1.8e9 + n), now=1.8e9 + n)
    finally:
        both.close()


@pytest.mark.parametrize("repeats", [
    pytest.param(lambda n: {0}, id="first row"),
    pytest.param(lambda n: {31}, id="middle row"),
    pytest.param(lambda n: {n - 1}, id="last row"),
    pytest.param(lambda n: set(range(n)), id="every row"),
    pytest.param(lambda n: {ROWS_PER_STATEMENT} if n > ROWS_PER_STATEMENT else {n // 2},
                 id="a later statement only"),
    pytest.param(lambda n: {ROWS_PER_STATEMENT - 1}, id="the first statement only"),
])
@pytest.mark.parametrize("size", [ROWS_PER_STATEMENT, ROWS_PER_STATEMENT + 1,
                                  2 * ROWS_PER_STATEMENT, 2 * ROWS_PER_STATEMENT + 1])
def test_repeats_at_statement_edges(pair: Pair, size: int, repeats: Any) -> None:
    """A stored event repeated at the named rows of a batch; the other rows new, and a
    second batch all new after it (its ids continue past the rowids the skips used up)."""
    stored = pair.events([f"stored-{n}" for n in range(size)], now=1.0)
    keys = [f"stored-{n}" if n in repeats(size) else f"new-{n}" for n in range(size)]
    answered = pair.events(keys, now=2.0)
    assert [r["source_event_id"] for r in answered] == [k for k in keys
                                                       if k.startswith("new-")]
    pair.jobs(stored + answered, now=2.0)
    pair.jobs(pair.events([f"after-{n}" for n in range(size)], now=3.0), now=3.0)


def test_ids_up_to_the_largest_rowid(pair: Pair) -> None:
    """A restored or copied event placed just below SQLite's largest rowid: a batch of two
    statements takes every id up to the largest, counted back from the statement."""
    largest = 2**63 - 1
    size = 2 * ROWS_PER_STATEMENT + 1
    pair.disturb(f"an event placed at {largest - size}")
    answered = pair.events([f"high-{n}" for n in range(size)], now=1.0)
    assert [r["id"] for r in answered] == list(range(largest - size + 1, largest + 1))
    pair.jobs(answered[-2:], now=1.0)

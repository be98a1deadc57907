"""Multi-row inserts on SQLite (shared/store/sqlite_rows.py), on real database files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hookline.shared.models import Accepted, Duplicate, NewEvent
from hookline.shared.store.sqlite import Q, SqliteStore
from hookline.shared.store.sqlite_rows import (
    ROWS_PER_STATEMENT,
    chunk_sizes,
    insert_rows,
    row_insert,
)

_ITEMS = """
CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE,
                    size INTEGER NOT NULL, at REAL NOT NULL)
"""
_INSERT_ITEM = """-- insert_item: one item unless its name is taken
INSERT INTO items (name, size, at) VALUES (:name, :size, :now)
ON CONFLICT (name) DO NOTHING
RETURNING id, name
"""


def test_the_store_inserts_are_recognised():
    events, jobs = row_insert(Q["insert_event"]), row_insert(Q["insert_jobs"])
    assert events is not None and events.table == "events"
    assert events.returning == ("id", "message_id", "tenant_id", "source", "source_event_id")
    assert jobs is not None and jobs.table == "jobs"
    assert jobs.returning == ("id", "event_id", "destination_id")
    assert "RETURNING" not in events.sql(3)
    assert events.sql(3).count("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)") == 3


@pytest.mark.parametrize("sql", [
    "SELECT 1",
    "UPDATE items SET size = :size",
    "INSERT INTO items (name, size, at) VALUES (:name, :size + 1, :now)",
    "INSERT INTO items (name, size, at) SELECT name, size, at FROM other",
    "INSERT INTO items (name, size, at) VALUES (:name, :size, :now) RETURNING id + 1",
])
def test_other_statements_run_row_by_row(sql):
    assert row_insert(sql) is None


def test_chunks_are_full_first():
    assert chunk_sizes(0, 64) == []
    assert chunk_sizes(93, 64) == [64, 29]
    assert chunk_sizes(128, 64) == [64, 64]
    assert chunk_sizes(5, 1) == [1] * 5


@pytest.fixture
def items(tmp_path: Path):
    db = sqlite3.connect(tmp_path / "items.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(_ITEMS)
    yield db
    db.close()


def test_every_row_is_inserted_and_read_back_in_order(items):
    insert = row_insert(_INSERT_ITEM)
    assert insert is not None
    rows = [(f"item-{n}", n) for n in range(ROWS_PER_STATEMENT * 2 + 7)]  # three statements
    items.execute("BEGIN IMMEDIATE")
    back = insert_rows(items, insert, ("name", "size"), rows, {"now": 1.5})
    items.execute("COMMIT")
    assert [r["name"] for r in back] == [name for name, _ in rows]
    stored = items.execute("SELECT id, name, size, at FROM items ORDER BY id").fetchall()
    assert [(r["id"], r["name"]) for r in back] == [(i, name) for i, name, _, _ in stored]
    assert {(name, size, at) for _, name, size, at in stored} == {
        (name, size, 1.5) for name, size in rows}


def test_a_row_skipped_on_conflict_returns_nothing(items):
    insert = row_insert(_INSERT_ITEM)
    assert insert is not None
    items.execute("BEGIN IMMEDIATE")
    first = insert_rows(items, insert, ("name", "size"), [("a", 1), ("b", 2)], {"now": 0.0})
    again = insert_rows(items, insert, ("name", "size"), [("b", 3), ("c", 4), ("a", 5)],
                        {"now": 0.0})
    items.execute("COMMIT")
    assert [r["name"] for r in first] == ["a", "b"]
    assert [r["name"] for r in again] == ["c"]
    assert items.execute("SELECT size FROM items WHERE name = 'b'").fetchone()[0] == 2


async def test_a_batch_larger_than_one_statement_fans_out_once_per_event(tmp_path: Path):
    async with SqliteStore(str(tmp_path / "h.db")) as store:
        for name in ("a", "b", "c"):
            await store.add_destination(name=name, url=f"https://example.com/{name}",
                                        secret="whsec_" + "A" * 32, event_types=["*"],
                                        max_in_flight=8)
        count = ROWS_PER_STATEMENT + 9  # events in two statements, jobs in four
        events = [NewEvent(source="app", source_event_id=f"e{n % (count - 3)}", type="t",
                           body=b"{}") for n in range(count)]  # the last 3 repeat the first 3
        results = await store.add_events(events)
        accepted = [r for r in results if isinstance(r, Accepted)]
        assert len(accepted) == count - 3
        assert all(isinstance(r, Duplicate) for r in results[-3:])
        assert [r.event_id for r in results[-3:]] == [r.event_id for r in results[:3]]
        assert all(len(r.job_ids) == 3 for r in accepted)
        job_ids = [job for r in accepted for job in r.job_ids]
        assert len(set(job_ids)) == len(job_ids) == 3 * (count - 3)
        stored = {j.id: j.event_id for j in await store.list_jobs(limit=10_000)}
        assert stored == {job: r.event_id for r in accepted for job in r.job_ids}


def test_rows_skipped_in_a_later_statement_read_every_row_back(items):
    """The first statement inserts all its rows (their ids known from the statement), the
    second skips one: every row of the batch is then read back, and a skipped row's used-up
    rowid does not shift anyone's id."""
    insert = row_insert(_INSERT_ITEM)
    assert insert is not None
    items.execute("INSERT INTO items (name, size, at) VALUES ('taken', 0, 0)")
    rows = [(f"item-{n}", n) for n in range(ROWS_PER_STATEMENT)] + [("x", 1), ("taken", 2),
                                                                    ("y", 3)]
    items.execute("BEGIN IMMEDIATE")
    back = insert_rows(items, insert, ("name", "size"), rows, {"now": 0.0})
    items.execute("COMMIT")
    stored = items.execute("SELECT id, name FROM items WHERE name != 'taken' ORDER BY id")
    assert [(r["id"], r["name"]) for r in back] == stored.fetchall()
    assert [r["name"] for r in back] == [name for name, _ in rows if name != "taken"]


def test_ids_come_from_the_statement_when_no_row_is_skipped(items):
    """With nothing skipped, the ids are the statement's last insert rowid counted back, and
    the other columns the values bound: they match what is stored, after deleted rows and
    across statements."""
    insert = row_insert(_INSERT_ITEM)
    assert insert is not None
    items.execute("INSERT INTO items (name, size, at) VALUES ('old', 0, 0)")
    items.execute("DELETE FROM items")  # AUTOINCREMENT: id 1 is never used again
    rows = [(f"item-{n}", n) for n in range(ROWS_PER_STATEMENT + 3)]
    items.execute("BEGIN IMMEDIATE")
    back = insert_rows(items, insert, ("name", "size"), rows, {"now": 0.0})
    items.execute("COMMIT")
    stored = items.execute("SELECT id, name FROM items ORDER BY id").fetchall()
    assert [(r["id"], r["name"]) for r in back] == stored
    assert back[0]["id"] == 2


def test_a_value_the_column_converts_is_answered_as_stored(items):
    """SQLite's type affinity stores 7 bound to a TEXT column as '7': RETURNING answers
    '7', and so must the batch (read back, not taken from the bound value)."""
    insert = row_insert(_INSERT_ITEM)
    assert insert is not None
    items.execute("BEGIN IMMEDIATE")
    back = insert_rows(items, insert, ("name", "size"), [(7, 1), ("eight", 2)], {"now": 0.0})
    items.execute("COMMIT")
    assert [r["name"] for r in back] == ["7", "eight"]


@pytest.mark.parametrize("table", [
    pytest.param("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)", id="no AUTOINCREMENT"),
    pytest.param("CREATE TABLE things (id INTEGER PRIMARY KEY DESC, name TEXT)",
                 id="PRIMARY KEY DESC, not the rowid"),
    pytest.param("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT DEFAULT "
                 "'AUTOINCREMENT' /* AUTOINCREMENT */)", id="the word only quoted"),
])
def test_returning_ids_needs_a_table_whose_new_rowids_follow_each_other(tmp_path: Path, table):
    """Counting ids back from the statement (or reading rows back by rowid) holds only where
    SQLite gives each new row the next rowid: an AUTOINCREMENT table. Elsewhere (a plain
    rowid table at its largest rowid picks rowids at random; a `PRIMARY KEY DESC` column is
    no rowid) the insert is refused before any row goes in, never answered with ids other
    than those stored."""
    db = sqlite3.connect(tmp_path / "things.db", isolation_level=None)
    try:
        db.execute(table)
        db.execute("INSERT INTO things (id, name) VALUES (9223372036854775807, 'top')")
        insert = row_insert("INSERT INTO things (name) VALUES (:name) RETURNING id, name")
        assert insert is not None
        db.execute("BEGIN IMMEDIATE")
        with pytest.raises(RuntimeError, match="AUTOINCREMENT"):
            insert_rows(db, insert, ("name",), [("a",), ("b",)], {})
        db.execute("ROLLBACK")
        assert db.execute("SELECT count(*) FROM things WHERE name != 'top'").fetchone() == (0,)
        silent = row_insert("INSERT INTO things (id, name) VALUES (:id, :name)")
        assert silent is not None  # an insert that returns nothing needs no ids
        assert insert_rows(db, silent, ("id", "name"), [(1, "x"), (2, "y")], {}) == []
    finally:
        db.close()


def test_a_batch_that_gives_the_ids_itself_is_refused(items):
    """The ids are counted back from the statement, so SQLite must choose them: a batch that
    binds the id column (here 5 then 3) is refused rather than answered 2 and 3."""
    insert = row_insert("INSERT INTO items (id, name, size, at) "
                        "VALUES (:id, :name, :size, :now) RETURNING id, name")
    assert insert is not None
    items.execute("BEGIN IMMEDIATE")
    with pytest.raises(RuntimeError, match="chooses"):
        insert_rows(items, insert, ("id", "name", "size"), [(5, "a", 1), (3, "b", 2)],
                    {"now": 0.0})
    items.execute("ROLLBACK")


def test_a_nan_bound_to_a_real_column_is_answered_as_stored(items):
    """SQLite stores a NaN as NULL: RETURNING answers None, and so must the batch (read
    back, not taken from the bound value)."""
    items.execute("CREATE TABLE readings (id INTEGER PRIMARY KEY AUTOINCREMENT, value REAL)")
    insert = row_insert("INSERT INTO readings (value) VALUES (:value) RETURNING id, value")
    assert insert is not None
    items.execute("BEGIN IMMEDIATE")
    back = insert_rows(items, insert, ("value",), [(float("nan"),), (1.5,)], {})
    items.execute("COMMIT")
    assert back == [{"id": 1, "value": None}, {"id": 2, "value": 1.5}]
    assert items.execute("SELECT id, value FROM readings").fetchall() == [(1, None), (2, 1.5)]

"""The backlog scenario's query-plan check (rehearsal/scenario_backlog.py, `_plan_problems`):
SQLite names a table by its alias in EXPLAIN QUERY PLAN (`FROM jobs p` plans as `SCAN p`), so
the check maps each alias back to its table. A full scan is flagged under any name; a scan of
jobs through jobs_leased (the running jobs only) and an index search are not."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from hookline.rehearsal.scenario_backlog import Schema, _plan_problems

SCHEMA = """
CREATE TABLE jobs (id INTEGER PRIMARY KEY, destination_id INTEGER, status TEXT,
                   run_at REAL, lease_until REAL);
CREATE INDEX jobs_due ON jobs (destination_id, run_at) WHERE status = 'pending';
CREATE INDEX jobs_leased ON jobs (destination_id, lease_until) WHERE status = 'running';
CREATE TABLE attempts (id INTEGER PRIMARY KEY, job_id INTEGER, error TEXT);
CREATE INDEX attempts_job ON attempts (job_id);
"""
# Each plan below is one line (id 2, parent 0) of a query reading jobs as `p`, attempts as `a`.
ALIASED_SQL = ("SELECT p.id FROM jobs p JOIN attempts AS a ON a.job_id = p.id "
               "WHERE p.run_at < 1")
UNALIASED_SQL = "SELECT jobs.id FROM jobs JOIN attempts ON attempts.job_id = jobs.id"


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.executescript(SCHEMA)
    yield conn
    conn.close()


def problems_of(line: str, sql: str, db: sqlite3.Connection) -> list[str]:
    return _plan_problems([(2, 0, 0, line)], sql, Schema.of(db))


@pytest.mark.parametrize("line, sql", [
    ("SCAN p", ALIASED_SQL),
    ("SCAN jobs", UNALIASED_SQL),
    ("SCAN TABLE jobs AS p", ALIASED_SQL),  # SQLite before 3.36
    ("SCAN a", ALIASED_SQL),
    ("SCAN attempts", UNALIASED_SQL),
    ("SCAN p USING INDEX jobs_due", ALIASED_SQL),  # every pending job
    ("SCAN jobs USING COVERING INDEX jobs_due", UNALIASED_SQL),
    ("SEARCH a USING AUTOMATIC COVERING INDEX (job_id=?)", ALIASED_SQL),  # built by a scan
    ("SCAN x", ALIASED_SQL),  # a name the query does not explain is not cleared
])
def test_a_scan_that_reads_a_whole_table_is_flagged_aliased_or_not(
        line: str, sql: str, db: sqlite3.Connection) -> None:
    assert len(problems_of(line, sql, db)) == 1, line


@pytest.mark.parametrize("line, sql", [
    ("SCAN p USING INDEX jobs_leased", ALIASED_SQL),
    ("SCAN jobs USING INDEX jobs_leased", UNALIASED_SQL),
    ("SCAN TABLE jobs AS p USING COVERING INDEX jobs_leased", ALIASED_SQL),
    ("SCAN a USING COVERING INDEX attempts_job", ALIASED_SQL),
    ("SCAN attempts USING INDEX attempts_job", UNALIASED_SQL),
    ("SEARCH p USING INDEX jobs_due (destination_id=? AND run_at<?)", ALIASED_SQL),
    ("SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)", UNALIASED_SQL),
    ("SCAN w", "WITH RECURSIVE walk(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM walk w) "
               "SELECT n FROM walk"),
    ("SCAN o VIRTUAL TABLE INDEX 1:", "SELECT value FROM json_each(:ids) o"),
    ("SCAN (subquery-1)", "SELECT n FROM (SELECT 1 AS n)"),
    ("SCAN CONSTANT ROW", "SELECT 1"),
])
def test_an_index_scan_or_a_read_of_no_table_is_not_flagged(
        line: str, sql: str, db: sqlite3.Connection) -> None:
    assert problems_of(line, sql, db) == [], line


def test_a_sort_beside_an_aliased_read_of_jobs_is_flagged(db: sqlite3.Connection) -> None:
    rows = [(2, 0, 0, "SEARCH p USING INDEX jobs_due (destination_id=?)"),
            (9, 0, 0, "USE TEMP B-TREE FOR ORDER BY")]
    assert _plan_problems(rows, ALIASED_SQL, Schema.of(db)) == ["USE TEMP B-TREE FOR ORDER BY"]


def test_the_plans_sqlite_makes_are_checked_by_alias(db: sqlite3.Connection) -> None:
    """The same through this SQLite's own EXPLAIN QUERY PLAN: an aliased query that reads
    every job is flagged, its form through jobs_leased is not."""
    def problems(sql: str) -> list[str]:
        rows = db.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
        return _plan_problems(rows, sql, Schema.of(db))

    full = "SELECT p.id FROM jobs p WHERE p.run_at < 1"
    assert [line for line in problems(full) if line.startswith("SCAN p")], problems(full)
    leased = ("SELECT j.id FROM jobs j INDEXED BY jobs_leased "
              "WHERE j.status = 'running' AND j.lease_until < 1")
    assert problems(leased) == [], db.execute(f"EXPLAIN QUERY PLAN {leased}").fetchall()

"""The claim and finish path's SQLite queries reach jobs through an index or the id, never by
walking every pending job: with no table statistics SQLite's planner once led the batch
claim (`id IN (...) AND (status = 'pending' ... OR status = 'running' ...)`) through
jobs_status, a scan of the whole backlog per claim. Since schema 20 jobs_status holds no
pending job, and the queries that read jobs by status name the term of the partial index
they need (SQLite takes a partial index only then, and otherwise scans jobs)."""

from __future__ import annotations

import re
import sqlite3

import pytest

from hookline.shared.models import AttemptResult, Dead, Done
from hookline.shared.store.queries import load_queries
from tests.conftest import new_event

HOT_PATH = ("claim_probe", "claim_window", "destination_slots", "due_jobs",
            "kill_lost_at_cap", "close_attempts_lost_at_cap", "claim_job",
            "mark_attempt_lost", "insert_attempt", "claim_details", "record_attempts",
            "finish_delivered", "finish_done", "finish_retry", "record_attempt",
            "extend_lease", "insert_event", "insert_jobs")
JSON_ARRAYS = {"job_ids": "[1, 2]", "lease_tokens": '["a", "b"]', "claims": '[[1, "a"]]',
               "attempts": '[["a", 1, 0.1, 200, null, null, null, null]]',
               "destination_ids": "[1, 2]", "offers": "[[1, 10], [2, 10]]",
               "full_destinations": "[3]", "capped_tenants": '["t"]'}


def plan(db: sqlite3.Connection, sql: str) -> str:
    params = {name: JSON_ARRAYS.get(name, 1) for name in re.findall(r":(\w+)", sql)}
    return "\n".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params))


@pytest.mark.sqlite_only
async def test_hot_path_queries_never_walk_the_backlog(store, destination_factory):
    """With 300 pending jobs and no ANALYZE, no hot-path query scans jobs (or attempts)
    outside an index, nor ORs two index scans over them."""
    for name in ("d1", "d2", "d3"):
        await destination_factory(name)
    await store.add_events([new_event(f"e{n}") for n in range(100)])
    queries = load_queries("sqlite")
    db = sqlite3.connect(store.path)
    try:
        for name in HOT_PATH:
            text = plan(db, queries[name])
            assert "MULTI-INDEX OR" not in text, (name, text)
            assert not re.search(r"SCAN (jobs|attempts|j|a)\b(?! USING)", text), (name, text)
    finally:
        db.close()


@pytest.mark.sqlite_only
async def test_the_claim_reads_destinations_by_id_never_all_of_them(store, destination_factory):
    """The claim's cost follows the work it can take, not the destinations that exist: its
    probe and its window step through the live destinations and the pending jobs'
    destinations by index searches and read each candidate by id (a plan that scans
    destinations is the regression this guards: with 30,003 live destinations that scan made
    every claim read them all, p50 1.1 s, and every probe 18 ms with nothing pending), and
    no step sorts."""
    for name in ("d1", "d2", "d3"):
        await destination_factory(name)
    await store.add_events([new_event(f"e{n}") for n in range(100)])
    queries = load_queries("sqlite")
    db = sqlite3.connect(store.path)
    try:
        for name in ("claim_probe", "claim_window", "destination_slots",
                     "due_jobs"):
            text = plan(db, queries[name])
            assert not re.search(r"SCAN (destinations|d)\b", text), (name, text)
            assert "TEMP B-TREE" not in text, (name, text)
        window = plan(db, queries["claim_window"])
        # the leapfrog walk: one search per step in the live destinations and in the pending
        # jobs (through either index), never a destination at a time
        assert "SEARCH destinations USING INDEX destinations_live (id>?)" in window, window
        assert re.search(r"SEARCH j(obs)? USING (COVERING )?INDEX jobs_(status|due) "
                         r"\((status=\? AND )?destination_id>\?\)", window), window
        assert "jobs_due (destination_id=? AND run_at<?)" in window, window
        assert "jobs_leased (destination_id=? AND lease_until>?)" in window, window
    finally:
        db.close()


SCAN_OF_JOBS = re.compile(r"SCAN (jobs|attempts|j|a)\b(?! USING)")
# query -> what its plan must contain: the index each part of it searches (no ANALYZE)
BY_STATUS = {
    "destination_job_counts": ("jobs_leased (destination_id=? AND lease_until>?)",
                               "jobs_due (destination_id=?)",
                               "COVERING INDEX jobs_status (status=? AND destination_id=?)"),
    "destination_summaries": ("jobs_leased (destination_id=? AND lease_until>?)",
                              "jobs_due (destination_id=?)",
                              "COVERING INDEX jobs_status (status=? AND destination_id=?)"),
    "jobs_to_purge": ("jobs_finished (status=? AND finished_at<?)",),
    "purge_jobs": ("jobs_finished (status=? AND finished_at<?)",),
    "purge_attempts": ("jobs_finished (status=? AND finished_at<?)",),
    "open_attempts_to_purge": ("jobs_finished (status=? AND finished_at<?)",),
    "kill_jobs_of_destination": ("jobs_due (destination_id=?)",
                                 "jobs_leased (destination_id=?)"),
    "unfinished_jobs_of_destination": ("jobs_due (destination_id=?)",
                                       "jobs_leased (destination_id=?)"),
    "ordered_head": ("SEARCH jobs USING INDEX jobs_ordered (destination_id=?)",),
    "mark_ordered_jobs": ("MULTI-INDEX OR", "jobs_due (destination_id=?)",
                          "jobs_leased (destination_id=?)"),
    "tenant_unfinished_jobs": ("destinations_tenant (tenant_id=?)", "jobs_due (destination_id=?)",
                               "jobs_leased (destination_id=?)"),
    # a range from the page's cursor (or the top): a deep page reads only its own rows
    "list_dead": ("SEARCH j USING INDEX jobs_finished (status=? AND finished_at<?)",),
    "replay_candidates": ("SEARCH j USING INDEX jobs_status (status=?)",),
    "retry_now_candidates": ("jobs_due (destination_id=? AND run_at>?)",),
    "recount_jobs": ("SCAN jobs USING INDEX jobs_due",
                     "SCAN jobs USING COVERING INDEX jobs_status"),
    "oldest_pending": ("SEARCH jobs USING INDEX jobs_due",),
    "kill_lost_at_cap": ("jobs_leased",),
    "replay_job": ("INTEGER PRIMARY KEY",),
    "retry_now_jobs": ("INTEGER PRIMARY KEY",),
}


async def _jobs_of_every_status(store, destination_factory) -> None:
    """Three destinations, 100 events: 10 jobs done, 10 dead, 10 running, the rest pending."""
    for name in ("d1", "d2", "d3"):
        await destination_factory(name)
    await store.add_events([new_event(f"e{n}") for n in range(100)])
    ok = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
    gone = AttemptResult(started_at=0.0, duration_s=0.01, status_code=410)
    claims = await store.claim("w1", 30, 30.0, 5)
    assert len(claims) == 30
    await store.finish([(c, Done(), ok) for c in claims[:10]]
                       + [(c, Dead(error="HTTP 410"), gone) for c in claims[10:20]])


@pytest.mark.sqlite_only
async def test_jobs_status_holds_no_pending_job(store, destination_factory):
    """Ingest writes no jobs_status entry (schema 20, as PostgreSQL since 6): the index holds
    exactly the running, done and dead jobs."""
    await _jobs_of_every_status(store, destination_factory)
    db = sqlite3.connect(store.path)
    try:
        by_status = dict(db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))
        assert by_status == {"pending": 270, "running": 10, "done": 10, "dead": 10}
        (definition,) = db.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'jobs_status'").fetchone()
        assert definition.endswith("WHERE status <> 'pending'"), definition
        try:
            # every cell of an index b-tree, interior or leaf, is one entry
            (entries,) = db.execute("SELECT sum(ncell) FROM dbstat WHERE name = 'jobs_status'"
                                    ).fetchone()
        except sqlite3.OperationalError:  # SQLite built without the dbstat table
            (entries,) = db.execute("SELECT count(*) FROM jobs INDEXED BY jobs_status "
                                    "WHERE status <> 'pending'").fetchone()
        assert entries == 30
    finally:
        db.close()


@pytest.mark.sqlite_only
async def test_queries_of_jobs_by_status_search_their_partial_index(store, destination_factory):
    """With no ANALYZE, every query that reads pending, running, dead or finished jobs by
    status searches the partial index that holds them (jobs_due, jobs_leased, jobs_status
    without pending jobs, jobs_finished) or looks jobs up by id: none scans jobs, and the
    purges search jobs_finished by age instead of reading every finished job."""
    await _jobs_of_every_status(store, destination_factory)
    queries = load_queries("sqlite")
    db = sqlite3.connect(store.path)
    try:
        for name, expected in BY_STATUS.items():
            text = plan(db, queries[name])
            assert not SCAN_OF_JOBS.search(text), (name, text)
            for part in expected:
                assert part in text, (name, part, text)
        # newest first straight from jobs_finished: list_dead stops at its LIMIT, no sort;
        # an ordered destination's head is jobs_ordered's first entry (schema 25), no sort
        for name in ("list_dead", "ordered_head"):
            assert "TEMP B-TREE" not in plan(db, queries[name]), name
    finally:
        db.close()

"""The claim and finish path's SQLite queries reach jobs through an index or the id, never by
walking every pending job: with no table statistics SQLite's planner once led the batch
claim (`id IN (...) AND (status = 'pending' ... OR status = 'running' ...)`) through
jobs_status, a scan of the whole backlog per claim."""

from __future__ import annotations

import re
import sqlite3

import pytest

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
        assert re.search(r"SEARCH j(obs)? USING COVERING INDEX jobs_(status|due) "
                         r"\((status=\? AND )?destination_id>\?\)", window), window
        assert "jobs_due (destination_id=? AND run_at<?)" in window, window
        assert "jobs_leased (destination_id=? AND lease_until>?)" in window, window
    finally:
        db.close()

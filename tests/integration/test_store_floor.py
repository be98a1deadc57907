"""rehearsal/store_floor.py: hookline's store and the least store a durable service needs,
each run for real (two spawned processes, a real SQLite file, asleep between cycles): both do
the whole cycle's work, cycles are planned at the exact rate, and bad input is refused."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from hookline.rehearsal import store_floor


def _statuses(database: str) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(database)) as db:
        return dict(db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))


@pytest.mark.parametrize(("rate", "plan"), [(200, (0.01, 2)), (250, (0.012, 3)),
                                            (50, (0.02, 1)), (1_000, (0.01, 10))])
def test_cycles_are_at_least_the_spacing_apart_and_keep_the_rate_exact(rate, plan):
    interval_s, events = store_floor.cycle_plan(rate, 0.01)
    assert (round(interval_s, 6), events) == plan
    assert events / interval_s == pytest.approx(rate)
    with pytest.raises(ValueError):
        store_floor.cycle_plan(0, 0.01)


def test_the_least_store_records_every_event_and_finishes_every_job_but_the_last_cycles(
        tmp_path: Path):
    """20 cycles of 2 events 10 ms apart: 40 events stored once each with their 3 jobs; the
    jobs of every cycle but the last marked done under their own lease token, the last
    cycle's 6 leased."""
    run = store_floor.cycle_cpu_us("least", tmp_path, cycles=20, interval_s=0.01,
                                   events_per_cycle=2)
    assert run["ingest_us"] > 0 and run["worker_us"] > 0 and run["late_cycles"] >= 0
    with contextlib.closing(sqlite3.connect(run["database"])) as db:
        assert db.execute("SELECT count(*), count(DISTINCT event_id) FROM events").fetchone() \
            == (40, 40)
        assert db.execute("SELECT count(DISTINCT lease_token) FROM jobs").fetchone()[0] == 20
    assert _statuses(run["database"]) == {"done": 114, "leased": 6}


def test_hookline_store_does_the_same_cycles_and_both_are_compared_by_round(tmp_path: Path):
    """hookline's store over the same cycles (its own stores, as the service opens them):
    every job but the last cycle's done, each with its attempt; the comparison has both
    stores' runs, in alternated order, and a ratio per round. At 200 events/s with the
    default batch_interval_s (15 ms): 7 cycles of 3 events in 0.1 s."""
    figures = store_floor.compare(tmp_path, rate_per_s=200.0, seconds=0.1, rounds=2)
    assert (figures["cycles"], figures["events_per_cycle"], figures["cycle_s"]) == (7, 3, 0.015)
    assert len(figures["hookline_over_least"]) == 2
    assert all(ratio > 0 for ratio in figures["hookline_over_least"])
    for run in figures["rounds"]["hookline"]:
        assert _statuses(run["database"]) == {"done": 54, "running": 9}
        with contextlib.closing(sqlite3.connect(run["database"])) as db:
            assert db.execute("SELECT count(*) FROM attempts WHERE status_code = 200"
                              ).fetchone()[0] == 54
    for run in figures["rounds"]["least"]:
        assert _statuses(run["database"]) == {"done": 54, "leased": 9}


@pytest.mark.parametrize(("argv", "message"), [
    (["--rate", "0"], "--rate must be from 20 to 2000"),
    (["--rate", "10"], "--rate must be from 20 to 2000"),
    (["--rate", "5000"], "--rate must be from 20 to 2000"),
    (["--seconds", "inf"], "--seconds must be above 0"),
    (["--rounds", "0"], "--rounds at least 1")])
def test_the_cli_refuses_what_it_cannot_model(capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        store_floor.main(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_an_unknown_store_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="least, hookline"):
        store_floor.cycle_cpu_us("other", tmp_path, cycles=1, interval_s=0.01,
                                 events_per_cycle=1)

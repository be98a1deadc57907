"""rehearsal/store_floor.py: hookline's store and the least store a durable service needs,
each run for real (two processes, a real SQLite file, asleep between cycles): both do the
whole cycle's work, and the comparison's figures follow from the runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hookline.rehearsal import store_floor


def test_the_least_store_records_every_event_and_finishes_every_job_but_the_last_cycles(
        tmp_path: Path):
    """20 cycles of 2 events 10 ms apart: 40 events stored once each with their 3 jobs; the
    jobs of every cycle but the last marked done under their own lease token, the last
    cycle's 6 leased."""
    run = store_floor.cycle_cpu_us("least", tmp_path, cycles=20, interval_s=0.01, events=2)
    assert run["ingest_us"] > 0 and run["worker_us"] > 0
    assert run["both_us"] == pytest.approx(run["ingest_us"] + run["worker_us"], abs=0.2)
    with sqlite3.connect(run["database"]) as db:
        assert db.execute("SELECT count(*), count(DISTINCT source_id) FROM events").fetchone() \
            == (40, 40)
        statuses = dict(db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))
        assert statuses == {"done": 114, "leased": 6}
        assert db.execute("SELECT count(DISTINCT lease_token) FROM jobs").fetchone()[0] == 20


def test_hookline_store_delivers_the_same_cycles_and_the_comparison_divides_by_round(
        tmp_path: Path):
    """hookline's store over the same cycles: every job but the last cycle's done; the
    comparison reports both stores' medians per cycle, per event and in cores, and
    hookline's over the least's round by round."""
    figures = store_floor.compare(tmp_path, rate_per_s=200.0, seconds=0.1, rounds=1)
    assert (figures["cycles"], figures["events_per_cycle"], figures["cycle_s"]) == (10, 2, 0.01)
    [least], [ours] = figures["rounds"]["least"], figures["rounds"]["hookline"]
    assert figures["hookline_over_least"] == [round(ours["both_us"] / least["both_us"], 2)]
    for store, run in (("least", least), ("hookline", ours)):
        assert figures[store]["cpu_us_per_cycle"] == run["both_us"]
        assert figures[store]["cpu_us_per_event"] == round(run["both_us"] / 2, 1)
        assert figures[store]["cores"] == round(run["both_us"] / 1e6 / 0.01, 3)
    with sqlite3.connect(ours["database"]) as db:
        statuses = dict(db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))
    assert statuses == {"done": 54, "running": 6}, statuses


def test_an_unknown_store_or_a_rate_of_nothing_is_refused(tmp_path: Path, capsys):
    with pytest.raises(ValueError, match="hookline or least"):
        store_floor.cycle_cpu_us("other", tmp_path, cycles=1, interval_s=0.01, events=1)
    with pytest.raises(SystemExit) as exited:
        store_floor.main(["--rate", "0"])
    assert exited.value.code == 2 and "--rate and --seconds" in capsys.readouterr().err

"""The bench's per-second timeline and its plot (rehearsal/bench_plot.py): pure arithmetic on
timestamps, and the PNG drawn from it or skipped without matplotlib."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hookline.rehearsal import bench_plot
from hookline.rehearsal.bench import print_report

START_S = 1_800_000_000.0
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FLAT = Path(__file__).parent / "data" / "bench" / "flat.json"  # a real small run


def bench_result(timeline: list[dict]) -> dict:
    """The parts of a bench.json dict the plot reads."""
    return {"timeline": timeline, "backend": {"name": "sqlite"},
            "options": {"workers": "2", "rate_per_s": "1000.0"},
            "machine": {"cores": 2, "fsync_ms": {"p50": 0.2, "p99": 0.4}}}


def test_timeline_buckets_by_second_since_the_start_with_empty_seconds_kept():
    """Events count in the second they were received, deliveries in the second they
    finished, with the latency percentiles of those deliveries; a quiet second is zeros."""
    received = [START_S + 0.1, START_S + 0.9, START_S + 3.2]
    delivered = [(START_S + 0.15, START_S + 0.1), (START_S + 3.5, START_S + 0.9),
                 (START_S + 3.3, START_S + 3.2)]
    rows = bench_plot.timeline(received, delivered, START_S)
    assert [row["t"] for row in rows] == [0, 1, 2, 3]
    assert [row["accepted"] for row in rows] == [2, 0, 0, 1]
    assert [row["delivered"] for row in rows] == [1, 0, 0, 2]
    assert rows[0]["p50_ms"] == rows[0]["p99_ms"] == 50.0
    assert rows[1]["p50_ms"] is None and rows[1]["p99_ms"] is None
    assert (rows[3]["p50_ms"], rows[3]["p99_ms"]) == (2600.0, 2600.0)  # nearest rank, upper


def test_timeline_of_nothing_is_empty_and_an_early_clock_moves_the_start_back():
    """No rows: no buckets. A timestamp before the start (a server clock behind this
    host's) becomes second 0 rather than a negative second."""
    assert bench_plot.timeline([], [], START_S) == []
    rows = bench_plot.timeline([START_S - 0.5], [(START_S + 0.7, START_S - 0.5)], START_S)
    assert [(row["t"], row["accepted"], row["delivered"]) for row in rows] == [(0, 1, 0),
                                                                               (1, 0, 1)]


def test_plot_title_names_backend_workers_rate_and_machine():
    """The title says what ran and on what: backend, workers, offered rate, cores, fsync."""
    title = bench_plot.plot_title(bench_result([]))
    assert "sqlite, 2 workers, 1,000 events/s offered" in title
    assert "2 cores, fsync p50 0.2 ms" in title
    flat = bench_result([])
    flat["options"]["rate_per_s"] = "None"
    assert "flat out" in bench_plot.plot_title(flat)


def test_write_plot_draws_a_png(tmp_path):
    """With matplotlib, write_plot writes a PNG file, seconds without deliveries included."""
    rows = bench_plot.timeline([START_S + 0.1, START_S + 2.5],
                               [(START_S + 0.2, START_S + 0.1), (START_S + 2.6, START_S + 2.5)],
                               START_S)
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    assert bench_plot.write_plot(bench_result(rows), path) is True
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_write_plot_without_matplotlib_writes_nothing(tmp_path, monkeypatch):
    """Without matplotlib installed, write_plot returns False and leaves no file."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    path = tmp_path / "bench.png"
    assert bench_plot.write_plot(bench_result([]), path) is False
    assert not path.exists()


def test_report_says_when_the_plot_was_skipped_and_how_to_get_it(capsys):
    """A result without a plot (matplotlib missing) prints one line with the install hint."""
    result = json.loads(FLAT.read_text())
    result["plot"] = None
    print_report(result)
    out = capsys.readouterr().out
    assert "plot skipped: matplotlib is not installed (pip install 'hookline[bench]')" in out
    assert "{'" not in out and "None" not in out, out  # figures in words, not Python reprs

"""The machine probes every bench result records (rehearsal/machine_probe.py), on a real
file: what one small SQLite read costs back to back and after a sleep, the probe's file
removed after."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookline.rehearsal.machine_probe import cold_read_text, cold_read_us, fsync_latency_ms


def test_cold_read_measures_both_and_leaves_nothing(tmp_path: Path):
    """Both medians are CPU microseconds above zero and the ratio is theirs (of the
    unrounded medians), with the sleep and the samples; the folder is left as it was (no
    probe database, journal or WAL)."""
    probe = cold_read_us(tmp_path, samples=10)
    assert probe["hot_us"] > 0 and probe["after_sleep_us"] > 0
    assert probe["ratio"] == pytest.approx(probe["after_sleep_us"] / probe["hot_us"],
                                           rel=0.05, abs=0.15)
    assert (probe["sleep_ms"], probe["samples"]) == (10, 10)
    assert list(tmp_path.iterdir()) == []
    assert cold_read_text({"cold_read_us": probe}) == (
        f"a small SQLite read costs {probe['hot_us']} µs of CPU back to back, "
        f"{probe['after_sleep_us']} µs after 10 ms asleep ({probe['ratio']}x)")
    assert cold_read_text({"fsync_ms": {}}) is None  # a result from before it was measured


def test_fsync_latency_is_two_percentiles_and_leaves_nothing(tmp_path: Path):
    """p50 at most p99, in milliseconds (0.0 on a tmpfs, whose fsync takes no time)."""
    figures = fsync_latency_ms(tmp_path, samples=20)
    assert 0 <= figures["p50"] <= figures["p99"]
    assert list(tmp_path.iterdir()) == []

"""`hookline bench`'s load generator in words (rehearsal/bench_ceiling.load_generator): wrk
when it drives the run, else the Python generator and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookline.rehearsal.bench import BenchOptions
from hookline.rehearsal.bench_ceiling import load_generator


def test_without_wrk_on_path_a_flat_out_run_says_it_fell_back(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    """No wrk on PATH: the Python generator, and the words say to install wrk."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert load_generator(BenchOptions()) == (
        "python (wrk not found: install the wrk package for figures comparable to the README's)")


def test_with_wrk_on_path_a_flat_out_run_uses_it(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch):
    """A wrk on PATH drives flat-out runs, not steady ones nor `--load python` ones."""
    fake = tmp_path / "wrk"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert load_generator(BenchOptions()) == "wrk"
    assert load_generator(BenchOptions(use_wrk=False)) == \
        "python (asked for with --load python)"
    assert load_generator(BenchOptions(rate_per_s=1000.0)).startswith(
        "python (a steady --rate is paced")

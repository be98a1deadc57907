"""The load phases of `hookline bench`: one load (wrk or the Python generator) against ingest,
and the same load against a bare aiohttp server (rehearsal/bare_server.py), the ceiling.

The ceiling is measured in the same run, with the same tool, body and connections as
ingest's flat-out phase, so `ingest_vs_bare_aiohttp` (ingest's accepted events/s divided by
the bare server's answers/s) reads the same on a slow and a fast machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hookline.rehearsal import wrk
from hookline.rehearsal.harness import INGEST_TOKEN, stop_process

if TYPE_CHECKING:
    from hookline.rehearsal.bench import BenchOptions

CEILING_TARGET = 0.45
"""Least share of the bare aiohttp ceiling that ingest should reach (a ratio, same run)."""

CEILING_WRK_S = 3
"""How long wrk drives the bare server, seconds (its rate settles within a second)."""


def uses_wrk(opts: BenchOptions) -> bool:
    """Whether this run's flat-out load comes from wrk (asked for, installed, no --rate)."""
    return opts.rate_per_s is None and opts.use_wrk and wrk.available()


WRK_MISSING = "wrk not found: install the wrk package for figures comparable to the README's"
"""Why a flat-out run fell back to the Python generator when wrk was asked for."""


def load_generator(opts: BenchOptions) -> str:
    """The tool that drives this run's load, in words: `wrk`, or `python (why)`; bench.json
    keeps it as `load_generator` and `hookline bench-table` accepts only `wrk` flat-out runs."""
    if uses_wrk(opts):
        return "wrk"
    if opts.rate_per_s is not None:
        return "python (a steady --rate is paced by the Python generator; wrk drives flat-out runs)"
    if not opts.use_wrk:
        return "python (asked for with --load python)"
    return f"python ({WRK_MISSING})"


def drive_load(opts: BenchOptions, env: dict[str, str], base_url: str,
               wrk_duration_s: int | None = None) -> dict[str, Any]:
    """Post events to `base_url`/v1/events as `opts` asks and return the load's figures
    (`events_per_s`, `latency_ms`, and wrk's or the generator's counts).

    Args:
        opts: events, rate, concurrency and body size; whether wrk is used (uses_wrk).
        env: the environment of the Python generator's process.
        base_url: `http://127.0.0.1:PORT`.
        wrk_duration_s: wrk's duration, seconds; None: sized to offer about `opts.events`
            at ~15,000/s, at least 3 s.

    Raises:
        subprocess.CalledProcessError: the load tool failed.
    """
    if uses_wrk(opts):
        duration = wrk_duration_s or max(3, opts.events // 15_000)
        return wrk.run_wrk(base_url, duration, opts.concurrency, opts.body_bytes,
                           os.urandom(4).hex(), INGEST_TOKEN)
    load = subprocess.run(
        [sys.executable, "-m", "hookline.rehearsal.loadgen", "--url", f"{base_url}/v1/events",
         "--events", str(opts.events), "--concurrency", str(opts.concurrency),
         "--body-bytes", str(opts.body_bytes),
         *(["--rate", str(opts.rate_per_s)] if opts.rate_per_s else [])],
        capture_output=True, text=True, env=env, check=True)
    figures: dict[str, Any] = json.loads(load.stdout)
    return figures


@contextlib.contextmanager
def bare_server(env: dict[str, str]) -> Iterator[int]:
    """rehearsal/bare_server.py in its own process on a free port; yields the port; stopped
    (SIGTERM, then SIGKILL after 10 s) on exit."""
    proc = subprocess.Popen([sys.executable, "-m", "hookline.rehearsal.bare_server"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        yield int(json.loads(proc.stdout.readline())["port"])
    finally:
        stop_process(proc, grace_s=10)


def measure_ceiling(opts: BenchOptions, env: dict[str, str]) -> dict[str, Any]:
    """The bare aiohttp server's answers/s under this run's flat-out load (wrk for
    CEILING_WRK_S seconds, or the Python generator's `opts.events` posts)."""
    with bare_server(env) as port:
        figures = drive_load(opts, env, f"http://127.0.0.1:{port}", CEILING_WRK_S)
    figures.setdefault("tool", "python")
    return figures


def ceiling_ratio(ingest_events_per_s: float, ceiling: dict[str, Any]) -> float | None:
    """Ingest's events/s divided by the ceiling's, to 3 decimals (None without a ceiling)."""
    top = float(ceiling.get("events_per_s") or 0)
    return round(ingest_events_per_s / top, 3) if top > 0 else None

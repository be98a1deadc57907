"""The load phases of `hookline bench`: one load (wrk or the Python generator) against ingest,
and the same load against a bare aiohttp server (rehearsal/bare_server.py), the ceiling.

The ceiling is measured in the same run, with the same tool, body and connections as
ingest's flat-out phase, so `ingest_vs_bare_aiohttp` (ingest's accepted events/s divided by
the bare server's answers/s) reads the same on a slow and a fast machine.

The sender's ceiling likewise: as many bare aiohttp client processes as the run has workers
(rehearsal/bare_client.py), each with a worker's concurrency, signing every body as a worker
does and posting to the lean receiver the workers deliver to (a fresh one, so its counts
stay the run's), all started at once. `delivery_vs_bare_client` is the workers'
deliveries/s divided by the clients' requests/s, `cpu_per_delivery_vs_bare_client` the
workers' CPU per delivery divided by the clients' CPU per request.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookline.rehearsal import wrk
from hookline.rehearsal.harness import INGEST_TOKEN, receiver_child, stop_process
from hookline.shared.signing import generate_secret

if TYPE_CHECKING:
    from hookline.rehearsal.bench import BenchOptions

CEILING_TARGET = 0.6
"""Least share of the bare aiohttp ceiling that ingest should reach (a ratio, same run; issue
#33, target 3)."""

SENDER_TARGET = 0.5
"""Least share of the bare clients' requests/s the workers should deliver (same run)."""

SENDER_CPU_TARGET = 2.5
"""Most workers' CPU per delivery, as a multiple of the bare clients' CPU per request."""

SENDER_CEILING_S = 3.0
"""Longest time the bare clients send, seconds (their rate settles well within it)."""

DEFAULT_WORKER_CONCURRENCY = 64
"""A worker's requests in flight unless HOOKLINE_WORKER_CONCURRENCY says otherwise (the
`worker_concurrency` setting's default, shared/config.py)."""

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
        spacing = "evenly" if opts.arrivals == "even" else "with Poisson arrivals"
        return (f"python (a steady --rate is paced {spacing} by the Python generator; wrk "
                "drives flat-out runs)")
    if not opts.use_wrk:
        return "python (asked for with --load python)"
    return f"python ({WRK_MISSING})"


def drive_load(opts: BenchOptions, env: dict[str, str], base_url: str,
               wrk_duration_s: int | None = None, *, sends_path: Path | None = None
               ) -> dict[str, Any]:
    """Post events to `base_url`/v1/events as `opts` asks and return the load's figures
    (`events_per_s`, `latency_ms`, and wrk's or the generator's counts).

    Args:
        opts: events, rate, concurrency and body size; whether wrk is used (uses_wrk).
        env: the environment of the Python generator's process.
        base_url: `http://127.0.0.1:PORT`.
        wrk_duration_s: wrk's duration, seconds; None: sized to offer about `opts.events`
            at ~15,000/s, at least 3 s.
        sends_path: the Python generator writes its send times here (its `--sends`: a
            JSON object, `run_id` and `sent_at`, per event index the unix seconds just
            before its request was written, or null); wrk records none.

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
         *(["--rate", str(opts.rate_per_s), "--arrivals", opts.arrivals]
           if opts.rate_per_s else []),
         *(["--sends", str(sends_path)] if sends_path is not None else [])],
        capture_output=True, text=True, env=env, check=True)
    figures: dict[str, Any] = json.loads(load.stdout)
    return figures


@contextlib.contextmanager
def bare_server(env: dict[str, str]) -> Iterator[tuple[int, int]]:
    """rehearsal/bare_server.py in its own process on a free port; yields (its pid, the
    port); stopped (SIGTERM, then SIGKILL after 10 s) on exit."""
    proc = subprocess.Popen([sys.executable, "-m", "hookline.rehearsal.bare_server"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        yield proc.pid, int(json.loads(proc.stdout.readline())["port"])
    finally:
        stop_process(proc, grace_s=10)


def measure_ceiling(opts: BenchOptions, env: dict[str, str]) -> dict[str, Any]:
    """The bare aiohttp server's answers/s under this run's flat-out load (wrk for
    CEILING_WRK_S seconds, or the Python generator's `opts.events` posts)."""
    with bare_server(env) as (_, port):
        figures = drive_load(opts, env, f"http://127.0.0.1:{port}", CEILING_WRK_S)
    figures.setdefault("tool", "python")
    return figures


def ceiling_ratio(ingest_events_per_s: float, ceiling: dict[str, Any]) -> float | None:
    """Ingest's events/s divided by the ceiling's, to 3 decimals (None without a ceiling)."""
    top = float(ceiling.get("events_per_s") or 0)
    return round(ingest_events_per_s / top, 3) if top > 0 else None


def measure_sender_ceiling(opts: BenchOptions, env: dict[str, str]) -> dict[str, Any]:
    """The bare clients' requests/s and CPU (rehearsal/bare_client.py): `opts.workers`
    processes at a worker's concurrency against a fresh lean receiver, `opts.body_bytes`
    bodies, together up to 3 x `opts.events` requests or SENDER_CEILING_S seconds.

    Returns:
        `clients` (each process's figures), `requests`, `requests_per_s` (their sum),
        `cpu_s_per_1000_requests` (their CPU over their requests), `concurrency`.

    Raises:
        RuntimeError: a client failed or a request was refused.
    """
    concurrency = int(env.get("HOOKLINE_WORKER_CONCURRENCY", DEFAULT_WORKER_CONCURRENCY))
    specs = [f"d{n}={generate_secret()}" for n in (1, 2, 3)]
    per_client = max(1, 3 * opts.events // opts.workers)
    with receiver_child("hookline.rehearsal.fast_receiver", specs, env) as (_, port):
        clients = [subprocess.Popen(
            [sys.executable, "-m", "hookline.rehearsal.bare_client",
             "--url", f"http://127.0.0.1:{port}", *[a for s in specs for a in ("--endpoint", s)],
             "--requests", str(per_client), "--concurrency", str(concurrency),
             "--body-bytes", str(opts.body_bytes), "--duration-s", str(SENDER_CEILING_S)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
            for _ in range(opts.workers)]
        try:
            for client in clients:  # every one ready before any sends
                assert client.stdout is not None
                client.stdout.readline()
            for client in clients:
                assert client.stdin is not None
                client.stdin.write(b"go\n")
                client.stdin.flush()
            figures = [json.loads(client.communicate(timeout=120)[0]) for client in clients]
        finally:
            for client in clients:
                stop_process(client, grace_s=5)
    if any(c.returncode != 0 for c in clients) or any(f["failed"] for f in figures):
        raise RuntimeError(f"the bare clients failed: {figures}")
    requests = sum(int(f["requests"]) for f in figures)
    cpu_s = sum(float(f["cpu_s"]) for f in figures)
    return {"clients": figures, "concurrency": concurrency, "requests": requests,
            "requests_per_s": round(sum(float(f["requests_per_s"]) for f in figures), 1),
            "cpu_s_per_1000_requests": round(cpu_s * 1000 / max(1, requests), 4)}


def sender_ratios(deliveries_per_s: float | None, worker_cpu_s_per_1000: float,
                  ceiling: dict[str, Any]) -> dict[str, Any]:
    """The workers against the bare clients, to 3 decimals (None where a figure is 0).

    Args:
        deliveries_per_s: the workers' deliveries/s (None: nothing delivered).
        worker_cpu_s_per_1000: all workers' CPU seconds per 1,000 deliveries.
        ceiling: :func:`measure_sender_ceiling`'s figures.

    Returns:
        `delivery_vs_bare_client` ({ratio, target}) and `cpu_per_delivery_vs_bare_client`
        ({ratio, target}: at most the target is met).
    """
    top, cpu = float(ceiling["requests_per_s"]), float(ceiling["cpu_s_per_1000_requests"])
    return {
        "delivery_vs_bare_client": {
            "ratio": round(deliveries_per_s / top, 3) if deliveries_per_s and top else None,
            "target": SENDER_TARGET},
        "cpu_per_delivery_vs_bare_client": {
            "ratio": round(worker_cpu_s_per_1000 / cpu, 3) if cpu > 0 else None,
            "target": SENDER_CPU_TARGET},
    }

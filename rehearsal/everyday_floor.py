"""The everyday scenario's floor: what the bare framework costs per request at a steady rate.

`hookline bench --scenario everyday` divides hookline's CPU per event (ingest) and per
delivery (workers) at a steady rate by the same run's flat-out figures (issue #33, target
1). This module measures the same ratio for code that does nothing but the HTTP:

* the bare aiohttp server (rehearsal/bare_server.py: read the body, answer 202), loaded by
  the same Python generator, body and connections as ingest, at the rate;
* one bare aiohttp client process (rehearsal/bare_client.py: sign and post, no database),
  paced as a worker delivering the rate's events to 3 endpoints: every 1/rate seconds one
  request to each, to a fresh lean receiver.

Both run at once, as ingest and the workers do in a steady run. Flat out, the server gets
the load of hookline's own flat-out run (wrk when installed) and the clients send as fast as
they can (rehearsal/bench_ceiling.py's sender ceiling). Each event must arrive as one HTTP
request and each delivery leave as one, and hookline serves and sends them with aiohttp: what
the bare processes cost at a rate is a floor under ingest's and the workers' cost there,
whatever the storage (docs/benchmarks.md, "Everyday rates: the floor").

It also measures the least durable service (durable_floor): rehearsal/ingest_floor.py and
rehearsal/delivery_floor.py on one SQLite file, the events stored with their jobs before
the 202 and each delivery marked when its 2xx came, under the same loads. What it costs at a
rate bounds hookline's costs there from below with the bookkeeping at-least-once delivery
needs counted too (rehearsal/everyday_reach.py, durable_reach).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hookline.rehearsal.bench import BenchOptions, proc_cpu_s, query
from hookline.rehearsal.bench_ceiling import (
    bare_server,
    drive_load,
    measure_sender_ceiling,
)
from hookline.rehearsal.harness import (
    free_port,
    receiver_child,
    start_until_ready,
    stop_process,
)
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret

ENDPOINTS = 3
"""Requests per event of the paced bare client: the bench's destinations d1, d2, d3."""

CLIENT_CONCURRENCY = 64
"""The paced bare client's connections (a worker's default `worker_concurrency`)."""

DURABLE_START_S = 15.0
"""Most seconds the durable floor's processes may take to serve."""

DURABLE_DRAIN_S = 60.0
"""Most seconds the durable floor may take to deliver every job after the load ended."""


def flat_out_floor(opts: BenchOptions, env: dict[str, str]) -> dict[str, Any]:
    """The bare server's CPU per request under `opts`' flat-out load, and the bare clients'
    CPU per request sending as fast as they can (ms, 4 decimals).

    Raises:
        subprocess.CalledProcessError: the load tool failed.
        RuntimeError: a bare client failed or a request was refused.
    """
    with bare_server(env) as (pid, port):
        cpu_before = proc_cpu_s(pid)
        load = drive_load(opts, env, f"http://127.0.0.1:{port}", wrk_duration_s=3)
        server_cpu_s = proc_cpu_s(pid) - cpu_before
    requests = int(load.get("requests") or load.get("events") or 0)
    clients = measure_sender_ceiling(opts, env)
    return {"server_requests": requests,
            "server_cpu_ms_per_request": _per_request_ms(server_cpu_s, requests),
            "client_requests": clients["requests"],
            "client_cpu_ms_per_request": round(clients["cpu_s_per_1000_requests"], 4)}


def steady_floor(opts: BenchOptions, env: dict[str, str], rate_per_s: float) -> dict[str, Any]:
    """The bare server loaded at `rate_per_s` events/s (opts.events of them) and the bare
    client paced at the same rate (ENDPOINTS requests per event), at once; each one's CPU
    per request, ms.

    Raises:
        subprocess.CalledProcessError: the load generator failed.
        RuntimeError: the bare client failed or a request was refused.
    """
    specs = [f"d{n}={generate_secret()}" for n in range(1, ENDPOINTS + 1)]
    duration_s = opts.events / rate_per_s
    with bare_server(env) as (pid, port), \
            receiver_child("hookline.rehearsal.fast_receiver", specs, env) as (_, r_port):
        client = subprocess.Popen(
            [sys.executable, "-m", "hookline.rehearsal.bare_client",
             "--url", f"http://127.0.0.1:{r_port}", *[a for s in specs for a in ("--endpoint", s)],
             "--requests", str(ENDPOINTS * opts.events),
             "--concurrency", str(CLIENT_CONCURRENCY), "--body-bytes", str(opts.body_bytes),
             "--duration-s", str(duration_s + 5), "--events-per-s", str(rate_per_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        try:
            assert client.stdin is not None and client.stdout is not None
            client.stdout.readline()  # ready
            cpu_before = proc_cpu_s(pid)
            client.stdin.write(b"go\n")
            client.stdin.flush()
            load = drive_load(opts, env, f"http://127.0.0.1:{port}")
            server_cpu_s = proc_cpu_s(pid) - cpu_before
            sent = json.loads(client.communicate(timeout=duration_s + 60)[0])
        finally:
            stop_process(client, grace_s=5)
    if client.returncode != 0 or sent["failed"]:
        raise RuntimeError(f"the paced bare client failed: {sent}")
    requests = int(load["events"])
    return {"server_requests": requests,
            "server_cpu_ms_per_request": _per_request_ms(server_cpu_s, requests),
            "client_requests": int(sent["requests"]),
            "client_cpu_ms_per_request": _per_request_ms(float(sent["cpu_s"]),
                                                         int(sent["requests"]))}


def durable_floor(opts: BenchOptions, env: dict[str, str], rate_per_s: float | None
                  ) -> dict[str, Any]:
    """The least durable service (module doc) under `opts`' load, on a SQLite file under
    opts.out_dir: flat out (`rate_per_s` None: the load of a flat-out bench) or at
    `rate_per_s` events/s (opts.events of them). Each process's CPU is read once every
    stored event's jobs are delivered, verified by the receiver, and marked delivered. Both
    space their writes by hookline's default `batch_interval_s` and commit as hookline does
    (`opts.synchronous` for the events, NORMAL for the marks).

    Returns:
        `events` (stored), `deliveries` (verified first arrivals), CPU per event of the
        ingest floor and per delivery of the delivery floor (ms, 4 decimals), `cores` (the
        two processes' CPU over the load generator's seconds, at a rate; None flat out), the
        delivery floor's `writes` and `reads`, and the load's `events_per_s` and latency.

    Raises:
        subprocess.CalledProcessError: the load generator failed.
        TimeoutError: a process did not serve within DURABLE_START_S, or the jobs were not
            all delivered and marked within DURABLE_DRAIN_S of the load's end.
        RuntimeError: an event was refused, a process ended early (a failed delivery ends
            the delivery floor), or a delivery arrived twice.
    """
    secrets = [generate_secret() for _ in range(ENDPOINTS)]
    spacing_ms = str(Config().batch_interval_s * 1000)
    folder = opts.out_dir / "durable-floor"
    shutil.rmtree(folder, ignore_errors=True)  # a fresh file, as every bench run's
    folder.mkdir(parents=True)
    db = str(folder / "floor.db")
    # A Unix socket's path has at most 107 bytes: a short folder of its own.
    with tempfile.TemporaryDirectory(prefix="hookline-floor-") as sockets, \
            contextlib.ExitStack() as stack:
        wake = str(Path(sockets) / "wake")
        _, r_port = stack.enter_context(receiver_child(
            "hookline.rehearsal.fast_receiver",
            [f"d{n + 1}={secret}" for n, secret in enumerate(secrets)], env))
        port = free_port()
        procs = {name: stack.enter_context(_stopped_on_exit(start_until_ready(
            [sys.executable, "-m", f"hookline.rehearsal.{args[0]}", *args[1:]], env,
            folder / f"{name}.log", DURABLE_START_S, f"the durable floor's {name}")))
            for name, args in (
                ("ingest", ["ingest_floor", "whole", "--db", db, "--jobs", str(ENDPOINTS),
                            "--listen", f"127.0.0.1:{port}", "--synchronous", opts.synchronous,
                            "--wake", wake, "--spacing-ms", spacing_ms]),
                ("delivery", ["delivery_floor", "--db", db, "--wake", wake,
                              "--url", f"http://127.0.0.1:{r_port}",
                              *[a for s in secrets for a in ("--secret", s)],
                              "--concurrency", str(CLIENT_CONCURRENCY),
                              "--spacing-ms", spacing_ms]))}
        cpu_before = {name: proc_cpu_s(proc.pid) for name, proc in procs.items()}
        load = drive_load(opts, env, f"http://127.0.0.1:{port}")
        _check_load(load)
        events = _await_settled(db, procs, folder, DURABLE_DRAIN_S)
        cpu_s = {name: proc_cpu_s(proc.pid) - cpu_before[name] for name, proc in procs.items()}
        with urllib.request.urlopen(f"http://127.0.0.1:{r_port}/_count", timeout=10) as answer:
            received = json.load(answer)
        stop_process(procs["delivery"], grace_s=10)
        assert procs["delivery"].stdout is not None
        counts = json.loads(procs["delivery"].stdout.read() or b"{}")
    deliveries = int(received["effects"])
    if (deliveries, int(received["requests"]), counts.get("delivered")) != (
            ENDPOINTS * events,) * 3:
        raise RuntimeError(f"the durable floor stored {events} events, the receiver got "
                           f"{received}, the delivery floor says {counts}")
    load_s = float(load.get("elapsed_s") or 0)  # the Python generator's; wrk gives none
    return {"events": events, "deliveries": deliveries,
            "ingest_cpu_ms_per_event": _per_request_ms(cpu_s["ingest"], events),
            "deliverer_cpu_ms_per_delivery": _per_request_ms(cpu_s["delivery"], deliveries),
            "cores": round(sum(cpu_s.values()) / load_s, 3) if rate_per_s and load_s else None,
            "writes": counts.get("writes"), "reads": counts.get("reads"),
            "load": {key: load.get(key) for key in ("events_per_s", "latency_ms")}}


@contextlib.contextmanager
def _stopped_on_exit(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield proc
    finally:
        stop_process(proc, grace_s=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _check_load(load: dict[str, Any]) -> None:
    """Raise RuntimeError when the load saw an answer other than 202 or a socket error (the
    Python generator's `statuses`, wrk's `non_2xx` and `socket_errors`)."""
    refused = {status: n for status, n in (load.get("statuses") or {}).items()
               if status != "202"}
    if refused or load.get("non_2xx") or load.get("socket_errors"):
        raise RuntimeError("the durable floor's ingest did not answer every event 202: "
                           f"{refused or load}")


def _await_settled(db: str, procs: dict[str, subprocess.Popen[bytes]], logs: Path,
                   within_s: float) -> int:
    """The events stored once every job is marked delivered and no event arrived for a
    tenth of a second (wrk ends with requests in flight).

    Raises:
        TimeoutError: not settled within `within_s` seconds.
        RuntimeError: a process ended (the end of its log, `logs`/NAME.log, says why).
    """
    deadline = time.monotonic() + within_s
    seen: tuple[int, int] | None = None
    while True:
        for name, proc in procs.items():
            if proc.poll() is not None:
                log = (logs / f"{name}.log").read_text(errors="replace")[-1000:]
                raise RuntimeError(f"the durable floor's {name} ended with "
                                   f"{proc.returncode}: {log}")
        events, open_jobs = query(db, "SELECT (SELECT count(*) FROM events), "
                                      "(SELECT count(*) FROM jobs WHERE status != 'delivered')")[0]
        if open_jobs == 0 and seen == (events, open_jobs):
            return int(events)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the durable floor left {open_jobs} jobs of {events} events "
                               f"unmarked {within_s:g} s after its load")
        seen = (events, open_jobs)
        time.sleep(0.1)


def floor_ratios(steady: dict[str, Any], flat: dict[str, Any]) -> dict[str, float | None]:
    """The bare server's and the bare client's CPU per request at a rate over their flat-out
    figures of the same round (3 decimals; None where a figure is missing or zero)."""
    return {side: ratio(steady[f"{side}_cpu_ms_per_request"],
                         flat[f"{side}_cpu_ms_per_request"]) for side in ("server", "client")}


def floor_cores(steady: dict[str, Any], rate_per_s: float) -> float | None:
    """The cores the bare server and client take at `rate_per_s` events/s: one server
    request and ENDPOINTS client requests per event (3 decimals; None when a figure is
    missing)."""
    server, client = steady["server_cpu_ms_per_request"], steady["client_cpu_ms_per_request"]
    if server is None or client is None:
        return None
    return round(rate_per_s * (float(server) + ENDPOINTS * float(client)) / 1000, 3)


def _per_request_ms(cpu_s: float, requests: int) -> float | None:
    """CPU seconds over requests, in ms to 4 decimals (None without requests)."""
    return round(cpu_s * 1000 / requests, 4) if requests else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b to 3 decimals; None when either is missing or zero."""
    return round(a / b, 3) if a and b else None

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
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from hookline.rehearsal.bench import BenchOptions, proc_cpu_s
from hookline.rehearsal.bench_ceiling import (
    bare_server,
    drive_load,
    measure_sender_ceiling,
)
from hookline.rehearsal.harness import receiver_child, stop_process
from hookline.shared.signing import generate_secret

ENDPOINTS = 3
"""Requests per event of the paced bare client: the bench's destinations d1, d2, d3."""

CLIENT_CONCURRENCY = 64
"""The paced bare client's connections (a worker's default `worker_concurrency`)."""


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

"""`hookline bench` end to end with tiny numbers, on each backend: the real CLI, receiver,
service and load generator processes, figures read back from bench.json."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from procs import start_cli

from hookline.rehearsal.harness import children_of, pid_alive
from hookline.rehearsal.machine_probe import cold_read_text

EVENTS = 300  # x 3 destinations = 900 deliveries


def run_bench(args: list[str], tmp_path: Path) -> tuple[dict[str, Any], str]:
    """Run `hookline ARGS --events 300 ...` with the Python load generator and a 1 s idle
    measurement; returns bench.json and the printed report."""
    out, log_path = tmp_path / "bench", tmp_path / "bench.log"
    proc = start_cli([*args, "--events", str(EVENTS), "--concurrency", "8", "--load", "python",
                      "--idle-s", "1", "--out", str(out)], log_path)
    assert proc.wait(timeout=150) == 0, log_path.read_text()[-3000:]
    return json.loads((out / "bench.json").read_text()), log_path.read_text()


def ingest_rate(result: dict[str, Any]) -> float:
    """Ingest's accepted events/s as bench.json records it."""
    return float(result["ingest"]["events_per_s"])


def check_figures(result: dict[str, Any], report: str, backend: str) -> None:
    """Every event accepted and delivered, and each headline figure present and sane."""
    ingest, delivery = result["ingest"], result["delivery"]
    assert result["backend"]["name"] == backend
    assert ingest["accepted"] == EVENTS and ingest["events_per_s"] > 0
    assert 0 < ingest["latency_ms"]["p50"] <= ingest["latency_ms"]["p99"]
    assert delivery["jobs_by_status"] == {"done": 3 * EVENTS}
    assert delivery["delivered"] == 3 * EVENTS and delivery["deliveries_per_s"] > 0
    assert 0 < delivery["latency_ms"]["p50"] <= delivery["latency_ms"]["p99"]
    # Recorded (the worker's write) never before delivered (the answer's arrival).
    for p in ("p50", "p99"):
        assert delivery["recorded_latency_ms"][p] >= delivery["latency_ms"][p]
    assert "accept->recorded ms p50" in report
    assert result["cpu_s_per_1000_deliveries"]["worker-1"] > 0
    assert result["db_bytes"] > 0
    assert result["idle"]["database_written"] is False  # an idle service writes nothing
    # Idle CPU per process too: on PostgreSQL the throwaway server's apart from hookline's.
    idle_by_process = result["idle"]["by_process"]
    assert {"supervisor", "ingest", "worker-1"} <= set(idle_by_process)
    # (a throwaway server's, when the bench started one: not a given server's)
    assert ("postgres" in idle_by_process) == ("postgres" in result["cpu_s_per_1000_deliveries"])
    assert "receiver" not in idle_by_process
    assert abs(sum(idle_by_process.values())
               - result["idle"]["cpu_percent_of_one_core"]) < 0.05
    assert f"backend: {backend}" in report and "deliveries/s" in report
    # What waking from a sleep costs this machine, measured beside the fsync.
    assert result["machine"]["cold_read_us"]["after_sleep_us"] > 0
    assert (f"machine: fsync ms p50 {result['machine']['fsync_ms']['p50']}, p99 "
            f"{result['machine']['fsync_ms']['p99']}; {cold_read_text(result['machine'])}\n"
            in report)
    # Which load generator, and why not wrk, in words in both bench.json and the report
    # (these runs ask for --load python; a steady --rate says it paces the load itself).
    spacing = {"even": "evenly", "poisson": "with Poisson arrivals"}[
        result["options"]["arrivals"]]
    assert result["load_generator"] in (
        "python (asked for with --load python)",
        f"python (a steady --rate is paced {spacing} by the Python generator; wrk drives "
        "flat-out runs)")
    assert f"load generator: {result['load_generator']}" in report
    # The receiver verified every signature and saw each webhook-id's effect once.
    assert sum(e["effects"] for e in result["receiver"].values()) == 3 * EVENTS
    assert all(e["bad_signatures"] == 0 for e in result["receiver"].values())


def test_bench_on_sqlite(tmp_path):
    """`hookline bench` on a fresh SQLite file reports every figure for 300 events, a
    per-second timeline that adds up to them, and bench.png beside bench.json."""
    result, report = run_bench(["bench"], tmp_path)
    check_figures(result, report, "sqlite")
    assert isinstance(result["wal_bytes"], int)
    # Each process's waits for SQLite's write lock, from its report at exit.
    assert set(result["write_lock"]) == {"ingest", "worker-1", "worker-2"}
    assert result["write_lock"]["ingest"]["hold"]["count"] > 0
    assert "write lock worker-1:" in report
    timeline = result["timeline"]
    assert [row["t"] for row in timeline] == list(range(len(timeline)))
    assert sum(row["accepted"] for row in timeline) == result["ingest"]["accepted"]
    assert sum(row["delivered"] for row in timeline) == result["delivery"]["delivered"]
    assert result["plot"] == "bench.png" and "plot: bench.png" in report
    assert "sent_latency_ms" not in result["delivery"]  # flat out: events wait paused
    # The ceiling: the same load against a bare aiohttp server, and ingest's share of it.
    assert result["ceiling"]["events_per_s"] > 0 and result["ceiling"]["tool"] == "python"
    versus = result["ingest_vs_bare_aiohttp"]
    assert versus["target"] == 0.6
    assert versus["ratio"] == round(ingest_rate(result) / result["ceiling"]["events_per_s"], 3)
    assert f"ingest_vs_bare_aiohttp {versus['ratio']} (target 0.6)" in report
    # The sender's ceiling: one bare signing client per worker against a lean receiver, and
    # the workers' share of its rate and multiple of its CPU per request.
    sender = result["sender_ceiling"]
    assert len(sender["clients"]) == 2 and sender["concurrency"] == 64
    assert sender["requests"] == 3 * EVENTS  # each client sent its share, all verified
    assert sender["requests_per_s"] > 0 and sender["cpu_s_per_1000_requests"] > 0
    rate, cpu = result["delivery_vs_bare_client"], result["cpu_per_delivery_vs_bare_client"]
    assert rate == {"ratio": round(result["delivery"]["deliveries_per_s"]
                                   / sender["requests_per_s"], 3), "target": 0.5}
    workers_cpu = round(sum(v for k, v in result["cpu_s_per_1000_deliveries"].items()
                            if k.startswith("worker")), 3)
    assert cpu == {"ratio": round(workers_cpu / sender["cpu_s_per_1000_requests"], 3),
                   "target": 2.5}
    assert (f"delivery_vs_bare_client {rate['ratio']} (target 0.5), "
            f"cpu_per_delivery_vs_bare_client {cpu['ratio']} (target at most 2.5)") in report
    assert (tmp_path / "bench" / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_on_a_throwaway_postgres_server(pg_server, tmp_path):
    """`hookline bench --backend postgres` starts its own durable server under --out,
    reports the same figures plus the server's CPU, and stops and deletes the server.
    (pg_server only gates the test on PostgreSQL being installed, as the other PostgreSQL
    tests are.)"""
    result, report = run_bench(["bench", "--backend", "postgres"], tmp_path)
    check_figures(result, report, "postgres")
    assert "throwaway" in result["backend"]["database"]
    assert result["cpu_s_per_1000_deliveries"]["postgres"] > 0
    assert result["wal_bytes"] is None
    assert not list((tmp_path / "bench").rglob("postmaster.pid"))  # server gone


def test_bench_on_a_given_postgres_server_at_a_steady_rate(pg_server, tmp_path):
    """`hookline --db postgresql://... bench --rate 400 --arrivals poisson` runs on a fresh
    `hookline_bench` database on that server, ingest and delivery at once (the other runs
    are flat out: destinations paused, then resumed), the events at random times."""
    result, report = run_bench(["--db", pg_server.url(), "bench", "--rate", "400",
                                "--arrivals", "poisson"], tmp_path)
    check_figures(result, report, "postgres")
    assert result["options"]["rate_per_s"] == "400.0"
    assert result["options"]["arrivals"] == "poisson"
    assert "paced with Poisson arrivals" in result["load_generator"]
    assert result["backend"]["database"] == "PostgreSQL server (given URL)"
    assert "postgres" not in result["cpu_s_per_1000_deliveries"]  # not ours to measure
    assert "ceiling" not in result  # a steady rate has no ceiling to compare with
    # From the sender's POST, not from the commit that stored the event: each job's
    # sent->delivered is longer than its accept->delivered, so every percentile is too.
    sent, accepted = result["delivery"]["sent_latency_ms"], result["delivery"]["latency_ms"]
    assert sent["joined"] == result["delivery"]["delivered"]  # every job found its send
    assert all(sent[p] > accepted[p] for p in ("p50", "p90", "p99", "max")), (sent, accepted)
    # and no more than the slowest 202 later: a job's two figures differ by its event's
    # time from the POST to the transaction that stored it
    slowest_202 = result["ingest"]["latency_ms"]["max"]
    assert all(sent[p] - accepted[p] <= slowest_202 + 0.01 for p in ("p50", "p99", "max"))
    assert f"sent->delivered ms p50 {sent['p50']}, p99 {sent['p99']}" in report


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid`."""
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {kid for parent in frontier for kid in children_of(parent)}
        found |= frontier
    return found


def test_sigterm_stops_the_bench_and_every_process_it_started(tmp_path):
    """SIGTERM in the middle of a run (as `kill` or a CI timeout sends it): the bench exits
    130 saying so, and the service, receiver and load generator it started are gone with
    it (they were left running: SIGTERM ended the bench without its clean-up)."""
    log_path = tmp_path / "bench.log"
    proc = start_cli(["bench", "--events", "3000", "--rate", "100", "--load", "python",
                      "--idle-s", "1", "--out", str(tmp_path / "bench")], log_path)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while not any("hookline.workers" in _cmdline(pid) for pid in started):
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "the bench never started its service"
            time.sleep(0.2)
            started = _descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130, log_path.read_text()[-3000:]
        assert "bench interrupted; the processes it started were stopped" in (
            log_path.read_text())
        deadline = time.monotonic() + 15  # a child may still be exiting after its SIGTERM
        while left := {pid for pid in started if pid_alive(pid)}:
            assert time.monotonic() < deadline, {pid: _cmdline(pid) for pid in left}
            time.sleep(0.2)
    finally:  # a failed run leaves nothing behind either
        for pid in [proc.pid, *started]:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""

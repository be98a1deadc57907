"""`hookline bench --scenario ingest`: hookline's ingest and the least durable ingest, each
with one and with two HTTP processes, against the bare aiohttp server (one process) in one
run (issue #33, target 3: ingest at least 0.6 of the bare server's events/s).

Every design serves `POST /v1/events` on 127.0.0.1 and is driven by wrk (one thread,
`concurrency` connections, `phase_s` seconds, ~1.5 KB events: the bench's load):

* **bare**: rehearsal/bare_server.py, one process: read the body, answer 202. The ceiling.
* **hookline** and **hookline_2**: `hookline serve` on a fresh SQLite file with 1 or 2
  ingest processes on one port (`ingest_processes`), 3 paused destinations every event
  matches (so only ingest works, and each event gets 3 jobs, as in the bench).
* **hookline_writer** and **hookline_writer_2**: the same with `ingest_writer = process`:
  the ingest processes' commits made by the ingest writer process (counted among the
  serving processes).
* **writer_fed**: the same service as hookline_writer, its writer fed directly by
  rehearsal/writer_feeder.py over 2 connections, batches of half the connections (as one
  HTTP process sends them) ready at once, no HTTP: the writer's rate when HTTP processes on
  cores of their own keep it busy. Not a way to publish, so not among the designs the
  target counts; with the HTTP side's cost per event it gives `model_with_spare_cores`:
  min(k HTTP processes' rate, each on a core of its own, the writer's) over the bare
  server's, for k = 1 and 2 (docs/benchmarks.md, "A scaling model for 16 cores, with the
  ingest writer").
* **floor**, **floor_split** and **floor_split_2** (rehearsal/ingest_floor.py): the least a
  durable ingest must do, each event committed with 3 jobs before its 202; in one process
  (its commits on a thread), and as 1 or 2 HTTP processes feeding one writer process over a
  Unix socket (the design target 3 names).

The designs are measured in turn, `rounds` times, so the machine's other load falls on each
alike. Per design, from its median round by events/s: events/s, the CPU its serving processes
used per event (each and together, µs; each split into its event loop's thread and the
others, the database thread above all), the CPU of its other processes (hookline's
supervisor and workers, which a commit wakes), wrk's own CPU per request, the cores all of
it took, p99 latency, the events stored against the answers 2xx (a count: events still in
flight when wrk stops are stored but not counted as answered) and the jobs stored per event;
and its share of the bare server's events/s (the median of the rounds' shares, each against
the same round's bare server). The checks: every round served (requests answered, no socket
errors, every process alive), no answer but 2xx, no fewer events stored than answered 2xx,
each with its 3 jobs, and the best of hookline's four designs at TARGET of the bare
server.

Times: durations are seconds unless named `_ms`; CPU per event in µs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.rehearsal import wrk
from hookline.rehearsal.bench import (
    bench_env,
    proc_cpu_s,
    proc_thread_cpu_s,
    service_process,
    setup_destinations,
)
from hookline.rehearsal.bench_ceiling import bare_server
from hookline.rehearsal.harness import INGEST_TOKEN, free_port, start_until_ready, stop_process
from hookline.rehearsal.scenario_common import ScenarioOptions
from hookline.rehearsal.scenario_scale import count_events_and_jobs, thread_split
from hookline.shared.process.ingest_writer import WRITER_ADDRESS_FILE
from hookline.shared.signing import generate_secret

TARGET = 0.6
"""Issue #33, target 3: ingest's events/s over the bare aiohttp server's, at least."""

JOBS_PER_EVENT = 3
"""The bench's destinations per event (d1, d2, d3)."""

DESIGNS = ("bare", "hookline", "hookline_2", "hookline_writer", "hookline_writer_2",
           "writer_fed", "floor", "floor_split", "floor_split_2")
"""In the order each round measures them."""

FLOOR_START_S = 15.0
"""Seconds a floor process may take to serve (as long as a hookline service gets)."""


@dataclass(frozen=True, slots=True)
class Running:
    """A design serving: its port, name -> pid of the processes that serve its events, its
    SQLite file (None: the bare server stores nothing), and name -> pid of its other
    processes (hookline's supervisor and workers)."""

    port: int
    pids: dict[str, int]
    db: str | None
    others: dict[str, int] = dataclasses.field(default_factory=dict)
    writer_address: Path | None = None
    """The writer's address file, for a design fed without HTTP (writer_fed)."""


def run_ingest(opts: ScenarioOptions, work: Path) -> dict[str, Any]:
    """The scenario (module docstring); returns its figures.

    Raises:
        ValueError: not on SQLite (the floor is a SQLite design).
        RuntimeError: wrk is not installed, or a floor process ended before it served.
        TimeoutError: a hookline service or a floor process did not come up.
    """
    if opts.backend != "sqlite":
        raise ValueError("the ingest scenario runs on SQLite only")
    if not wrk.available():
        raise RuntimeError("the ingest scenario needs wrk (Debian package wrk) for its load")
    env = bench_env(work)
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in DESIGNS}
    with contextlib.ExitStack() as stack:
        running = {label: stack.enter_context(_start(label, opts, work, env))
                   for label in DESIGNS}
        for n in range(opts.rounds):
            for label in DESIGNS:
                rounds[label].append(_measure(opts, running[label], f"{label}-r{n}"))
    designs = {label: _median_round(rounds[label], rounds["bare"]) for label in DESIGNS}
    best = max(designs[label]["vs_bare"] or 0.0 for label in DESIGNS
               if label.startswith("hookline"))
    every = [(label, r) for label, runs in rounds.items() for r in runs]
    checks = {
        "every_round_served": all(r["requests"] > 0 and r["socket_errors"] is None
                                  and r["processes_alive"] for _, r in every),
        "every_answer_2xx": all(r["non_2xx"] == 0 for _, r in every),
        "stored_no_fewer_than_answered_2xx": all(
            label == "bare" or r["stored"] >= r["answered_2xx"] for label, r in every),
        f"every_event_{JOBS_PER_EVENT}_jobs": all(
            label == "bare" or r["jobs_per_event"] == float(JOBS_PER_EVENT)
            for label, r in every),
        f"hookline_at_least_{TARGET}_of_bare": best >= TARGET}
    return {"designs": designs,
            "vs_bare_by_design": {label: designs[label]["vs_bare"]
                                  for label in DESIGNS if label != "bare"},
            "model_with_spare_cores": spare_cores_model(designs),
            "target": TARGET, "checks": checks, "pass": all(checks.values())}


def spare_cores_model(designs: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """{"http_1", "http_2"}: the share of the bare server's events/s that hookline's writer
    design would serve with 1 or 2 HTTP processes on cores of their own, by arithmetic on
    this run's medians: min(k / the HTTP process's CPU per event in hookline_writer, the
    writer's events/s fed directly) over the bare server's events/s. The bare server is one
    process, which already uses a whole core here, so more cores would not raise its own
    rate. None where a figure is missing."""
    http_us = designs["hookline_writer"]["process_cpu_us_per_event"].get("ingest")
    writer_rate = designs["writer_fed"]["events_per_s"]
    bare_rate = designs["bare"]["events_per_s"]
    if not http_us or not writer_rate or not bare_rate:
        return {"http_1": None, "http_2": None}
    return {f"http_{k}": round(min(k * 1e6 / http_us, writer_rate) / bare_rate, 3)
            for k in (1, 2)}


@contextlib.contextmanager
def _start(label: str, opts: ScenarioOptions, work: Path, env: dict[str, str]
           ) -> Iterator[Running]:
    """Start design `label` (DESIGNS); yields it serving; stops it on exit."""
    if label == "bare":
        with bare_server(env) as (pid, port):
            yield Running(port, {"bare": pid}, None)
    elif label.startswith("hookline") or label == "writer_fed":
        folder = work / label
        folder.mkdir()
        db = str(folder / "hookline.db")
        # d1, d2, d3, every event type, paused: their URLs (port 9) are never called
        asyncio.run(setup_destinations(db, 9, [generate_secret() for _ in range(JOBS_PER_EVENT)],
                                       paused=True))
        processes = 2 if label.endswith("_2") else 1
        service_env = bench_env(folder)
        with service_process(db, folder, service_env, workers=opts.workers,
                             synchronous=opts.synchronous, ingest_processes=processes,
                             ingest_writer="process" if "writer" in label else "thread"
                             ) as (port, procs):
            # `ingest-writer` serves too: it commits what the ingest processes take
            serving = {slot: pid for slot, pid in procs.items() if slot.startswith("ingest")}
            address = None
            if label == "writer_fed":  # only the writer works; ingest waits aside
                serving = {"ingest-writer": procs["ingest-writer"]}
                address = Path(service_env["HOOKLINE_RUNTIME_DIR"]) / WRITER_ADDRESS_FILE
            yield Running(port, serving, db, {slot: pid for slot, pid in procs.items()
                                              if slot not in serving}, address)
    else:
        with _floor(label, work, env, opts.synchronous) as running:
            yield running


@contextlib.contextmanager
def _floor(label: str, work: Path, env: dict[str, str], synchronous: str
           ) -> Iterator[Running]:
    """rehearsal/ingest_floor.py as design `label`: `floor` one process; `floor_split` one
    HTTP process and the writer; `floor_split_2` two HTTP processes and the writer; its
    commits with SQLite's `synchronous` (as the service's). Each process's stderr goes to
    `work/label/NAME.log`.

    Raises:
        RuntimeError: a process ended before it served (the end of its log says why).
        TimeoutError: a process did not serve within FLOOR_START_S.
    """
    folder = work / label
    folder.mkdir()
    db, port = str(folder / "floor.db"), free_port()
    # A Unix socket's path has at most 107 bytes: a short folder of its own, not `work`.
    sockets = Path(tempfile.mkdtemp(prefix="hookline-floor-"))
    sock = str(sockets / "writer.sock")
    listen = f"127.0.0.1:{port}"
    module = [sys.executable, "-m", "hookline.rehearsal.ingest_floor"]
    commits = ["--db", db, "--jobs", str(JOBS_PER_EVENT), "--synchronous", synchronous]
    roles: list[tuple[str, list[str]]]
    if label == "floor":
        roles = [("whole", ["whole", *commits, "--listen", listen])]
    else:
        http = ["http", "--socket", sock, "--listen", listen]
        roles = [("writer", ["writer", *commits, "--socket", sock]), ("http", http)]
        if label.endswith("_2"):
            roles.append(("http-2", http))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        pids = {}
        for name, args in roles:  # in order: the writer listens before an HTTP process dials
            proc = start_until_ready([*module, *args], env, folder / f"{name}.log",
                                     FLOOR_START_S, f"{label}: ingest_floor {name}")
            procs.append(proc)
            pids[name] = proc.pid
        yield Running(port, pids, db)
    finally:
        for proc in reversed(procs):
            stop_process(proc, grace_s=10)
            if proc.stdout is not None:
                proc.stdout.close()
        shutil.rmtree(sockets, ignore_errors=True)


def _measure(opts: ScenarioOptions, design: Running, label: str) -> dict[str, Any]:
    """wrk for opts.phase_s against `design`: its figures for one round."""
    stored_before = count_events_and_jobs(design.db) if design.db is not None else (0, 0)
    every_pid = {**design.pids, **design.others}
    cpu_before = {name: proc_cpu_s(pid) for name, pid in every_pid.items()}
    threads_before = {name: proc_thread_cpu_s(pid) for name, pid in design.pids.items()}
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run_id = f"{label}-{os.urandom(4).hex()}"
    if design.writer_address is not None:
        load = _feed(opts, design.writer_address, run_id)
    else:
        load = wrk.run_wrk(f"http://127.0.0.1:{design.port}", max(1, round(opts.phase_s)),
                           opts.concurrency, opts.body_bytes, run_id, INGEST_TOKEN)
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = {name: proc_cpu_s(pid) - cpu_before[name] for name, pid in every_pid.items()}
    threads_s = {name: thread_split(pid, threads_before[name], proc_thread_cpu_s(pid))
                 for name, pid in design.pids.items()}
    # the load (wrk, or the feeder) is the only child reaped meanwhile: every design's
    # processes outlive the rounds
    wrk_cpu_s = ((children_after.ru_utime + children_after.ru_stime)
                 - (children_before.ru_utime + children_before.ru_stime))
    time.sleep(0.5)  # requests wrk left open at its end still commit
    requests = int(load["requests"])
    stored = jobs_per_event = None
    if design.db is not None:
        events_now, jobs_now = count_events_and_jobs(design.db)
        stored = events_now - stored_before[0]
        jobs_per_event = round((jobs_now - stored_before[1]) / stored, 3) if stored else None
    serving_s = sum(cpu_s[name] for name in design.pids)
    others_s = sum(cpu_s[name] for name in design.others)
    duration_s = requests / load["events_per_s"] if load["events_per_s"] else 0.0
    return {
        "events_per_s": load["events_per_s"], "requests": requests,
        "non_2xx": load["non_2xx"], "socket_errors": load["socket_errors"],
        "p99_ms": load["latency_ms"].get("p99"),
        "cpu_us_per_event": _per_event_us(serving_s, requests),
        "process_cpu_us_per_event": {name: _per_event_us(cpu_s[name], requests)
                                     for name in design.pids},
        # the event loop's thread, and the rest (the database thread above all)
        "threads_cpu_us_per_event": {
            name: {thread: _per_event_us(seconds, requests) for thread, seconds in split.items()}
            for name, split in threads_s.items()},
        "other_processes_cpu_us_per_event": _per_event_us(others_s, requests)
        if design.others else None,
        "wrk_cpu_us_per_request": _per_event_us(wrk_cpu_s, requests),
        "cores": round((serving_s + others_s + wrk_cpu_s) / duration_s, 2)
        if duration_s else None,
        "processes_alive": all(Path(f"/proc/{pid}").exists() for pid in every_pid.values()),
        "answered_2xx": requests - int(load["non_2xx"]), "stored": stored,
        "jobs_per_event": jobs_per_event}


def _feed(opts: ScenarioOptions, address: Path, run_id: str) -> dict[str, Any]:
    """rehearsal/writer_feeder.py for opts.phase_s: 2 connections, each with batches of
    half of opts.concurrency events; its figures in wrk's shape (no latency: the feeder
    times no request).

    Raises:
        subprocess.CalledProcessError: the feeder failed (the writer went away).
    """
    out = subprocess.run(
        [sys.executable, "-m", "hookline.rehearsal.writer_feeder", "--address", str(address),
         "--seconds", str(opts.phase_s), "--links", "2",
         "--batch", str(max(1, opts.concurrency // 2)), "--body-bytes", str(opts.body_bytes),
         "--run-id", run_id],
        capture_output=True, text=True, check=True, timeout=opts.phase_s + 60).stdout
    figures = json.loads(out.splitlines()[-1])
    events = int(figures["events"])
    return {"requests": events, "non_2xx": events - int(figures["accepted"]),
            "socket_errors": None, "latency_ms": {},
            "events_per_s": round(events / figures["elapsed_s"], 1)
            if figures["elapsed_s"] else 0.0}


def _per_event_us(seconds: float, events: int) -> float | None:
    return round(seconds / events * 1e6, 1) if events else None


def _median_round(runs: list[dict[str, Any]], bare: list[dict[str, Any]]) -> dict[str, Any]:
    """A design's figures: those of its median round by events/s (the upper middle one of
    an even number), every round's events/s and CPU per event, and the median of its
    per-round shares of the bare server (None for a round whose bare server answered
    nothing)."""
    median = dict(sorted(runs, key=lambda r: r["events_per_s"])[len(runs) // 2])
    shares = [run["events_per_s"] / ceiling["events_per_s"] if ceiling["events_per_s"]
              else None for run, ceiling in zip(runs, bare, strict=True)]
    known = [share for share in shares if share is not None]
    median.update({
        "rounds_events_per_s": [run["events_per_s"] for run in runs],
        "rounds_cpu_us_per_event": [run["cpu_us_per_event"] for run in runs],
        "vs_bare": round(statistics.median(known), 3) if known else None,
        "rounds_vs_bare": [None if share is None else round(share, 3) for share in shares]})
    return median


def print_ingest(result: dict[str, Any]) -> None:
    """The scenario's lines of the summary."""
    for label, figures in result["designs"].items():
        threads = figures["threads_cpu_us_per_event"]
        processes = ", ".join(
            f"{name} {us}: loop {threads[name]['event_loop']}, other threads "
            f"{threads[name]['other_threads']}"
            for name, us in figures["process_cpu_us_per_event"].items())
        others = figures["other_processes_cpu_us_per_event"]
        if others is not None:
            processes += f"; supervisor and workers {others}"
        share = "" if label == "bare" else \
            f", {figures['vs_bare']} of bare (rounds {figures['rounds_vs_bare']})"
        load = "the feeder" if label == "writer_fed" else "wrk"
        print(f"{label}: {figures['events_per_s']} events/s{share}; CPU "
              f"{figures['cpu_us_per_event']} µs/event ({processes}), {load} "
              f"{figures['wrk_cpu_us_per_request']} µs/request, {figures['cores']} cores, "
              f"p99 {figures['p99_ms']} ms")
    print(f"events/s against the bare server's: {json.dumps(result['vs_bare_by_design'])} "
          f"(target for hookline {result['target']}; writer_fed is the writer alone)")
    model = result["model_with_spare_cores"]
    print(f"with a core for each HTTP process (arithmetic: min(k HTTP processes at "
          f"hookline_writer's CPU per event, writer_fed) over bare): 1 process "
          f"{model['http_1']}, 2 processes {model['http_2']}")

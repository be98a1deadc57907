"""`hookline bench --compare`: one workload through hookline, Celery and Huey, in one run.

For each system in turn: a fresh receiver (its own process, 3 endpoints with their own
`whsec_` secrets, `ok` behaviour; the same kind for every system: the lean one,
rehearsal/fast_receiver.py, unless the options ask for the receiver fixture,
rehearsal/receiver.py, whose CPU per delivery would on two cores be taken from the system
under test), the system (rehearsal/compare/systems.py), then the load generator (its own
process, the same concurrency for all, flat out unless a rate is given) posting the same N
events (`bench-RUN-INDEX`, about 1.5 KB each) to the system's
front door and recording when each one was accepted. The run waits until the receiver has
a verified arrival for every (endpoint, accepted event), then reads the receiver's receipts:
accept -> first verified arrival is the latency, for all three alike. CPU seconds and peak
RSS are read from /proc for every process of the system (not the receiver's nor the load
generator's). Writes compare.json; see docs/benchmarks.md, "Compared with Celery and Huey".
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.rehearsal.bench import proc_cpu_s, proc_peak_rss_mb
from hookline.rehearsal.compare import systems
from hookline.rehearsal.compare.systems import CompareError, Destination, Running
from hookline.rehearsal.compare.workload import body_index, delivery_figures, ratios, read_receipts
from hookline.rehearsal.harness import LOCAL_SETTINGS, ReceiverNotStarted, child_env, receiver_child
from hookline.shared.signing import generate_secret

SYSTEMS = ("hookline", "celery", "huey")
DESTINATIONS = 3
# The receiver each system delivers to: its module, run with `python -m`.
RECEIVERS = {"lean": "hookline.rehearsal.fast_receiver", "fixture": "hookline.rehearsal.receiver"}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareOptions:
    """What to run: `events` events posted by `concurrency` connections (at `rate_per_s`,
    None = flat out), delivered to 3 destinations by `workers` processes of
    `worker_concurrency` in-flight requests each, in every system. `synchronous`: hookline's
    SQLite setting. `timeout_s`: longest wait for one system's deliveries (None: 60 s plus
    100 deliveries/s). `receiver`: a key of RECEIVERS, "lean" (rehearsal/fast_receiver.py)
    or "fixture" (rehearsal/receiver.py), for every system. Results go to `out_dir`.
    """

    events: int = 20_000
    concurrency: int = 64
    rate_per_s: float | None = None
    workers: int = 2
    worker_concurrency: int = 64
    body_bytes: int = 1500
    synchronous: str = "FULL"
    out_dir: Path = Path("results/bench")
    timeout_s: float | None = None
    systems: tuple[str, ...] = SYSTEMS
    receiver: str = "lean"


@contextlib.contextmanager
def receiver(work: Path, name: str, kind: str = "lean"
             ) -> Iterator[tuple[str, list[Destination]]]:
    """A fresh receiver process (`kind`: a key of RECEIVERS) with 3 `ok` endpoints, logging
    to `work/NAME-receiver.log`; yields (its base URL, destinations).

    Raises:
        ValueError: `kind` is not a key of RECEIVERS.
        CompareError: the receiver did not start.
    """
    if kind not in RECEIVERS:
        raise ValueError(f"unknown receiver {kind!r}; one of {sorted(RECEIVERS)}")
    secrets = [generate_secret() for _ in range(DESTINATIONS)]
    specs = [f"d{n}={secret}:ok" for n, secret in enumerate(secrets, 1)]
    with (work / f"{name}-receiver.log").open("wb") as log:
        try:
            with receiver_child(RECEIVERS[kind], specs, child_env(), stderr=log,
                                grace_s=systems.STOP_GRACE_S) as (_, port):
                base = f"http://127.0.0.1:{port}"
                yield base, [Destination(name=f"d{n}", url=f"{base}/d{n}", secret=secret)
                             for n, secret in enumerate(secrets, 1)]
        except ReceiverNotStarted as exc:
            raise CompareError(str(exc)) from exc


def _get_json(url: str) -> Any:
    """GET `url` (the receiver, on 127.0.0.1) and parse its JSON.

    Raises:
        CompareError: no answer, or not JSON.
    """
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 (127.0.0.1)
            return json.loads(resp.read())
    except (OSError, ValueError) as exc:  # URLError is an OSError
        raise CompareError(f"the receiver did not answer {url}: {exc}") from exc


def _start(name: str, work: Path, dests: list[Destination],
           opts: CompareOptions) -> AbstractContextManager[Running]:
    kwargs = {"workers": opts.workers, "concurrency": opts.worker_concurrency}
    if name == "hookline":
        return systems.hookline(work, dests, synchronous=opts.synchronous, **kwargs)
    if name == "celery":
        return systems.celery(work, dests, **kwargs)
    if name == "huey":
        return systems.huey(work, dests, **kwargs)
    raise ValueError(f"unknown system {name!r}")


def run_system(name: str, opts: CompareOptions, work: Path, run_id: str,
               index_by_sha: dict[str, int]) -> dict[str, Any]:
    """Run the workload through one system; returns its figures (`complete`: every event
    accepted and delivered to every destination within the timeout).

    Raises:
        CompareError: the system, the receiver or the load generator failed.
    """
    folder = work / name
    folder.mkdir()
    accepts = folder / "accepts.json"
    with receiver(work, name, opts.receiver) as (receiver_url, dests), \
            _start(name, folder, dests, opts) as running:
        cpu_before = {slot: proc_cpu_s(pid) for slot, pid in running.pids.items()}
        load_started_at = time.time()
        load = subprocess.run(
            [sys.executable, "-m", "hookline.rehearsal.loadgen", "--url", running.url,
             "--events", str(opts.events), "--concurrency", str(opts.concurrency),
             "--body-bytes", str(opts.body_bytes), "--run-id", run_id,
             "--accepts", str(accepts),
             *(["--rate", str(opts.rate_per_s)] if opts.rate_per_s else [])],
            capture_output=True, text=True, env=child_env(LOCAL_SETTINGS), check=False)
        if load.returncode != 0:
            raise CompareError(f"{name}: the load generator failed: {load.stderr[-2000:]}")
        ingest = json.loads(load.stdout)
        accepted_at: list[float | None] = json.loads(accepts.read_text())
        accepted = sum(a is not None for a in accepted_at)
        timeout_s = opts.timeout_s or 60 + accepted * DESTINATIONS / 100
        complete = _wait_effects(receiver_url, accepted * DESTINATIONS, timeout_s)
        busy_s = time.time() - load_started_at
        cpu = {slot: round(proc_cpu_s(pid) - cpu_before[slot], 2)
               for slot, pid in running.pids.items()}
        rss = {slot: round(proc_peak_rss_mb(pid), 1) for slot, pid in running.pids.items()}
        effects, requests, unverified = read_receipts(_get_json(f"{receiver_url}/_receipts"))
    figures = delivery_figures(
        effects=effects, requests=requests, accepted_at=accepted_at,
        index_by_sha=index_by_sha, destinations=DESTINATIONS, load_started_at=load_started_at)
    delivered = figures["delivered"]
    return {
        "accepted": accepted,
        "complete": complete and accepted == opts.events and delivered == figures["expected"],
        "events_per_s": round(accepted / ingest["elapsed_s"], 1),
        "ingest_latency_ms": ingest["latency_ms"], "ingest_statuses": ingest["statuses"],
        **figures, "unverified_requests": unverified, "busy_s": round(busy_s, 2),
        "cpu_s": cpu,
        "cpu_s_per_1000_deliveries": round(sum(cpu.values()) * 1000 / max(1, delivered), 3),
        "peak_rss_mb": rss, "pids": running.pids,
    }


def _wait_effects(receiver_url: str, expected: int, timeout_s: float) -> bool:
    """Poll the receiver's `GET /_count` every 0.1 s until it has `expected` effects;
    False after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _get_json(f"{receiver_url}/_count")["effects"] >= expected:
            return True
        time.sleep(0.1)
    return False


def versions() -> dict[str, str]:
    """Versions of the peers' packages and of redis-server (`n/a` when missing)."""
    out = {}
    for package in ("celery", "kombu", "redis", "huey", "requests", "aiohttp"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = "n/a"
    try:
        text = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                              check=True).stdout
        out["redis-server"] = next((w[2:] for w in text.split() if w.startswith("v=")), text)
    except (OSError, subprocess.CalledProcessError):
        out["redis-server"] = "n/a"
    return out


def summary_row(figures: dict[str, Any]) -> dict[str, float | None]:
    """The figures the ratios compare, from one system's result."""
    return {"events_per_s": figures["events_per_s"],
            "deliveries_per_s": figures["deliveries_per_s"],
            "latency_p50_ms": figures["latency_ms"]["p50"],
            "latency_p99_ms": figures["latency_ms"]["p99"],
            "cpu_s_per_1000_deliveries": figures["cpu_s_per_1000_deliveries"]}


def run_compare(opts: CompareOptions,
                progress: Callable[[str], None] = lambda text: None) -> dict[str, Any]:
    """Run the workload through each of `opts.systems` in turn; returns the figures, also
    written to `out_dir/compare.json`.

    Args:
        opts: the workload and the settings.
        progress: called with a line of text as each system starts.

    Raises:
        ValueError: `opts.receiver` is not a key of RECEIVERS.
        CompareUnavailable: the bench extra or redis-server is missing (checked first).
        CompareError: a system did not start.
    """
    if opts.receiver not in RECEIVERS:
        raise ValueError(f"unknown receiver {opts.receiver!r}; one of {sorted(RECEIVERS)}")
    systems.check_available()
    load_before = os.getloadavg()[0]
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    # Absolute: the peers' processes run with the work folder as their current directory.
    work = Path(tempfile.mkdtemp(prefix="hookline-compare-", dir=opts.out_dir.resolve()))
    run_id = os.urandom(4).hex()
    index_by_sha = body_index(run_id, opts.events, opts.body_bytes)
    results: dict[str, Any] = {}
    for name in opts.systems:
        progress(f"compare: {name} ...")
        results[name] = run_system(name, opts, work, run_id, index_by_sha)
    result: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0],
                    "load_average_1m": {"before": round(load_before, 2),
                                        "after": round(os.getloadavg()[0], 2)}},
        "options": {f: str(getattr(opts, f)) for f in opts.__slots__},
        "versions": versions(), "work_dir": str(work), "systems": results,
        "ratios": {}}
    if "hookline" in results:
        ours = summary_row(results["hookline"])
        result["ratios"] = {name: ratios(ours, summary_row(fig))
                            for name, fig in results.items() if name != "hookline"}
    (opts.out_dir / "compare.json").write_text(json.dumps(result, indent=2))
    return result


def print_compare(result: dict[str, Any]) -> None:
    """A table per system and the ratios (above 1 favours hookline)."""
    print(f"{'system':<10}{'events/s':>10}{'deliv/s':>10}{'p50 ms':>9}{'p90 ms':>9}"
          f"{'p99 ms':>9}{'max ms':>9}{'cpu s/1k':>10}  delivered")
    for name, fig in result["systems"].items():
        lat = fig["latency_ms"]
        print(f"{name:<10}{fig['events_per_s']:>10}{fig['deliveries_per_s'] or '-':>10}"
              f"{lat['p50']:>9}{lat['p90']:>9}{lat['p99']:>9}{lat['max']:>9}"
              f"{fig['cpu_s_per_1000_deliveries']:>10}  {fig['delivered']}/{fig['expected']}"
              f"{'' if fig['complete'] else ' INCOMPLETE'}")
    for name, fig in result["systems"].items():
        print(f"{name}: cpu s {fig['cpu_s']}; peak rss MiB {fig['peak_rss_mb']}")
    for name, rat in result["ratios"].items():
        shown = ", ".join(f"{k} {'-' if v is None else f'{v}x'}" for k, v in rat.items())
        print(f"hookline vs {name} (above 1 favours hookline): {shown}")
    v, load = result["versions"], result["machine"]["load_average_1m"]
    print(f"versions: celery {v['celery']} (kombu {v['kombu']}), redis-server "
          f"{v['redis-server']}, huey {v['huey']}; load average (1 min) before "
          f"{load['before']}, after {load['after']} on {result['machine']['cores']} cores; "
          f"compare.json in {Path(result['work_dir']).parent}")

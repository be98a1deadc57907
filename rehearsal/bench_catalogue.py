"""The cost of validation at publish (the event-type catalogue), and the validator choice.

`python -m hookline.rehearsal.bench_catalogue [--rounds 3] [--phase-s 10] [--out DIR]`
(run it under `flock /tmp/hookline-bench.lock`, like every benchmark: docs/benchmarks.md):

* **engines**: hookline's publish check in-process, on the same ~1.5 KB events with a
  20-property `data` (`parse_published` then the check of `data`), with the schema compiled
  by jsonschema-rs and by fastjsonschema, alternated A B A B; microseconds per event.
  fastjsonschema is measured for the record: it does not know draft 2020-12 (a 2020-12
  schema compiles, but keywords such as `prefixItems` are silently ignored).
* **ingest**: one `hookline serve` (1 worker, SQLite) on a fresh database with one paused
  destination subscribed to the events, so only ingest works; `wrk` posts events of type
  `bench.event` with a 20-property `data` flat out for `phase_s` seconds, alternately with
  the catalogue empty (A) and with `bench.event` in it, a 20-property schema and validation
  `reject` (B), `rounds` times each, in the same run; the catalogue is switched through the
  store while the service runs (it applies within its 1 s refresh). Reports each phase's
  events/s, the medians and B/A.

Writes `catalogue-bench.json` to `--out` and prints a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from hookline.ingest.validation import parse_published
from hookline.rehearsal import wrk
from hookline.rehearsal.bench import bench_env, proc_cpu_s, query, service_process
from hookline.rehearsal.harness import INGEST_TOKEN
from hookline.rehearsal.scenario_common import with_store
from hookline.shared.catalogue import compile_schema, event_type_fields
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store

PROPERTIES = 20
EVENT_TYPE = "bench.event"
REFRESH_WAIT_S = 2.5  # the service's catalogue refresh is every 1 s


def bench_schema() -> dict[str, Any]:
    """A draft 2020-12 schema of `data` with PROPERTIES typed, bounded, required properties."""
    kinds = ({"type": "string", "maxLength": 200}, {"type": "integer", "minimum": 0},
             {"type": "boolean"}, {"type": "number", "maximum": 1e12})
    properties = {f"f{i}": kinds[i % len(kinds)] for i in range(PROPERTIES)}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": properties, "required": list(properties),
            "additionalProperties": False}


def bench_data_lua() -> str:
    """The `data` object of every event, as a Lua string literal of JSON (~1.5 KB body)."""
    values = ('"' + "x" * 60 + '"', "12345", "true", "3.25")
    data = ",".join(f'"f{i}":{values[i % len(values)]}' for i in range(PROPERTIES))
    return "{" + data + "}"


_LUA = """
local counter = 0
local run = "%(run)s"
local thread_no = 0
function setup(thread)
  thread_no = thread_no + 1
  thread:set("tid", thread_no)
end
local data = '%(data)s'
function request()
  counter = counter + 1
  local body = '{"id":"' .. run .. "-" .. tid .. "-" .. counter ..
    '","type":"%(type)s","data":' .. data .. '}'
  return wrk.format("POST", "/v1/events", {["Content-Type"] = "application/json",
                     ["Authorization"] = "Bearer %(token)s"}, body)
end
"""


def engines(rounds: int, events: int = 50_000) -> dict[str, Any]:
    """Microseconds per event of hookline's publish check with each engine (module doc)."""
    import fastjsonschema  # noqa: PLC0415  (the bench extra; measured only here)

    schema = bench_schema()
    body = ('{"id":"e1","type":"bench.event","data":%s}' % bench_data_lua()).encode()  # noqa: UP031
    rs_check = compile_schema(schema).is_valid
    fast_check = fastjsonschema.compile(schema)

    def timed(check: Any) -> float:
        started = time.perf_counter()
        for _ in range(events):
            _, data, _ = parse_published(body, 1 << 20)
            check(data)
        return (time.perf_counter() - started) / events * 1e6

    def check_alone(check: Any) -> float:
        _, data, _ = parse_published(body, 1 << 20)
        started = time.perf_counter()
        for _ in range(events):
            check(data)
        return (time.perf_counter() - started) / events * 1e6

    def parse_only(_: Any) -> None:
        return None

    runs: dict[str, list[float]] = {"parse_only": [], "jsonschema_rs": [], "fastjsonschema": [],
                                    "check_alone_jsonschema_rs": [],
                                    "check_alone_fastjsonschema": []}
    for _ in range(rounds):
        for name, check in (("parse_only", parse_only), ("jsonschema_rs", rs_check),
                            ("fastjsonschema", fast_check)):
            runs[name].append(round(timed(check), 2))
        for name, check in (("jsonschema_rs", rs_check), ("fastjsonschema", fast_check)):
            runs[f"check_alone_{name}"].append(round(check_alone(check), 3))
    return {"us_per_event": runs,
            "median_us": {name: statistics.median(values) for name, values in runs.items()}}


def ingest(rounds: int, phase_s: int, concurrency: int, work: Path) -> dict[str, Any]:
    """Flat-out ingest, catalogue off (A) and on (B), alternated (module doc)."""
    db = str(work / "bench.db")
    asyncio.run(with_store(db, _add_paused_destination))
    env = bench_env(work)
    phases: list[dict[str, Any]] = []
    with service_process(db, work, env, workers=1, synchronous="FULL") as (port, procs):
        for round_no in range(rounds):
            for label, validate in (("A", False), ("B", True)):
                asyncio.run(with_store(db, _catalogue_on if validate else _catalogue_off))
                time.sleep(REFRESH_WAIT_S)
                probe = _probe(port, f"probe-{label}{round_no}")
                if probe != (400 if validate else 202):  # the phase measures what it says
                    raise RuntimeError(f"phase {label}: an invalid event got {probe}")
                events_before = _events(db)
                cpu_before = {slot: proc_cpu_s(pid) for slot, pid in procs.items()}
                load = _wrk(port, phase_s, concurrency, f"{label}{round_no}-"
                            f"{os.urandom(3).hex()}")
                cpu_s = {slot: proc_cpu_s(pid) - cpu_before[slot] for slot, pid in procs.items()}
                time.sleep(0.5)  # requests wrk left open at its end still commit
                accepted = _events(db) - events_before
                ingest_cpu = sum(v for slot, v in cpu_s.items() if slot.startswith("ingest"))
                phases.append({"phase": label, "round": round_no,
                               "events_per_s": load["events_per_s"], "accepted": accepted,
                               "ingest_cpu_us_per_event": round(ingest_cpu / accepted * 1e6, 1)
                               if accepted else None,
                               "non_2xx": load["non_2xx"], "latency_ms": load["latency_ms"]})
    a = [p["events_per_s"] for p in phases if p["phase"] == "A"]
    b = [p["events_per_s"] for p in phases if p["phase"] == "B"]
    marked = query(db, "SELECT COUNT(*) FROM events WHERE schema_problem IS NOT NULL")[0][0]
    ratio = round(statistics.median(b) / statistics.median(a), 3)
    # Paired: each B against the A just before it (the same minute of a shared machine).
    paired = [round(y / x, 3) for x, y in zip(a, b, strict=True)]
    cpu_a = [p["ingest_cpu_us_per_event"] for p in phases
             if p["phase"] == "A" and p["ingest_cpu_us_per_event"] is not None] or [0.0]
    cpu_b = [p["ingest_cpu_us_per_event"] for p in phases
             if p["phase"] == "B" and p["ingest_cpu_us_per_event"] is not None] or [0.0]
    return {"phases": phases, "median_events_per_s": {"A_no_validation": statistics.median(a),
                                                      "B_validation": statistics.median(b)},
            "ratio_B_to_A": ratio, "paired_ratios": paired,
            "median_paired_ratio": statistics.median(paired),
            "median_ingest_cpu_us_per_event": {"A": statistics.median(cpu_a),
                                               "B": statistics.median(cpu_b)},
            "within_10_percent": ratio >= 0.9,
            "non_2xx_total": sum(p["non_2xx"] for p in phases),
            "events_marked": marked}


def _wrk(port: int, phase_s: int, concurrency: int, run_id: str) -> dict[str, Any]:
    import subprocess  # noqa: PLC0415

    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(_LUA % {"run": run_id, "data": bench_data_lua(), "type": EVENT_TYPE,
                         "token": INGEST_TOKEN})
        script = fh.name
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{concurrency}", f"-d{phase_s}s", "--latency", "-s", script,
             f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True,
            timeout=phase_s + 60).stdout
    finally:
        Path(script).unlink()
    return wrk.parse_report(out)


def _events(db: str) -> int:
    return int(query(db, "SELECT COUNT(*) FROM events")[0][0])


def _probe(port: int, event_id: str) -> int:
    """The status an event whose `data` breaks the bench schema gets (400 while validating)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/events", method="POST",
        data=json.dumps({"id": event_id, "type": EVENT_TYPE, "data": {"f0": 1}}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {INGEST_TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310  (http://127.0.0.1 built here)
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


async def _add_paused_destination(store: Store) -> None:
    await store.add_destination(name="sink", url="http://127.0.0.1:9/hook",
                                secret=generate_secret(), event_types=[EVENT_TYPE],
                                max_in_flight=64)
    await store.set_paused("sink", True, reason="bench: ingest only")


async def _catalogue_on(store: Store) -> None:
    await store.put_event_types([event_type_fields(EVENT_TYPE, {
        "schemas": {"1": bench_schema()}, "validation": "reject"})])


async def _catalogue_off(store: Store) -> None:
    if await store.list_event_types():
        await store.remove_event_type(EVENT_TYPE)


def main(argv: list[str] | None = None) -> int:
    """Run both measurements; print and write the figures."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.bench_catalogue")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--phase-s", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    if not wrk.available():
        print("the ingest measurement needs wrk (Debian package wrk)", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"engines": engines(args.rounds)}
    with tempfile.TemporaryDirectory(prefix="hookline-catalogue-bench-") as work:
        result["ingest"] = ingest(args.rounds, args.phase_s, args.concurrency, Path(work))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "catalogue-bench.json").write_text(json.dumps(result, indent=2) + "\n")
    ingest_figures = result["ingest"]
    print(json.dumps({"engines_median_us": result["engines"]["median_us"],
                      "ingest": ingest_figures["median_events_per_s"],
                      "ratio_B_to_A": ingest_figures["ratio_B_to_A"],
                      "paired_ratios": ingest_figures["paired_ratios"],
                      "median_paired_ratio": ingest_figures["median_paired_ratio"],
                      "ingest_cpu_us_per_event": ingest_figures[
                          "median_ingest_cpu_us_per_event"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`hookline bench --scenario everyday`: what an event and a delivery cost at steady rates,
against the same run's flat-out figures (issue #33, target 1).

Each round runs `hookline bench` (rehearsal/bench.py), each run on a fresh database and
service:
* once flat out: destinations paused, then delivery from the backlog; loaded by wrk when
  installed, for about `events` at 15,000/s and at least 3 s, as a plain flat-out
  `hookline bench` is, else by the Python generator with exactly `events`;
* once at each steady rate: `rate_per_s x phase_s` events from the Python generator,
  delivering while they arrive;
* then the same steady workload at TARGET_RATE_PER_S through hookline and through Huey
  (`hookline bench --compare`'s systems, rehearsal/compare/; hookline on SQLite there,
  whatever the backend).

Per run:
* ingest CPU per accepted event (ms): the ingest processes' CPU over the run / events;
* workers' CPU per delivery (ms): every worker process's CPU / deliveries;
* service cores: (supervisor + ingest + workers, and a bench PostgreSQL server's) CPU
  seconds, from the load's start to the last delivery, over the seconds the load lasted
  (steady rates only; the drain after the load is a few milliseconds at these rates);
* accept-to-delivered p50 and p99 (ms), from the jobs table (to `finished_at`, when the
  destination's answer arrived), accept-to-recorded p99 (to the worker's write), and
  sent-to-delivered p99 (from the load generator's POST: with the request's wait for its
  batch's transaction, which accept-to-delivered leaves out; rehearsal/bench_latency.py).

Each steady figure is divided by the flat-out figure of its own round; the result holds every
round and the median of each figure and ratio.

Each round also measures the floor (rehearsal/everyday_floor.py): a bare aiohttp server and a
bare aiohttp client, flat out and at each rate. Two figures per rate come of it:
* the bare framework's own ratio, its CPU per request at the rate over its flat-out one: what
  arriving one request at a time costs any code on this machine (the process sleeps between
  requests and each wake-up finds the caches cold);
* the bare HTTP alone at the rate over hookline's whole flat-out cost: the server's CPU per
  request over ingest's per event, the client's over the workers' per delivery, and the
  cores the two take at the rate (one server request and 3 client requests per event).

Each event must arrive as an HTTP request and each delivery leave as one, and hookline serves
and sends them with aiohttp. So where the HTTP alone at a rate already costs more than a
target allows (more than COST_RATIO_LIMIT times hookline's flat-out cost; at
TARGET_RATE_PER_S, SERVICE_CORES_LIMIT cores or more), that target is out of reach of any
design built on aiohttp on this machine, whatever its storage, that is no slower flat out than
hookline (a ratio to a larger flat-out cost is smaller): `out_of_reach` says which.
`reach` adds hookline's own work beside the HTTP (its books), at its flat-out cost per item
(rehearsal/everyday_reach.py): each target's bound, and which ones that misses.

Each round also runs the least durable service (rehearsal/everyday_floor.py, durable_floor:
an ingest floor and a delivery floor on one SQLite file, at least once and nothing else),
flat out and at each rate, under the same loads. `durable_reach` bounds each target with its
measured cost at the rate instead of hookline's flat-out books (rehearsal/everyday_reach.py).

Targets (checks): ingest and workers at most COST_RATIO_LIMIT times their flat-out cost at
every rate; at TARGET_RATE_PER_S, the service under SERVICE_CORES_LIMIT of a core with its p99
at most P99_LIMIT_MS, and Huey's CPU per delivery at least HUEY_CPU_RATIO times hookline's in
the compare run.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from hookline.rehearsal.bench import BenchOptions, bench_env, run_bench, workers_cpu_per_1000
from hookline.rehearsal.compare import systems
from hookline.rehearsal.compare.run import CompareOptions, run_compare
from hookline.rehearsal.compare.systems import CompareError
from hookline.rehearsal.everyday_floor import (
    durable_floor,
    flat_out_floor,
    floor_cores,
    floor_ratios,
    ratio,
    steady_floor,
)
from hookline.rehearsal.everyday_reach import durable_reach, out_of_reach_beyond, reach
from hookline.rehearsal.scenario_common import ScenarioOptions

COST_RATIO_LIMIT = 1.5  # CPU per event (ingest) or per delivery (workers), steady / flat out
SERVICE_CORES_LIMIT = 0.3  # the whole service at TARGET_RATE_PER_S events/s x 3 destinations
P99_LIMIT_MS = 22.0  # accept-to-delivered at TARGET_RATE_PER_S: no worse than measured before
TARGET_RATE_PER_S = 200.0  # events/s of the service-cores, p99 and Huey targets
HUEY_CPU_RATIO = 4.0  # Huey's CPU per delivery / hookline's, at least
IDLE_S = 0.5  # each run's idle measurement (not a figure of this scenario)


def run_everyday(opts: ScenarioOptions) -> dict[str, Any]:
    """opts.rounds rounds of a flat-out run, a run at each of opts.steady_rates and a Huey
    comparison at TARGET_RATE_PER_S (see the module doc); returns the figures and checks.

    Raises:
        TimeoutError: a run's jobs were not delivered in time (rehearsal/bench.py).
    """
    rounds: list[dict[str, Any]] = []
    for n in range(opts.rounds):
        folder = opts.out_dir / "everyday" / f"round-{n + 1}"
        flat_opts = _bench_options(opts, folder / "flat-out", None)
        flat = _run_figures(run_bench(flat_opts), steady=False)
        floor_env = bench_env(folder / "floor")
        flat["floor"] = flat_out_floor(flat_opts, floor_env)
        flat["durable"] = durable_floor(flat_opts, floor_env, None)
        steady: dict[str, dict[str, Any]] = {}
        for rate in opts.steady_rates:
            rate_opts = _bench_options(opts, folder / f"rate-{rate:g}", rate)
            figures = _run_figures(run_bench(rate_opts), steady=True)
            figures["vs_flat_out"] = {
                "ingest_cpu": ratio(figures["ingest_cpu_ms_per_event"],
                                     flat["ingest_cpu_ms_per_event"]),
                "workers_cpu": ratio(figures["workers_cpu_ms_per_delivery"],
                                      flat["workers_cpu_ms_per_delivery"])}
            floor = steady_floor(rate_opts, floor_env, rate)
            figures["floor"] = {
                **floor, "vs_flat_out": floor_ratios(floor, flat["floor"]),
                # The bare HTTP alone at the rate against hookline's whole flat-out cost.
                "vs_hookline_flat_out": {
                    "server": ratio(floor["server_cpu_ms_per_request"],
                                     flat["ingest_cpu_ms_per_event"]),
                    "client": ratio(floor["client_cpu_ms_per_request"],
                                     flat["workers_cpu_ms_per_delivery"])},
                "service_cores": floor_cores(floor, rate)}
            durable = durable_floor(rate_opts, floor_env, rate)
            figures["durable"] = {**durable, "vs_flat_out": {
                side: ratio(durable[key], flat["durable"][key]) for side, key in (
                    ("ingest", "ingest_cpu_ms_per_event"),
                    ("deliverer", "deliverer_cpu_ms_per_delivery"))}}
            steady[f"{rate:g}"] = figures
        rounds.append({"flat_out": flat, "steady": steady,
                       "huey": _huey(opts, folder / "huey")})
    medians = _medians(rounds, opts.steady_rates)
    result = {"rounds": rounds, "medians": medians, "targets": {
        "cost_ratio_at_most": COST_RATIO_LIMIT, "service_cores_below": SERVICE_CORES_LIMIT,
        "p99_ms_at_most": P99_LIMIT_MS, "at_rate": TARGET_RATE_PER_S,
        "huey_cpu_ratio_at_least": HUEY_CPU_RATIO},
        "checks": (checks := _checks(medians)), "pass": all(checks.values()),
        "out_of_reach": _out_of_reach(medians)}
    result["reach"] = reach(result)  # with bookkeeping at hookline's flat-out cost
    result["durable_reach"] = durable_reach(result)  # the least durable service, measured
    return result


def _bench_options(opts: ScenarioOptions, out_dir: Path, rate: float | None) -> BenchOptions:
    """One run of the round: flat out (`rate` None) or at `rate` events/s for opts.phase_s."""
    events = opts.events if rate is None else max(1, round(rate * opts.phase_s))
    return BenchOptions(events=events, rate_per_s=rate, workers=opts.workers,
                        concurrency=opts.concurrency, body_bytes=opts.body_bytes,
                        synchronous=opts.synchronous, out_dir=out_dir, backend=opts.backend,
                        postgres_url=opts.postgres_url, idle_s=IDLE_S, use_wrk=opts.use_wrk,
                        ceilings=False)


def _run_figures(result: dict[str, Any], *, steady: bool) -> dict[str, Any]:
    """The figures of one bench `result` this scenario compares (see the module doc); the
    service's cores only for a `steady` run (flat out, delivery outlasts the load)."""
    accepted = int(result["ingest"]["accepted"])
    delivered = int(result["delivery"]["delivered"])
    per_1000 = result["cpu_s_per_1000_deliveries"]
    # Every measured process but the receiver: the supervisor, ingest, workers, a server.
    service_s = sum(float(cpu) for slot, cpu in per_1000.items()
                    if slot != "receiver") * delivered / 1000
    load_s = result["ingest"]["elapsed_s"] if steady else None  # the Python generator's
    return {
        "events": accepted, "deliveries": delivered,
        "events_per_s": result["ingest"]["events_per_s"],
        "ingest_cpu_ms_per_event": round(sum(
            float(cpu) for slot, cpu in per_1000.items() if slot.startswith("ingest"))
            * delivered / accepted, 3) if accepted else None,
        "workers_cpu_ms_per_delivery": workers_cpu_per_1000(result),
        "service_cores": round(service_s / float(load_s), 3) if load_s else None,
        "latency_ms": result["delivery"]["latency_ms"],
        # When the worker's write recorded each delivery (bench.json from before it: absent).
        "recorded_latency_ms": result["delivery"].get("recorded_latency_ms"),
        "sent_latency_ms": result["delivery"].get("sent_latency_ms"),
        "load_average_1m": result["machine"]["load_average_1m"],
        # What waking from a sleep cost the machine at this run (absent from older bench.json).
        "cold_read_us": result["machine"].get("cold_read_us")}


def _huey(opts: ScenarioOptions, out_dir: Path) -> dict[str, Any]:
    """hookline and Huey at TARGET_RATE_PER_S for opts.phase_s (the --compare systems, whose
    hookline runs on SQLite whatever opts.backend): each one's CPU s per 1,000 deliveries
    and Huey's over hookline's, None unless both delivered everything (an incomplete run's
    CPU per delivery is not comparable); `unavailable` names what is missing (the bench
    extra, or redis-server, which --compare checks for) or what failed."""
    try:
        systems.check_available()
        result = run_compare(CompareOptions(
            events=max(1, round(TARGET_RATE_PER_S * opts.phase_s)),
            rate_per_s=TARGET_RATE_PER_S, concurrency=opts.concurrency, workers=opts.workers,
            body_bytes=opts.body_bytes, synchronous=opts.synchronous, out_dir=out_dir,
            systems=("hookline", "huey")))
    except (CompareError, OSError) as exc:  # CompareUnavailable too; the rounds are kept
        return {"unavailable": str(exc)}
    ours, theirs = (result["systems"][name] for name in ("hookline", "huey"))
    complete = bool(ours["complete"] and theirs["complete"])
    return {"complete": complete,
            "hookline_cpu_s_per_1000_deliveries": ours["cpu_s_per_1000_deliveries"],
            "huey_cpu_s_per_1000_deliveries": theirs["cpu_s_per_1000_deliveries"],
            "huey_cpu_ratio": result["ratios"]["huey"]["cpu_s_per_1000_deliveries"]
            if complete else None}


def _median(values: list[float | None]) -> float | None:
    """The median of the values present, to 3 decimals; None when there are none."""
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def _medians(rounds: list[dict[str, Any]], rates: tuple[float, ...]) -> dict[str, Any]:
    """The median over the rounds of every figure the checks and the report use."""
    flat = [r["flat_out"] for r in rounds]
    out: dict[str, Any] = {"flat_out": {
        key: _median([f[key] for f in flat])
        for key in ("events_per_s", "ingest_cpu_ms_per_event", "workers_cpu_ms_per_delivery")},
        "steady": {}}
    out["flat_out"].update({f"durable_{key}": _median([(f.get("durable") or {}).get(key)
                                                       for f in flat])
                            for key in ("ingest_cpu_ms_per_event",
                                        "deliverer_cpu_ms_per_delivery")})
    for rate in rates:
        runs = [r["steady"][f"{rate:g}"] for r in rounds]
        out["steady"][f"{rate:g}"] = {
            **{key: _median([run[key] for run in runs]) for key in (
                "ingest_cpu_ms_per_event", "workers_cpu_ms_per_delivery", "service_cores")},
            **{f"{key}_vs_flat_out": _median([run["vs_flat_out"][key] for run in runs])
               for key in ("ingest_cpu", "workers_cpu")},
            **{f"latency_{p}_ms": _median([run["latency_ms"][p] for run in runs])
               for p in ("p50", "p99")},
            **{f"{kind}_latency_p99_ms": _median([(run.get(f"{kind}_latency_ms") or {})
                                                  .get("p99") for run in runs])
               for kind in ("recorded", "sent")},
            **{f"floor_{side}_vs_{against}": _median([run["floor"][f"vs_{against}"][side]
                                                      for run in runs])
               for side in ("server", "client")
               for against in ("flat_out", "hookline_flat_out")},
            "floor_service_cores": _median([run["floor"]["service_cores"] for run in runs]),
            **{f"durable_{key}": _median([(run.get("durable") or {}).get(key) for run in runs])
               for key in ("ingest_cpu_ms_per_event", "deliverer_cpu_ms_per_delivery", "cores")},
            **{f"durable_{side}_vs_flat_out": _median([
                ((run.get("durable") or {}).get("vs_flat_out") or {}).get(side) for run in runs])
               for side in ("ingest", "deliverer")}}
    out["huey_cpu_ratio"] = _median([r["huey"].get("huey_cpu_ratio") for r in rounds])
    probes = [run["cold_read_us"] for r in rounds for run in (r["flat_out"], *r["steady"].values())
              if run.get("cold_read_us")]
    if probes:  # the machine's cost of waking over every run of the rounds
        hot, cold = (_median([p[key] for p in probes]) for key in ("hot_us", "after_sleep_us"))
        out["cold_read_us"] = {
            "hot_us": hot, "after_sleep_us": cold,
            "ratio": round(cold / hot, 1) if hot and cold is not None else None,
            "sleep_ms": probes[0]["sleep_ms"], "runs": len(probes)}
    return out


def _checks(medians: dict[str, Any]) -> dict[str, bool]:
    """Each target of the module doc against the medians (a figure missing fails it)."""
    steady = medians["steady"]
    at_rate = steady.get(f"{TARGET_RATE_PER_S:g}", {})
    checks = {f"{key}_at_{rate}_within_{COST_RATIO_LIMIT}x_flat_out":
              figures[f"{key}_vs_flat_out"] is not None
              and figures[f"{key}_vs_flat_out"] <= COST_RATIO_LIMIT
              for rate, figures in steady.items() for key in ("ingest_cpu", "workers_cpu")}
    cores, p99, huey = (at_rate.get("service_cores"), at_rate.get("latency_p99_ms"),
                        medians["huey_cpu_ratio"])
    checks[f"service_below_{SERVICE_CORES_LIMIT}_cores"] = \
        cores is not None and cores < SERVICE_CORES_LIMIT
    checks[f"p99_at_most_{P99_LIMIT_MS:g}_ms"] = p99 is not None and p99 <= P99_LIMIT_MS
    checks[f"huey_cpu_per_delivery_at_least_{HUEY_CPU_RATIO:g}x"] = \
        huey is not None and huey >= HUEY_CPU_RATIO
    return checks


FLOOR_OF = {"ingest_cpu": "server", "workers_cpu": "client"}
"""Which bare process bounds each cost target: ingest's the server, the workers' the client."""


def _out_of_reach(medians: dict[str, Any]) -> dict[str, bool]:
    """For each cost target of _checks, and the service's cores at TARGET_RATE_PER_S: whether
    the bare HTTP alone at that rate (the median floor) already costs more than the target
    allows, so that no design serving and sending with aiohttp could meet it (module doc). A
    missing floor is not out of reach."""
    out = {f"{key}_at_{rate}_within_{COST_RATIO_LIMIT}x_flat_out":
           (floor := figures[f"floor_{side}_vs_hookline_flat_out"]) is not None
           and floor > COST_RATIO_LIMIT
           for rate, figures in medians["steady"].items() for key, side in FLOOR_OF.items()}
    cores = medians["steady"].get(f"{TARGET_RATE_PER_S:g}", {}).get("floor_service_cores")
    out[f"service_below_{SERVICE_CORES_LIMIT}_cores"] = \
        cores is not None and cores >= SERVICE_CORES_LIMIT
    return out


def print_everyday(result: dict[str, Any]) -> None:
    """The everyday scenario's lines of the summary (medians of the rounds)."""
    medians = result["medians"]
    flat = medians["flat_out"]
    print(f"flat out: {flat['events_per_s']} events/s; ingest CPU "
          f"{flat['ingest_cpu_ms_per_event']} ms/event, workers "
          f"{flat['workers_cpu_ms_per_delivery']} ms/delivery")
    for rate, figures in medians["steady"].items():
        print(f"{rate:>5} events/s: ingest {figures['ingest_cpu_ms_per_event']} ms/event "
              f"(x{figures['ingest_cpu_vs_flat_out']} flat out), workers "
              f"{figures['workers_cpu_ms_per_delivery']} ms/delivery "
              f"(x{figures['workers_cpu_vs_flat_out']}), service {figures['service_cores']} "
              f"cores, accept->delivered p50 {figures['latency_p50_ms']} ms, p99 "
              f"{figures['latency_p99_ms']} ms (recorded: p99 "
              f"{figures['recorded_latency_p99_ms']} ms; from the sender's POST: p99 "
              f"{figures['sent_latency_p99_ms']} ms)")
        print(f"{'':>5} bare aiohttp at {rate} events/s: server "
              f"x{figures['floor_server_vs_flat_out']} its own flat-out CPU per request, "
              f"x{figures['floor_server_vs_hookline_flat_out']} ingest's; client "
              f"x{figures['floor_client_vs_flat_out']} its own, "
              f"x{figures['floor_client_vs_hookline_flat_out']} the workers'; the two "
              f"{figures['floor_service_cores']} cores")
        print(f"{'':>5} least durable service at {rate} events/s: ingest floor "
              f"{figures.get('durable_ingest_cpu_ms_per_event')} ms/event "
              f"(x{figures.get('durable_ingest_vs_flat_out')} its flat out), delivery floor "
              f"{figures.get('durable_deliverer_cpu_ms_per_delivery')} ms/delivery "
              f"(x{figures.get('durable_deliverer_vs_flat_out')}); the two "
              f"{figures.get('durable_cores')} cores")
    unavailable = {r["huey"]["unavailable"] for r in result["rounds"] if "unavailable" in r["huey"]}
    beyond = sorted(name for name, out in result.get("out_of_reach", {}).items() if out)
    if beyond:
        print("out of reach of any design on aiohttp (the bare HTTP alone costs more than "
              f"the target allows): {', '.join(beyond)}")
    with_books = result.get("reach", {"least": {}, "out_of_reach": {}})
    if also := out_of_reach_beyond(with_books, set(beyond), result.get("checks", {})):
        least = with_books["least"]
        print("also out of reach with hookline's own work beside the HTTP at its flat-out "
              "cost per item (rehearsal/everyday_reach.py): "
              + ", ".join(f"{name} ({least[name]})" for name in also))
    measured = result.get("durable_reach", {"least": {}, "out_of_reach": {}})
    if beyond_durable := out_of_reach_beyond(measured, set(), result.get("checks", {})):
        print("out of reach of a design no cheaper at the rate than the least durable service "
              "(rehearsal/everyday_floor.py, measured): " + ", ".join(
                  f"{name} ({measured['least'][name]})" for name in beyond_durable))
    own_work = measured.get("with_own_work", {"least": {}, "out_of_reach": {}})
    if more := out_of_reach_beyond(own_work, set(beyond_durable), result.get("checks", {})):
        print("also out of reach with hookline's work beyond the least durable service at its "
              "flat-out cost per item: " + ", ".join(
                  f"{name} ({own_work['least'][name]})" for name in more))
    print(f"Huey at {TARGET_RATE_PER_S:g} events/s: CPU per delivery x{medians['huey_cpu_ratio']} "
          f"hookline's" + (f" ({'; '.join(sorted(unavailable))})" if unavailable else ""))

"""The sections of README's benchmark block made from other result files than bench.json:
`hookline bench --compare`'s compare.json and `hookline bench --scenario everyday`'s
scenario-everyday.json, each a sentence, a table and the command that produced it
(rehearsal/bench_table.py puts them in the block)."""

from __future__ import annotations

import shlex
from typing import Any

from hookline.rehearsal.everyday_reach import durable_reach, least_of, out_of_reach_beyond, reach
from hookline.rehearsal.machine_probe import cold_read_text
from hookline.shared.errors import HooklineError


class BenchTableError(HooklineError):
    """A result file or the README cannot make a table (unreadable, wrong kind of run, block
    markers missing, duplicated or out of order)."""


def format_figure(value: float) -> str:
    """`value` with thousands separators, to 3 significant digits below 100."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def compare_command(compare: dict[str, Any]) -> str | None:
    """The `hookline bench --compare` command line that produced `compare`, from its
    recorded options; None when they were not recorded."""
    opts = compare.get("options", {})
    if not {"events", "concurrency", "workers", "synchronous", "out_dir"} <= opts.keys():
        return None
    args = ["hookline", "bench", "--compare", "--events", opts["events"]]
    if opts.get("rate_per_s", "None") != "None":
        args += ["--rate", f"{float(opts['rate_per_s']):g}"]
    args += ["--workers", opts["workers"], "--concurrency", opts["concurrency"],
             "--synchronous", opts["synchronous"]]
    if "receiver" in opts:
        args += ["--compare-receiver", opts["receiver"]]
    return shlex.join([*args, "--out", opts["out_dir"]])


# compare.json figures the compare table shows: (path in a system's figures, heading).
COMPARE_FIGURES = (("events_per_s", "events/s accepted"),
                   ("deliveries_per_s", "deliveries/s"),
                   ("latency_ms.p50", "accept->delivered p50 ms"),
                   ("latency_ms.p99", "accept->delivered p99 ms"),
                   ("cpu_s_per_1000_deliveries", "CPU s per 1,000 deliveries"))


def compare_section(compare: dict[str, Any]) -> list[str]:
    """The markdown lines of `hookline bench --compare`'s compare.json: a sentence naming
    the file, its date and its options (the receiver among them), then a table with one row
    per system of `systems` (name -> figures), one column per COMPARE_FIGURES entry any
    system has, each value with its ratio to hookline's (system / hookline) when hookline is
    among them; a system whose `complete` is false is marked incomplete.

    Raises:
        BenchTableError: no `systems` in it.
    """
    systems = compare.get("systems")
    if not isinstance(systems, dict) or not systems:
        raise BenchTableError(f"{compare['_path']} has no `systems` to compare")

    def figure(figures: dict[str, Any], path: str) -> float | None:
        value: Any = figures
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return float(value) if isinstance(value, int | float) else None

    columns = [(path, head) for path, head in COMPARE_FIGURES
               if any(figure(f, path) is not None for f in systems.values())]
    base = systems.get("hookline", {})

    def cell(figures: dict[str, Any], path: str) -> str:
        value, ours = figure(figures, path), figure(base, path)
        if value is None:
            return "-"
        return format_figure(value) + (f" ({value / ours:.2f}x)" if ours else "")

    opts = compare.get("options", {})
    rate = opts.get("rate_per_s", "None")
    # A run from before the choice existed delivered to the receiver fixture.
    receiver = ("the lean receiver" if opts.get("receiver", "fixture") == "lean"
                else "the receiver fixture")
    how = (f"{opts['events']} events, "
           f"{'flat out' if rate == 'None' else f'{float(rate):g} events/s'}, "
           f"{opts['workers']} workers, delivered to {receiver}"
           ) if {"events", "workers"} <= opts.keys() else "options not recorded"
    lines = [f"The same workload through other queues (`{compare['_path']}` of "
             f"{compare['_date']}, {how}; in brackets, the ratio to hookline's figure):", "",
             "| system | " + " | ".join(head for _, head in columns) + " |",
             "| --- |" + " --- |" * len(columns)]
    for name, figures in systems.items():
        label = name if figures.get("complete", True) else f"{name} (incomplete)"
        lines.append(f"| {label} | " + " | ".join(cell(figures, p) for p, _ in columns) + " |")
    return lines


def everyday_command(everyday: dict[str, Any]) -> str | None:
    """The `hookline bench --scenario everyday` command line that produced `everyday`, from
    its recorded options; None when they were not recorded."""
    opts = everyday.get("options", {})
    if not {"steady_rates", "phase_s", "events", "rounds", "workers", "backend",
            "out_dir"} <= opts.keys():
        return None
    rates = ",".join(f"{float(r):g}" for r in opts["steady_rates"].strip("()").split(",")
                     if r.strip())
    return shlex.join(["hookline", "bench", "--scenario", "everyday", "--rates", rates,
                       "--phase-s", f"{float(opts['phase_s']):g}", "--events", opts["events"],
                       "--rounds", opts["rounds"], "--workers", opts["workers"],
                       "--backend", opts["backend"],
                       *(["--load", "python"] if opts.get("use_wrk") == "False" else []),
                       "--out", opts["out_dir"]])


def durable_sentence(measured: dict[str, Any], checks: dict[str, bool],
                     targets: dict[str, Any]) -> str:
    """What the least durable service puts out of reach (`measured`: durable_reach's), as
    the sentences that follow the everyday table's: how many checks not met it bounds out of
    reach, its cores at the target rate, Huey's most ratio to it, those of the rest bounded
    out of reach once hookline's work beyond it is added at its flat-out cost (with each
    bound), the checks not met bounded by neither, and where hookline's own figure beat it
    (no bound there). Empty when it bounds nothing."""
    least = measured["least"]
    if not least:
        return ""
    beyond = out_of_reach_beyond(measured, set(), checks)
    cores, huey = least_of(least, "service_below_"), least_of(least, "huey_cpu_per_delivery_")
    sentence = (" Measured on the least durable service (an ingest and a delivery process on "
                "one SQLite file that store each event with its jobs before the 202 and mark "
                "each delivery, nothing else: docs/benchmarks.md, \"Everyday rates: the least "
                f"durable service\"), {len(beyond)} of the checks not met are out of reach of "
                "any design that costs no less at the rate and is no slower flat out than "
                "hookline")
    if cores is not None:
        sentence += (f"; it takes {format_figure(cores)} cores at "
                     f"{targets.get('at_rate', 200):g} events/s")
    if huey is not None:
        sentence += f", and Huey's CPU per delivery is {format_figure(huey)}x its"
    sentence += "."
    rest = sorted(name for name, met in checks.items() if not met and name not in beyond)
    own_work = measured.get("with_own_work") or {"least": {}, "out_of_reach": {}}
    if more := [name for name in rest if own_work["out_of_reach"].get(name)]:
        sentence += (f" {len(more)} more {'is' if len(more) == 1 else 'are'} out of reach of "
                     "such a design if whatever it spends flat out beyond that service's "
                     "flat-out cost is no cheaper per item arriving one event at a time than "
                     "in batches: "
                     + ", ".join(f"{name} (the rounds' median bound "
                                 f"{format_figure(own_work['least'][name])}x)"
                                 for name in more) + ".")
    if rest := [name for name in rest if name not in more]:
        sentence += f" Not bounded out of reach: {', '.join(rest)}."
    if contradicted := measured.get("contradicted"):
        sentence += (f" hookline's own figure is below that service's for "
                     f"{', '.join(contradicted)}: no bound there.")
    if premise_fails := [name for name in own_work.get("contradicted", [])
                         if not checks.get(name, True)]:
        sentence += (f" hookline's own figure is below the bound with its cost above that "
                     f"service's for {', '.join(premise_fails)}: that premise fails there.")
    return sentence


def everyday_section(everyday: dict[str, Any]) -> list[str]:
    """The markdown lines of `hookline bench --scenario everyday`'s scenario-everyday.json:
    a sentence naming the file, its date, its rounds, its targets and what a read costs the
    machine after a sleep (rehearsal/machine_probe.py), a table of the medians (flat out,
    then each steady rate: CPU per event and per delivery with their multiples of flat out,
    the service's cores, accept->delivered p50 and p99 with sent->delivered p99 (from the
    load generator's POST), and the bare server's and client's CPU per request at the rate
    as multiples of ingest's and the workers' flat-out cost: "-" in a file from before they
    were measured; the least multiples of flat out a design could reach that keeps its books
    at hookline's flat-out cost, rehearsal/everyday_reach.py; the least durable service's
    cost at the rate over hookline's flat-out cost, durable_reach), the checks met, and how
    many of them the least durable service puts out of reach (durable_sentence); for a file
    from before it was measured, how many the bare HTTP alone puts out of reach and how many
    more that bookkeeping does.

    Raises:
        BenchTableError: not an everyday scenario's result.
    """
    medians = everyday.get("medians")
    if everyday.get("scenario") != "everyday" or not isinstance(medians, dict):
        raise BenchTableError(f"{everyday['_path']} is not the result of "
                              "`hookline bench --scenario everyday`")
    targets, checks = everyday.get("targets", {}), everyday.get("checks", {})

    def ms(value: float | None, times: float | None = None) -> str:
        if value is None:
            return "-"
        ratio = "" if times is None else f" ({format_figure(times)}x)"
        return f"{format_figure(value)} ms{ratio}"

    flat = medians["flat_out"]
    # The median over the rounds' runs; a file from before kept only the scenario's own probe.
    cold = cold_read_text({"cold_read_us": medians.get("cold_read_us")})
    when = f"the median of the rounds' {medians.get('cold_read_us', {}).get('runs')} runs"
    if cold is None:
        cold, when = cold_read_text(everyday.get("machine", {})), "measured at the scenario's end"
    lines = [f"Everyday rates (`{everyday['_path']}` of {everyday['_date']}, medians of "
             f"{len(everyday.get('rounds', []))} rounds; in brackets, the median of each "
             f"round's steady figure over its flat-out one; targets: at most "
             f"{targets.get('cost_ratio_at_most')}x flat out, and at "
             f"{targets.get('at_rate', 200):g} events/s the service under "
             f"{targets.get('service_cores_below')} of a core with p99 at most "
             f"{targets.get('p99_ms_at_most')} ms"
             + (f"; on this machine, {when}, {cold}" if cold else "")
             + "):", "",
             "| rate | ingest CPU per event | workers CPU per delivery | service cores "
             "| accept->delivered p50 / p99 | sent->delivered p99 "
             "| bare aiohttp server / client, x hookline's flat out "
             "| least with hookline's own work beside the HTTP, ingest / workers, x flat out "
             "| least durable service at the rate, ingest / delivery, x hookline's flat out |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
             f"| flat out | {ms(flat['ingest_cpu_ms_per_event'])} "
             f"| {ms(flat['workers_cpu_ms_per_delivery'])} | - | - | - | - | - | - |"]
    with_books = reach(everyday)  # arithmetic on the file's figures, by today's rule
    least = with_books["least"]
    measured = durable_reach(everyday)
    limit = float(targets.get("cost_ratio_at_most", 1.5))

    def times(value: float | None) -> str:
        return "-" if value is None else f"{format_figure(value)}x"

    for rate, figures in medians["steady"].items():
        cores = ("-" if figures["service_cores"] is None
                 else format_figure(figures["service_cores"]))
        ingest = ms(figures["ingest_cpu_ms_per_event"], figures["ingest_cpu_vs_flat_out"])
        workers = ms(figures["workers_cpu_ms_per_delivery"], figures["workers_cpu_vs_flat_out"])
        floor = (f"{times(figures.get('floor_server_vs_hookline_flat_out'))} / "
                 f"{times(figures.get('floor_client_vs_hookline_flat_out'))}")
        books, durable = (_ingest_and_workers(bounds, rate, limit)
                          for bounds in (least, measured["least"]))
        sent = figures.get("sent_latency_p99_ms")  # absent from files before it was measured
        lines.append(f"| {rate} events/s | {ingest} | {workers} | {cores} "
                     f"| {ms(figures['latency_p50_ms'])} / {ms(figures['latency_p99_ms'])} "
                     f"| {ms(sent)} | {floor} | {books} | {durable} |")
    huey = medians.get("huey_cpu_ratio")
    lines += ["", f"Huey's CPU per delivery at {targets.get('at_rate', 200):g} events/s: "
                  f"{'-' if huey is None else format_figure(huey)}x hookline's (target at least "
                  f"{targets.get('huey_cpu_ratio_at_least')}x). Checks met: "
                  f"{sum(bool(v) for v in checks.values())} of {len(checks)}."]
    if measured["least"]:  # measured on a whole durable service: it supersedes the rest
        lines[-1] += durable_sentence(measured, checks, targets)
        return lines
    # A check met is never counted out of reach (were it, the premise would be wrong).
    alone = {name for name, out in everyday.get("out_of_reach", {}).items()
             if out and not checks.get(name)}
    if alone:
        lines[-1] += (f" Out of reach of any design on aiohttp no slower flat out than hookline: "
                      f"{len(alone)} of them, where the bare HTTP alone costs more than the "
                      f"target allows (docs/benchmarks.md, \"Everyday rates: the floor\").")
    if also := out_of_reach_beyond(with_books, alone, checks):
        lines[-1] += (f" {len(also)} more where the bare HTTP plus hookline's own work beside it, "
                      f"at its flat-out cost per item, costs more than the target allows: out "
                      f"of reach unless that work cost less per event arriving alone than "
                      f"hookline's does in batches (docs/benchmarks.md, \"Everyday rates: what "
                      f"is in reach\"); with that work the service takes at least "
                      f"{times(least_of(least, 'service_below_')).rstrip('x')} cores, and "
                      f"Huey's CPU per delivery is at most "
                      f"{times(least_of(least, 'huey_cpu_per_delivery_'))} the service's.")
    return lines


def _ingest_and_workers(bounds: dict[str, float], rate: str, limit: float) -> str:
    """`bounds`' ingest and workers cost ratios at `rate`, "A x / B x" ("-" for a missing
    one)."""
    return " / ".join("-" if (value := bounds.get(f"{key}_at_{rate}_within_{limit}x_flat_out"))
                      is None else f"{format_figure(value)}x"
                      for key in ("ingest_cpu", "workers_cpu"))

"""The benchmark results table in README.md, generated from result files, never hand-edited.

`hookline bench-table` reads the bench.json of a flat-out run (ingest, deliveries/s, idle
cost, memory), the bench.json of a steady `--rate 1000` run (accept->delivered latency) and,
when given, the compare.json of `hookline bench --compare` and the scenario-everyday.json of
`hookline bench --scenario everyday`, and rewrites the block between
BEGIN and END in README.md: each measure, its result, its target and the ratio, the
machine, the date of each result file and the commands that produced them (the compare and
everyday sections are made in rehearsal/bench_sections.py). `make bench-readme` runs the
whole thing. The targets are TARGETS, here and nowhere else.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.rehearsal.bench_ceiling import CEILING_TARGET
from hookline.rehearsal.bench_sections import (
    BenchTableError,
    compare_command,
    compare_section,
    everyday_command,
    everyday_section,
    format_figure,
)
from hookline.rehearsal.machine_probe import cold_read_text

BEGIN = "<!-- bench-results:begin -->"
END = "<!-- bench-results:end -->"
MIB_TO_MB = 1.048576


class BenchRunRefused(BenchTableError):
    """A readable bench.json the README table must not be made from: its flat-out load did
    not come from wrk, or its steady events were not evenly paced, so its figures are not
    comparable to the README's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One of the project's performance targets: `limit` in `unit`, under `condition`
    (words); met when the result is at least `limit` (`higher_is_better`) or below it
    (otherwise)."""

    measure: str
    limit: float
    unit: str
    higher_is_better: bool
    condition: str = ""

    def text(self) -> str:
        """The target as the table shows it, e.g. `>= 15,000 events/s at 64 connections`."""
        bound = f"{'>=' if self.higher_is_better else '<'} {format_figure(self.limit)} {self.unit}"
        return f"{bound} {self.condition}".strip()

    def met(self, value: float) -> bool:
        """Whether `value` (in `unit`) meets the target."""
        return value >= self.limit if self.higher_is_better else value < self.limit


# The project's performance targets, in the order the table lists them. `idle_db_writes`
# counts 1 when the idle service wrote to the database: its target is none (< 1).
TARGETS = {
    "ingest_events_per_s": Target(measure="ingest, events/s accepted", limit=15_000,
                                  unit="events/s", higher_is_better=True,
                                  condition="at 64 connections"),
    "ingest_vs_bare_aiohttp": Target(measure="ingest, share of a bare aiohttp server's rate",
                                     limit=CEILING_TARGET, unit="of bare aiohttp",
                                     higher_is_better=True, condition="same load, same run"),
    "ingest_p99_ms": Target(measure="ingest latency p99", limit=20, unit="ms",
                            higher_is_better=False, condition="at 64 connections"),
    "deliveries_per_s": Target(measure="deliveries/s from a backlog", limit=5_000,
                               unit="deliveries/s", higher_is_better=True,
                               condition="with 2 workers"),
    "delivery_vs_bare_client": Target(measure="deliveries/s, share of bare aiohttp clients' "
                                              "rate", limit=0.5, unit="of bare clients",
                                      higher_is_better=True,
                                      condition="same concurrency, signing and receiver, same run"),
    "cpu_per_delivery_vs_bare_client": Target(measure="worker CPU per delivery, multiple of a "
                                                      "bare client's per request", limit=2.5,
                                              unit="x bare clients", higher_is_better=False,
                                              condition="same run"),
    "delivered_p50_ms": Target(measure="accept->delivered p50", limit=10, unit="ms",
                               higher_is_better=False, condition="at 1,000 events/s"),
    "delivered_p99_ms": Target(measure="accept->delivered p99", limit=50, unit="ms",
                               higher_is_better=False, condition="at 1,000 events/s"),
    "idle_cpu_percent": Target(measure="idle CPU, whole service", limit=1,
                               unit="% of one core", higher_is_better=False),
    "idle_db_writes": Target(measure="idle database writes", limit=1, unit="writes",
                             higher_is_better=False),
    "worker_rss_mb": Target(measure="worker peak RSS", limit=80, unit="MB",
                            higher_is_better=False),
}


def load_result(path: Path) -> dict[str, Any]:
    """A result file's figures, with `_path` (the path as given) and `_date` (the run's
    start from `started_at`, else the file's modification time, as `YYYY-MM-DD HH:MM UTC`).

    Raises:
        BenchTableError: the file is missing or not JSON.
    """
    try:
        result: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BenchTableError(f"cannot read result file {path}: {exc}") from exc
    started = result.get("started_at")
    when = float(started) if started is not None else path.stat().st_mtime
    result["_path"] = str(path)
    result["_date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))
    return result


def _bench_run(result: dict[str, Any], *, steady: bool) -> dict[str, Any]:
    """`result`, checked to be a bench.json of the kind asked (steady: run with --rate).

    Raises:
        BenchTableError: it is not a bench.json, or of the other kind.
        BenchRunRefused: a flat-out run whose load did not come from wrk, or a steady run
            whose events were not evenly paced.
    """
    if not {"options", "ingest", "delivery", "machine"} <= result.keys():
        raise BenchTableError(f"{result['_path']} is not a bench.json of `hookline bench`")
    is_steady = result["options"]["rate_per_s"] != "None"
    if is_steady != steady:
        kind = "a steady `--rate` run" if steady else "a flat-out run (no --rate)"
        raise BenchTableError(f"{result['_path']} should be {kind}")
    # The steady run is always paced by the Python generator; the flat-out figures must be
    # wrk's (the Python generator saturates a core well below ingest's rate).
    if not steady and result["ingest"].get("tool") != "wrk":
        how = result.get("load_generator", "python (no load_generator recorded)")
        raise BenchRunRefused(
            f"refusing {result['_path']}: its load generator was {how}, not wrk; rerun "
            f"`hookline bench` with wrk installed (`make test` installs it)")
    # The latency targets are for evenly paced events (a run from before --arrivals was).
    if steady and result["options"].get("arrivals", "even") != "even":
        raise BenchRunRefused(
            f"refusing {result['_path']}: its events came with --arrivals "
            f"{result['options']['arrivals']}; README's latency rows are for evenly paced "
            f"events (rerun without --arrivals)")
    return result


FLAT_MEASURES = ("ingest_events_per_s", "ingest_vs_bare_aiohttp", "ingest_p99_ms",
                 "deliveries_per_s", "delivery_vs_bare_client",
                 "cpu_per_delivery_vs_bare_client", "idle_cpu_percent", "idle_db_writes")
"""The TARGETS keys a flat-out run measures; the steady run measures the latency ones, and
worker RSS comes from every run."""
WORST_OF_RUNS = ("idle_db_writes", "worker_rss_mb")
"""Measures that take the worst of several runs, not their median: one idle write, or one
worker's peak memory, is the figure."""


def measures(flat: dict[str, Any], steady: dict[str, Any]) -> dict[str, float | None]:
    """Each TARGETS key's result, in the target's unit: ingest, deliveries/s, idle cost and
    memory and the share of the bare aiohttp ceiling (`ingest_vs_bare_aiohttp`, None in a
    run without that phase) and the workers against the bare clients
    (`delivery_vs_bare_client`, `cpu_per_delivery_vs_bare_client`, None likewise) from the
    flat-out run, accept->delivered latency from the steady run (worker RSS: the larger of
    the two runs'; measured in MiB, shown in MB). `idle_db_writes` is 1 when the idle
    service wrote to the database, else 0. None: the run has no such figure (e.g. nothing
    was delivered)."""
    rss_mib = max(mib for run in (flat, steady) for slot, mib in run["peak_rss_mb"].items()
                  if slot.startswith("worker"))
    return {
        "ingest_events_per_s": flat["ingest"]["events_per_s"],
        "ingest_vs_bare_aiohttp": flat.get("ingest_vs_bare_aiohttp", {}).get("ratio"),
        "ingest_p99_ms": flat["ingest"]["latency_ms"]["p99"],
        "deliveries_per_s": flat["delivery"]["deliveries_per_s"],
        "delivery_vs_bare_client": flat.get("delivery_vs_bare_client", {}).get("ratio"),
        "cpu_per_delivery_vs_bare_client":
            flat.get("cpu_per_delivery_vs_bare_client", {}).get("ratio"),
        "delivered_p50_ms": steady["delivery"]["latency_ms"]["p50"],
        "delivered_p99_ms": steady["delivery"]["latency_ms"]["p99"],
        "idle_cpu_percent": flat["idle"]["cpu_percent_of_one_core"],
        "idle_db_writes": 1.0 if flat["idle"]["database_written"] else 0.0,
        "worker_rss_mb": rss_mib * MIB_TO_MB,
    }


@dataclass(frozen=True, slots=True)
class Found:
    """One measure over several runs: the figure the table judges (the median run's, or the
    worst for WORST_OF_RUNS), how many runs it was taken from (`of`), the lowest and highest,
    and the flat-out and steady run the row describes (the median run's, or the worst's)."""

    value: float | None
    of: int
    low: float | None
    high: float | None
    flat: dict[str, Any]
    steady: dict[str, Any]


def found_over_runs(flats: list[dict[str, Any]],
                    steadies: list[dict[str, Any]]) -> dict[str, Found]:
    """Each TARGETS key over several flat-out and steady runs (the issue's targets are
    medians of 3, and this machine's speed moves from one run to the next): the median of
    the runs that have the figure (of an even count's two middle runs, the one less
    favourable to the target), or the worst for WORST_OF_RUNS. A flat-out measure comes
    from the flat-out runs, a latency from the steady ones."""
    found = {}
    for key in TARGETS:
        pairs = [(flat, steadies[0]) for flat in flats] if key in FLAT_MEASURES else \
            [(flats[0], steady) for steady in steadies]
        runs = len(pairs)
        if key == "worker_rss_mb":  # every run's workers, flat-out and steady
            pairs = [(flat, steadies[0]) for flat in flats] + \
                [(flats[0], steady) for steady in steadies]
            runs = len(flats) + len(steadies)
        valued = sorted(((value, pair) for pair in pairs
                         if (value := measures(*pair)[key]) is not None),
                        key=lambda item: item[0])
        if not valued:
            found[key] = Found(None, 0, None, None, *pairs[0])
            continue
        # Of an even count's two middle runs, the less favourable one for the target.
        middle = (len(valued) - 1) // 2 if TARGETS[key].higher_is_better else len(valued) // 2
        value, (flat, steady) = valued[-1] if key in WORST_OF_RUNS else valued[middle]
        of = runs if key in WORST_OF_RUNS else len(valued)
        found[key] = Found(value, of, valued[0][0], valued[-1][0], flat, steady)
    return found


def _conditions(flat: dict[str, Any], steady: dict[str, Any]) -> dict[str, str]:
    """How each measure was taken, for its row (the targets' own conditions are in
    TARGETS: compare the two)."""
    f_opts, s_opts = flat["options"], steady["options"]
    ingest = (f"flat out, {f_opts['concurrency']} connections, "
              f"load by {flat['ingest'].get('tool', 'python')}")
    latency = (f"{format_figure(float(s_opts['rate_per_s']))} events/s offered, "
               f"{format_figure(steady['ingest']['events_per_s'])} accepted, "
               f"{s_opts['workers']} workers")
    ceiling = flat.get("ceiling", {}).get("events_per_s")
    versus = "no ceiling in this run" if ceiling is None else \
        f"bare aiohttp {format_figure(float(ceiling))} events/s, {ingest}"
    sender = flat.get("sender_ceiling")
    clients = "no sender ceiling in this run" if sender is None else (
        f"{len(sender['clients'])} bare clients x {sender['concurrency']} in flight: "
        f"{format_figure(float(sender['requests_per_s']))} requests/s, "
        f"{sender['cpu_s_per_1000_requests']} CPU s per 1,000")
    return {"ingest_events_per_s": ingest, "ingest_p99_ms": ingest,
            "ingest_vs_bare_aiohttp": versus,
            "delivery_vs_bare_client": clients, "cpu_per_delivery_vs_bare_client": clients,
            "deliveries_per_s": f"{f_opts['workers']} workers",
            "delivered_p50_ms": latency, "delivered_p99_ms": latency,
            "idle_cpu_percent": f"over {float(f_opts['idle_s']):g} s",
            "idle_db_writes": f"over {float(f_opts['idle_s']):g} s",
            "worker_rss_mb": "VmHWM, largest worker, both runs"}


def _result_cell(key: str, value: float | None, target: Target) -> str:
    """A result as the table shows it: number and unit, `none`/`written` for database
    writes, `n/a` when the run has no such figure."""
    if value is None:
        return "n/a"
    if key == "idle_db_writes":
        return "written" if value else "none"
    return f"{format_figure(value)} {target.unit}"


def results_table(flats: list[dict[str, Any]], steadies: list[dict[str, Any]]) -> list[str]:
    """The markdown rows: measure (and how the median run took it), result (over several
    runs: the median, with the lowest and highest), target, result/target, whether it is
    met (judged on the median)."""
    lines = ["| measure | result | target | result / target | met |",
             "| --- | --- | --- | --- | --- |"]
    for key, found in found_over_runs(flats, steadies).items():
        target, value = TARGETS[key], found.value
        how = _conditions(found.flat, found.steady)[key]
        target_text = "none" if key == "idle_db_writes" else target.text()
        ratio = "n/a" if value is None or key == "idle_db_writes" else \
            f"{value / target.limit:.2f}"
        met = value is not None and target.met(value)
        cell = _result_cell(key, value, target)
        if found.of > 1 and key == "worker_rss_mb":
            cell += f" (the largest of {found.of} runs)"
        elif found.of > 1 and key not in WORST_OF_RUNS and found.low is not None \
                and found.high is not None:
            cell += (f" (median of {found.of} runs: {format_figure(found.low)} to "
                     f"{format_figure(found.high)})")
        lines.append(f"| {target.measure} ({how}) | {cell} "
                     f"| {target_text} | {ratio} | {'yes' if met else 'no'} |")
    return lines


def _setup(run: dict[str, Any]) -> str:
    """Cores, Python, backend and synchronous of one run (and the workers' own, when the
    run recorded it)."""
    workers = run["options"].get("worker_synchronous")
    return (f"{run['machine']['cores']} cores, Python {run['machine']['python']}, backend "
            f"{run['backend']['name']} ({run['backend']['database']}), "
            f"synchronous={run['options']['synchronous']}"
            + (f" (workers' commits {workers})" if workers else ""))


def machine_lines(flat: dict[str, Any], steady: dict[str, Any]) -> list[str]:
    """The machine and setup of both runs (one line when they match, else one each), with
    this disk's fsync p50 / p99 and the load average as each run measured them, and what a
    small read cost after a sleep (rehearsal/machine_probe.py) where the runs measured it."""
    def fsync(run: dict[str, Any]) -> str:
        text = f"{run['machine']['fsync_ms']['p50']} / {run['machine']['fsync_ms']['p99']} ms"
        load = run["machine"].get("load_average_1m")
        if load:  # how busy the machine was (1-minute load average before / after the run)
            text += f", load average {load['before']} / {load['after']}"
        return text

    colds = [(cold_read_text(run["machine"]), kind)
             for run, kind in ((flat, "flat-out run"), (steady, "steady run"))]
    wake = "; ".join(f"{text} ({kind})" for text, kind in colds if text)
    if _setup(flat) == _setup(steady):
        return [f"Machine: {_setup(flat)}; this disk's fsync p50 / p99 {fsync(flat)} "
                f"(flat-out run), {fsync(steady)} (steady run)"
                + (f"; {wake}" if wake else "") + "."]
    return [f"Flat-out run's machine: {_setup(flat)}; fsync p50 / p99 {fsync(flat)}"
            + (f"; {colds[0][0]}" if colds[0][0] else "") + ".",
            f"Steady run's machine: {_setup(steady)}; fsync p50 / p99 {fsync(steady)}"
            + (f"; {colds[1][0]}" if colds[1][0] else "") + "."]


def bench_command(run: dict[str, Any]) -> str:
    """The `hookline bench` command line that produced `run`, from its recorded options
    (a PostgreSQL URL's password shows as ***, as bench.json keeps it)."""
    opts = run["options"]
    args = ["hookline"]
    if opts.get("postgres_url", "None") != "None":
        args += ["--db", opts["postgres_url"]]
    args += ["bench", "--events", opts["events"]]
    if opts["rate_per_s"] != "None":
        args += ["--rate", f"{float(opts['rate_per_s']):g}"]  # evenly paced (_bench_run)
    args += ["--workers", opts["workers"],
             *(["--ingest-processes", opts["ingest_processes"]]
               if opts.get("ingest_processes", "1") != "1" else []),
             "--concurrency", opts["concurrency"], "--synchronous", opts["synchronous"],
             *(["--worker-synchronous", opts["worker_synchronous"]]
               if "worker_synchronous" in opts else []),
             "--backend", opts["backend"],
             "--load", "auto" if opts["use_wrk"] == "True" else "python",
             "--idle-s", f"{float(opts['idle_s']):g}", "--out", opts["out_dir"]]
    if run.get("destination_filter") is not None:  # the options keep only its repr
        args += ["--filter", json.dumps(run["destination_filter"], separators=(",", ":"))]
    return shlex.join(args)


def render_block(flat_paths: Path | Sequence[Path], steady_paths: Path | Sequence[Path],
                 compare_path: Path | None = None, readme: Path = Path("README.md"),
                 everyday_path: Path | None = None) -> str:
    """The whole generated block, BEGIN and END markers included, from the result files.

    Args:
        flat_paths: bench.json of one or more flat-out runs (`hookline bench`): each row
            shows their median (see :func:`found_over_runs`).
        steady_paths: bench.json of one or more steady runs (`hookline bench --rate 1000`).
        compare_path: compare.json of `hookline bench --compare`, or None to leave it out.
        readme: the README the block is for (named in the regenerate command).
        everyday_path: scenario-everyday.json of `hookline bench --scenario everyday`, or
            None to leave it out.

    Raises:
        BenchTableError: a result file is unreadable or of the wrong kind.
    """
    flat_paths, steady_paths = _paths(flat_paths), _paths(steady_paths)
    flats = [_bench_run(load_result(path), steady=False) for path in flat_paths]
    steadies = [_bench_run(load_result(path), steady=True) for path in steady_paths]
    table_args = ["hookline", "bench-table", "--flat", *map(str, flat_paths), "--steady",
                  *map(str, steady_paths)]
    lines = [BEGIN, "<!-- generated by `hookline bench-table` (`make bench-readme`) from the "
                    "result files named below: regenerate it, do not edit it -->", ""]
    lines += results_table(flats, steadies)
    lines += ["", "Ratios are result / target: at least 1 meets a throughput target, below 1 "
                  "a latency, CPU or memory one."]
    if len(flats) > 1 or len(steadies) > 1:
        lines += [f"Each result is the median of the {_runs(len(flats), 'flat-out')} (the "
                  f"latency rows: of the {_runs(len(steadies), 'steady')}), lowest to highest "
                  f"in brackets, and each row's conditions are its median run's; worker RSS "
                  f"is the largest of all runs, and idle database writes count when any run "
                  f"wrote."]
    lines += [""]
    commands = [bench_command(run) for pair in zip(flats, steadies, strict=False)
                for run in pair]
    commands += [bench_command(run) for run in [*flats[len(steadies):],
                                                *steadies[len(flats):]]]
    if compare_path is not None:
        compare = load_result(compare_path)
        lines += [*compare_section(compare), ""]
        commands += [command] if (command := compare_command(compare)) else []
        table_args += ["--compare", str(compare_path)]
    if everyday_path is not None:
        everyday = load_result(everyday_path)
        lines += [*everyday_section(everyday), ""]
        commands += [command] if (command := everyday_command(everyday)) else []
        table_args += ["--everyday", str(everyday_path)]
    lines += machine_lines(flats[0], steadies[0])
    flat_dates = ", ".join(run["_date"] for run in flats)
    steady_dates = ", ".join(run["_date"] for run in steadies)
    lines += ["", f"Produced by these commands (flat-out run{'s' if len(flats) > 1 else ''} "
                  f"of {flat_dates}, steady run{'s' if len(steadies) > 1 else ''} of "
                  f"{steady_dates}):", "", "```sh",
              *commands, shlex.join([*table_args, "--readme", str(readme)]), "```", END]
    return "\n".join(lines)


def _runs(count: int, kind: str) -> str:
    """`3 flat-out runs`, `1 steady run`."""
    return f"{count} {kind} run{'s' if count != 1 else ''}"


def _paths(paths: Path | Sequence[Path]) -> list[Path]:
    """One path or several, as a list (at least one)."""
    listed = [paths] if isinstance(paths, Path) else list(paths)
    if not listed:
        raise BenchTableError("no result file given")
    return listed


def replace_block(text: str, block: str) -> str:
    """`text` with everything from BEGIN to END (markers included) replaced by `block`;
    the text outside is kept byte for byte.

    Raises:
        BenchTableError: BEGIN or END is missing, appears more than once, or END comes
            before BEGIN.
    """
    counts = {marker: text.count(marker) for marker in (BEGIN, END)}
    if counts != {BEGIN: 1, END: 1}:
        raise BenchTableError(f"the README needs {BEGIN} and {END} once each, in that order "
                              f"(found {counts[BEGIN]} and {counts[END]})")
    start, end = text.index(BEGIN), text.index(END)
    if end < start:
        raise BenchTableError(f"{END} comes before {BEGIN} in the README")
    return text[:start] + block + text[end + len(END):]


def update_readme(readme: Path, flat_path: Path | Sequence[Path],
                  steady_path: Path | Sequence[Path], compare_path: Path | None = None,
                  everyday_path: Path | None = None) -> None:
    """Rewrite the results block of `readme` from the result files (see render_block).

    Raises:
        BenchTableError: the README cannot be read or lacks the block, or a result file
            cannot make a table.
    """
    try:
        text = readme.read_text()
    except OSError as exc:
        raise BenchTableError(f"cannot read {readme}: {exc}") from exc
    new = replace_block(text, render_block(flat_path, steady_path, compare_path, readme,
                                           everyday_path))
    readme.write_text(new)

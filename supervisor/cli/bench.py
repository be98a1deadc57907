"""`hookline bench`: measure the real service on this machine (see rehearsal/bench.py)."""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from pathlib import Path
from typing import Any

from hookline.shared.config import Config
from hookline.shared.errors import InvalidSetting
from hookline.shared.policy.filters import check_filter
from hookline.supervisor.cli.common import fail


def register(sub: Any) -> None:
    """Add `hookline bench` to the CLI."""
    bench = sub.add_parser("bench", help="drill: throughput, latency and cost on this machine "
                                         "(--compare: against Celery, Huey)")
    bench.add_argument("--events", type=int, default=20_000)
    bench.add_argument("--rate", type=float, help="events/s to offer (default: flat out)")
    bench.add_argument("--arrivals", choices=["even", "poisson"], default="even",
                       help="with --rate: the events 1/rate apart (even) or at random, "
                            "independent times, the rate on average, as the events of many "
                            "independent senders arrive (poisson)")
    bench.add_argument("--workers", type=int, default=2)
    bench.add_argument("--ingest-processes", type=int, default=1,
                       help="ingest processes of the service, sharing its port")
    bench.add_argument("--ingest-writer", choices=["thread", "process"], default="thread",
                       help="where ingest's commits run (the ingest_writer setting; SQLite)")
    bench.add_argument("--concurrency", type=int, default=64)
    bench.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL",
                       help="SQLite synchronous mode of ingest's commits")
    bench.add_argument("--worker-synchronous", choices=["FULL", "NORMAL"], default="NORMAL",
                       help="SQLite synchronous mode of the workers' commits "
                            "(worker_synchronous)")
    bench.add_argument("--backend", choices=["sqlite", "postgres"],
                       help="sqlite (a fresh file) or postgres: a fresh database "
                            "`hookline_bench` on the server of `hookline --db "
                            "postgresql://...` (recreated; needs CREATEDB), else on a "
                            "throwaway server started for the run (PostgreSQL server "
                            "binaries needed). Default: postgres when --db is a "
                            "postgresql:// URL, else sqlite")
    bench.add_argument("--load", choices=["auto", "python"], default="auto",
                       help="flat-out load from wrk when installed (auto: it runs for a "
                            "duration, about --events at 15,000/s, at least 3 s) or from the "
                            "Python generator (exactly --events)")
    bench.add_argument("--idle-s", type=float, default=5.0,
                       help="seconds of the idle measurement (CPU, database writes)")
    bench.add_argument("--out", default="results/bench")
    bench.add_argument("--compare", action="store_true",
                       help="the same workload through hookline, Celery (Redis broker) and "
                            "Huey (SQLite) in one run, and the ratios; writes compare.json "
                            "(needs the `bench` extra and redis-server; see docs/benchmarks.md)")
    bench.add_argument("--compare-receiver", choices=["lean", "fixture"], default="lean",
                       help="--compare: the receiver every system delivers to: lean "
                            "(rehearsal/fast_receiver.py, little CPU) or fixture "
                            "(rehearsal/receiver.py, records every request)")
    bench.add_argument("--filter", dest="destination_filter", metavar="JSON",
                       help="a payload filter (JSON) every bench destination gets, to measure "
                            "what filters cost ingest (docs/benchmarks.md)")
    scenario = bench.add_argument_group(
        "scenarios (memory and recovery targets; rehearsal/bench_scenarios.py): --scenario writes "
        "scenario-NAME.json to --out")
    scenario.add_argument("--scenario",
                          choices=["backlog", "outage", "fairness", "destinations", "tenants",
                                   "everyday", "ingest"],
                          help="backlog: claims and worker memory with a big backlog of "
                               "pending jobs; outage: one destination down under steady load, "
                               "the others' latency; fairness: tenant b's latency alone and "
                               "while tenant a has a backlog and hanging endpoints; "
                               "destinations: ingest and /metrics with 10, 1,000 and 10,000 "
                               "destinations; tenants: ingest with 10,000 tenants x 3 "
                               "destinations against one tenant, and the claim latency; "
                               "everyday: CPU per event and per delivery at steady rates "
                               "against flat out (--events), the service's cores and p99 "
                               "at 200 events/s, and Huey's CPU per delivery there; ingest: "
                               "ingest's events/s against the bare aiohttp server and the "
                               "least durable ingest, with 1 and 2 HTTP processes")
    scenario.add_argument("--backlog-jobs", type=int,
                          help="backlog: pending jobs written before the service starts "
                               "(default 1,000,000); fairness: tenant a's backlog (default "
                               "100,000)")
    scenario.add_argument("--phase-s", type=float,
                          help="fairness: seconds tenant b publishes, alone then with a "
                               "(default 20); destinations, tenants, ingest: seconds of each "
                               "ingest measurement (default 8); everyday: seconds of each "
                               "steady run (default 20)")
    scenario.add_argument("--destinations", default="10,1000,10000",
                          help="destinations: the sizes measured, comma-separated")
    scenario.add_argument("--rates", default="50,200,500",
                          help="everyday: the steady rates (events/s), comma-separated")
    scenario.add_argument("--tenants", type=int, default=10_000,
                          help="tenants: how many tenants (3 destinations each)")
    scenario.add_argument("--rounds", type=int, default=3,
                          help="destinations, tenants, ingest: measurements of each size or "
                               "design, alternated; everyday: rounds of every run (medians "
                               "reported; default 3, --quick 1)")
    scenario.add_argument("--quick", action="store_true",
                          help="fairness, destinations, tenants, everyday, ingest: small "
                               "sizes, for tests (a 2,000-job backlog, 4 s phases; 10 and 100 "
                               "destinations; 20 tenants; 2 s of ingest; 1,000 events flat "
                               "out and 2 s at 200 events/s)")
    scenario.add_argument("--deliver-s", type=float, default=30.0,
                          help="backlog: seconds of delivery while worker RSS is sampled")
    scenario.add_argument("--baseline-s", type=float, default=60.0,
                          help="outage: seconds of load before the outage")
    scenario.add_argument("--outage-s", type=float, default=600.0,
                          help="outage: seconds destination d3 is down")
    scenario.add_argument("--outage-kind", choices=["503", "hang"], default="503",
                          help="outage: d3 answers 503 at once, or never answers (each "
                               "attempt ends at attempt_timeout_s)")
    scenario.add_argument("--drain-rate", type=float,
                          help="outage: the operator paces d3's drain at this many jobs/s "
                               "(its rate_limit_per_s, set at recovery, cleared once drained)")
    bench.set_defaults(handler=bench_command)


def bench_command(config: Config, args: argparse.Namespace) -> int:
    """Run the benchmark and print the figures; bench.json goes to --out.

    SIGTERM stops it as Ctrl-C does, by KeyboardInterrupt: the processes it started (the
    service, receivers, load generators, bare servers) are stopped on the way out. Without
    this, SIGTERM ended the bench at once and left them running. Exit 130 then."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _bench(config, args)
    except KeyboardInterrupt:
        return fail("bench interrupted; the processes it started were stopped", 130)


def _bench(config: Config, args: argparse.Namespace) -> int:
    """The bench itself: a plain run, `--compare` or `--scenario`."""
    from hookline.rehearsal.bench import BenchOptions, print_report, run_bench  # noqa: PLC0415  (the benchmark loads only when it runs)
    from hookline.rehearsal.pgserver import PgStartError, PgUnavailable  # noqa: PLC0415  (the benchmark loads only when it runs)

    if args.events < 1 or args.workers < 1 or args.ingest_processes < 1 or not args.idle_s > 0:
        return fail("--events, --workers and --ingest-processes must be at least 1, --idle-s "
                    "above 0", 2)
    if args.rate is not None and not args.rate > 0:
        return fail("--rate must be above 0 (leave it out for a flat-out run)", 2)
    if args.arrivals != "even" and (not args.rate or args.compare or args.scenario):
        return fail("--arrivals poisson applies to a plain `hookline bench` run with --rate",
                    2)
    if (args.ingest_processes != 1 or args.ingest_writer != "thread") and (
            args.compare or args.scenario):
        return fail("--ingest-processes and --ingest-writer apply to a plain `hookline "
                    "bench` run, not to --compare or --scenario", 2)
    if args.compare:
        from hookline.supervisor.cli.bench_compare import compare_command  # noqa: PLC0415  (loads the comparison only when asked for)

        return compare_command(config, args)
    if args.scenario:
        return _scenario_command(config, args)
    from hookline.rehearsal.scenario_common import chosen_database  # noqa: PLC0415  (the rehearsal loads only when it runs)

    database = chosen_database(args.backend, config.db)
    if args.ingest_writer != "thread" and database.backend != "sqlite":
        return fail("--ingest-writer process applies to SQLite (on PostgreSQL each ingest "
                    "process writes itself)", 2)
    try:
        destination_filter = check_filter(json.loads(args.destination_filter)
                                          if args.destination_filter else None)
    except (ValueError, InvalidSetting) as exc:
        return fail(f"--filter: {exc}", 2)
    try:
        result = run_bench(database.applied_to(BenchOptions(
            events=args.events, rate_per_s=args.rate, workers=args.workers,
            ingest_processes=args.ingest_processes, ingest_writer=args.ingest_writer,
            concurrency=args.concurrency, synchronous=args.synchronous,
            worker_synchronous=args.worker_synchronous, out_dir=Path(args.out),
            idle_s=args.idle_s, use_wrk=args.load == "auto",
            destination_filter=destination_filter, arrivals=args.arrivals)))
    except (PgUnavailable, PgStartError) as exc:
        print(f"hookline: cannot start a PostgreSQL server for the benchmark: {exc}",
              file=sys.stderr)
        return 1
    print_report(result)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: unwind, stopping every child on the way out."""
    raise KeyboardInterrupt


def _scenario_command(config: Config, args: argparse.Namespace) -> int:
    """`hookline bench --scenario NAME`: run it, print the summary (PASS or FAIL last)."""
    from hookline.rehearsal.bench_scenarios import (  # noqa: PLC0415  (the benchmark loads only when it runs)
        ScenarioOptions,
        print_scenario,
        run_scenario,
    )
    from hookline.rehearsal.pgserver import PgStartError, PgUnavailable  # noqa: PLC0415  (the benchmark loads only when it runs)

    sizes = _scenario_sizes(args)
    if isinstance(sizes, str):
        print(f"hookline: {sizes}", file=sys.stderr)
        return 2
    from hookline.rehearsal.scenario_common import chosen_database  # noqa: PLC0415  (the rehearsal loads only when it runs)

    database = chosen_database(args.backend, config.db)
    try:
        result = run_scenario(database.applied_to(ScenarioOptions(
            scenario=args.scenario, out_dir=Path(args.out), workers=args.workers,
            synchronous=args.synchronous, deliver_s=args.deliver_s,
            concurrency=args.concurrency, baseline_s=args.baseline_s, outage_s=args.outage_s,
            outage_kind=args.outage_kind, drain_rate_per_s=args.drain_rate,
            use_wrk=args.load == "auto", **sizes)), config)
    except ValueError as exc:
        print(f"hookline: {exc}", file=sys.stderr)
        return 2
    except (PgUnavailable, PgStartError) as exc:
        print(f"hookline: cannot start a PostgreSQL server for the benchmark: {exc}",
              file=sys.stderr)
        return 1
    print_scenario(result)
    return 0


def _scenario_sizes(args: argparse.Namespace) -> dict[str, Any] | str:
    """The sizes of a scenario run from the flags, the scenario's defaults and --quick, or
    what is wrong with them."""
    quick = args.quick
    fairness = args.scenario == "fairness"
    default_jobs = (2_000 if quick else 100_000) if fairness else 1_000_000
    default_phase_s = (4.0 if quick else 20.0) if fairness else (2.0 if quick else 8.0)
    if args.scenario == "everyday":
        default_phase_s = 2.0 if quick else 20.0
    try:
        counts = tuple(int(n) for n in args.destinations.split(","))
    except ValueError:
        return f"--destinations must be comma-separated counts, not {args.destinations!r}"
    try:
        rates = tuple(float(r) for r in args.rates.split(","))
    except ValueError:
        return f"--rates must be comma-separated events/s, not {args.rates!r}"
    sizes: dict[str, Any] = {
        "backlog_jobs": args.backlog_jobs or default_jobs,
        "phase_s": args.phase_s or default_phase_s,
        "rate_per_s": args.rate or (20.0 if quick else 100.0) if fairness
        else args.rate or 300.0,
        "destination_counts": (10, 100) if quick else counts,
        "tenants": 20 if quick else args.tenants,
        "rounds": 1 if quick else args.rounds,
        "events": 1_000 if quick else args.events,
        "steady_rates": (200.0,) if quick else rates}
    if (sizes["backlog_jobs"] < 1 or not (args.deliver_s > 0 and args.outage_s > 0
                                         and args.baseline_s > 0 and sizes["phase_s"] > 0)):
        return ("--backlog-jobs must be at least 1; --deliver-s, --baseline-s, --outage-s "
                "and --phase-s above 0")
    if min(sizes["destination_counts"]) < 1 or sizes["tenants"] < 1 or sizes["rounds"] < 1:
        return "--destinations, --tenants and --rounds must be at least 1"
    rates = sizes["steady_rates"]
    if not all(0 < rate < math.inf for rate in rates) or len(set(rates)) < len(rates):
        return "--rates must be distinct events/s, each above 0"
    return sizes

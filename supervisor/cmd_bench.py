"""`hookline bench`: measure the real service on this machine (see rehearsal/bench.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from shared.config import Config


def register(sub: Any) -> None:
    """Add `hookline bench` to the CLI."""
    bench = sub.add_parser("bench", help="throughput, latency and cost on this machine")
    bench.add_argument("--events", type=int, default=20_000)
    bench.add_argument("--rate", type=float, help="events/s to offer (default: flat out)")
    bench.add_argument("--workers", type=int, default=2)
    bench.add_argument("--concurrency", type=int, default=64)
    bench.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    bench.add_argument("--out", default="results/bench")
    bench.set_defaults(handler=bench_command)


def bench_command(config: Config, args: argparse.Namespace) -> int:
    """Run the benchmark and print the figures; bench.json goes to --out."""
    from rehearsal.bench import BenchOptions, print_report, run_bench  # noqa: PLC0415

    if args.events < 1 or args.workers < 1:
        print("hookline: --events and --workers must be at least 1")
        return 2
    result = run_bench(BenchOptions(events=args.events, rate_per_s=args.rate,
                                    workers=args.workers, concurrency=args.concurrency,
                                    synchronous=args.synchronous, out_dir=Path(args.out)))
    print_report(result)
    return 0

"""The drills, listed last in `hookline --help`: `hookline rehearse` (crash and recovery
scenarios on real processes), `hookline demo` (the end-to-end demo on GitHub's payload
examples) and `hookline receiver` (the receiver fixture). They run code of rehearsal/, which
needs the `bench` extra; `bench` and `bench-table` are in bench.py and bench_table.py."""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared.config import Config
from hookline.supervisor.cli.common import fail


def register(sub: Any) -> None:
    """Add `hookline rehearse`, `hookline demo` and `hookline receiver` to the CLI."""
    p = sub.add_parser("rehearse", help="drill: run the crash/recovery rehearsal and write a "
                                        "report")
    p.add_argument("--out", default="results/rehearsal")
    p.add_argument("--quick", action="store_true", help="the fast subset (part of make test)")
    p.add_argument("--only", action="append", help="run only this scenario (repeatable)")
    p.set_defaults(handler=rehearse_command)

    demo = sub.add_parser("demo", help="drill: run the end-to-end demo on real GitHub payloads")
    demo.add_argument("--out", default="results", help="folder for the result files")
    demo.add_argument("--workers", type=int, default=3)
    demo.add_argument("--data", metavar="DIR",
                      help="folder of the GitHub payload examples (default: the source "
                           "checkout's rehearsal/data/github/, which an installed hookline "
                           "lacks)")
    demo.set_defaults(handler=demo_command)

    sub.add_parser("receiver", help="drill: run the receiver fixture (see `hookline receiver "
                                    "-h`)", add_help=False)


def rehearse_command(config: Config, args: argparse.Namespace) -> int:
    """Run the rehearsal; exit 0 when every scenario passed. `--db postgresql://…` runs
    every drill on a fresh database on that server (SQLite files otherwise)."""
    from hookline.rehearsal.rehearse import run  # noqa: PLC0415  (the rehearsal loads only when it runs)

    return run(out_dir=args.out, quick=args.quick, only=args.only, db=config.db)


def demo_command(config: Config, args: argparse.Namespace) -> int:
    """Run the demo in its own fresh database under --out; exit 2 when the payload examples
    are not found (an installed hookline without --data)."""
    from hookline.rehearsal.demo import run as run_demo  # noqa: PLC0415  (the rehearsal loads only for `hookline demo`)
    from hookline.rehearsal.github_samples import DemoDataMissing  # noqa: PLC0415  (as above)

    try:
        return run_demo(out_dir=args.out, workers=args.workers, data=args.data)
    except DemoDataMissing as exc:
        return fail(f"demo: {exc}", 2)

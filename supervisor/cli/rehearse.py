"""`hookline rehearse`: crash and recovery scenarios on real processes (rehearsal/)."""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared.config import Config


def register(sub: Any) -> None:
    """Add `hookline rehearse` to the CLI."""
    p = sub.add_parser("rehearse", help="run the crash/recovery rehearsal and write a report")
    p.add_argument("--out", default="results/rehearsal")
    p.add_argument("--quick", action="store_true", help="the fast subset (part of make test)")
    p.add_argument("--only", action="append", help="run only this scenario (repeatable)")
    p.set_defaults(handler=rehearse_command)


def rehearse_command(config: Config, args: argparse.Namespace) -> int:
    """Run the rehearsal; exit 0 when every scenario passed. `--db postgresql://…` runs
    every drill on a fresh database on that server (SQLite files otherwise)."""
    from hookline.rehearsal.rehearse import run  # noqa: PLC0415  (the rehearsal loads only when it runs)

    return run(out_dir=args.out, quick=args.quick, only=args.only, db=config.db)

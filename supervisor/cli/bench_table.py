"""`hookline bench-table`: rewrite README.md's benchmark results block from result files
(see rehearsal/bench_table.py; `make bench-readme` runs the benchmarks and then this)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hookline.shared.config import Config


def register(sub: Any) -> None:
    """Add `hookline bench-table` to the CLI."""
    table = sub.add_parser(
        "bench-table", help="drill: rewrite README.md's benchmark results table from "
                            "result files")
    table.add_argument("--flat", required=True, type=Path, nargs="+",
                       help="bench.json of one or more flat-out runs (`hookline bench`): "
                            "the table shows their median")
    table.add_argument("--steady", required=True, type=Path, nargs="+",
                       help="bench.json of one or more steady runs (`hookline bench --rate "
                            "1000`): the table shows their median")
    table.add_argument("--compare", type=Path,
                       help="compare.json of `hookline bench --compare` (optional)")
    table.add_argument("--everyday", type=Path,
                       help="scenario-everyday.json of `hookline bench --scenario everyday` "
                            "(optional)")
    table.add_argument("--readme", type=Path, default=Path("README.md"),
                       help="the file whose block between <!-- bench-results:begin --> and "
                            "<!-- bench-results:end --> is rewritten (default README.md)")
    table.set_defaults(handler=bench_table_command)


def bench_table_command(config: Config, args: argparse.Namespace) -> int:
    """Rewrite the block; 2 with a message when a run is refused (its flat-out load was not
    wrk's), 1 when a file or the block is missing or wrong."""
    from hookline.rehearsal.bench_sections import BenchTableError  # noqa: PLC0415  (the rehearsal loads only when it runs)
    from hookline.rehearsal.bench_table import (  # noqa: PLC0415  (the rehearsal loads only when it runs)
        BenchRunRefused,
        update_readme,
    )

    try:
        update_readme(args.readme, args.flat, args.steady, args.compare, args.everyday)
    except BenchRunRefused as exc:
        print(f"hookline bench-table: {exc}", file=sys.stderr)
        return 2
    except BenchTableError as exc:
        print(f"hookline bench-table: {exc}", file=sys.stderr)
        return 1
    print(f"{args.readme}: benchmark results table rewritten")
    return 0

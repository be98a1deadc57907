"""`hookline maintenance recount-metrics`: the repair path of the figures /metrics reads.

The store keeps jobs by status, attempts in flight, each destination's oldest pending job and
events stored in the same transactions that change the rows (OPERATIONS.md, "Metrics and
alerts"); this command counts them again from the rows, in one write transaction, and says
which ones differed. It talks to the store directly, so it works with the service running
(its scrapes then show the corrected figures) or stopped. Exit codes: 0 done (also when
nothing needed correcting), 1 the store failed, 2 usage (bad flags, a missing database file).
"""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared.config import Config
from hookline.shared.logs import get_logger
from hookline.shared.report_models import GaugeCorrection
from hookline.shared.views import gauge_corrections_view
from hookline.supervisor.cli.common import (
    async_command,
    operator,
    print_json,
    print_table,
    with_store,
)
from hookline.supervisor.cli.human import iso_time, number


def register(sub: Any) -> None:
    """Add the `maintenance` group (`recount-metrics`) to the CLI."""
    group = sub.group("maintenance", help="repair jobs an operator runs by hand")
    recount = group.add_parser(
        "recount-metrics", help="count the /metrics gauges again from the stored rows",
        description="Count the gauges /metrics and `hookline stats` read (jobs by status, "
                    "attempts in flight, each destination's oldest pending job, events "
                    "stored) again from the stored rows and print those that differed. "
                    "Finished attempts and deliveries are counters that include what "
                    "retention purged; they are kept.")
    recount.add_argument("--json", action="store_true",
                         help="print the corrections as JSON")
    recount.set_defaults(handler=async_command(recount_metrics))


async def recount_metrics(config: Config, args: argparse.Namespace) -> int:
    """Run the repair path and print what it corrected."""
    corrections = await with_store(config, lambda store: store.recount_metrics())
    get_logger().info("metrics_recounted", corrected=len(corrections), **operator())
    if args.json:
        print_json(gauge_corrections_view(corrections))
        return 0
    if not corrections:
        print("recounted the metric gauges: every one matched the stored rows")
        return 0
    print(f"recounted the metric gauges: corrected {len(corrections)}")
    print_table([_row(c) for c in corrections],
                ["family", "destination", "label", "before", "after"])
    return 0


def _row(correction: GaugeCorrection) -> dict[str, Any]:
    """One correction as table cells: `oldest` values are instants, the others counts."""
    def spell(value: float | None) -> str | None:
        if value is None:
            return None
        return iso_time(value) if correction.family == "oldest" else number(value)

    return {"family": correction.family,
            "destination": correction.destination or "(all)", "label": correction.label,
            "before": spell(correction.before), "after": spell(correction.after)}

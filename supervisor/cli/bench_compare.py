"""`hookline bench --compare`: hookline, Celery and Huey on one workload (rehearsal/compare)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hookline.shared.config import Config


def compare_command(config: Config, args: argparse.Namespace) -> int:
    """Run the comparison and print a table per system and the ratios; compare.json goes to
    --out. Uses --events, --concurrency (load connections), --rate, --workers, --synchronous,
    --compare-receiver and the config's `worker_concurrency` (in-flight requests per worker
    process, for every system). Returns 2 with a message naming the install command when the
    bench extra or redis-server is missing (nothing ran), 1 when a system could not start or
    did not deliver everything.
    """
    from hookline.rehearsal.compare.run import CompareOptions, print_compare, run_compare  # noqa: PLC0415  (the bench extra loads only when it runs)
    from hookline.rehearsal.compare.systems import CompareError, CompareUnavailable  # noqa: PLC0415  (the bench extra loads only when it runs)
    from hookline.rehearsal.scenario_common import chosen_database  # noqa: PLC0415  (the rehearsal loads only when it runs)

    # Asked for a server, or configured with one: either way not a run on SQLite.
    if (chosen_database(args.backend, config.db).on_server
            or chosen_database(None, config.db).on_server):
        print("hookline: --compare runs hookline on SQLite only", file=sys.stderr)
        return 2
    opts = CompareOptions(
        events=args.events, concurrency=args.concurrency, rate_per_s=args.rate,
        workers=args.workers, worker_concurrency=config.worker_concurrency,
        synchronous=args.synchronous, out_dir=Path(args.out), receiver=args.compare_receiver)
    try:
        result = run_compare(opts, progress=lambda text: print(text, flush=True))
    except CompareUnavailable as exc:
        print(f"hookline: bench --compare cannot run: {exc}", file=sys.stderr)
        return 2
    except CompareError as exc:
        print(f"hookline: bench --compare failed: {exc}", file=sys.stderr)
        return 1
    print_compare(result)
    if not all(fig["complete"] for fig in result["systems"].values()):
        print("hookline: a system did not deliver every event in time (INCOMPLETE above)",
              file=sys.stderr)
        return 1
    return 0

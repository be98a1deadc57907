"""`hookline serve`, `hookline config show`, `hookline demo`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from shared.config import Config
from supervisor.cli.common import print_record, run_command


def register(sub: Any) -> None:
    """Add the service commands to the CLI."""
    docs = Config.docs()
    serve = sub.add_parser("serve", help="run ingest and the workers (the service)")
    serve.add_argument("--workers", type=int, help=docs["workers"])
    serve.add_argument("--listen", help=docs["listen"])
    serve.add_argument("--check", action="store_true",
                       help="validate configuration and database access (including PRAGMA "
                            "quick_check), exit 0 ok, 1 failed, 2 refused")
    serve.set_defaults(handler=serve_command)

    cfg = sub.group("config", help="the effective configuration")
    show = cfg.add_parser("show", help="print every setting (secrets redacted)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=config_show)

    demo = sub.add_parser("demo", help="run the end-to-end demo on real GitHub payloads")
    demo.add_argument("--out", default="results", help="folder for the result files")
    demo.add_argument("--workers", type=int, default=3)
    demo.set_defaults(handler=demo_command)

    sub.add_parser("receiver", help="run the receiver fixture (see `hookline receiver -h`)",
                   add_help=False)


def config_show(config: Config, args: argparse.Namespace) -> int:
    """`hookline config show [--json]`: every effective setting, secrets as `***`; the JSON
    keeps each setting's own type (seconds as numbers)."""
    settings = config.redacted()
    if args.json:
        print(json.dumps(settings, indent=2))
    else:
        print_record(settings)
    return 0


def serve_command(config: Config, args: argparse.Namespace) -> int:
    """Run the service, or with --check only probe the configuration and database."""
    from supervisor import serve  # noqa: PLC0415  (keeps `hookline jobs` light)

    if args.check:
        async def probe() -> int:
            await serve.check(config)
            return 0

        code = run_command(probe)
        print("ok" if code == 0 else "check failed", file=sys.stderr)
        return code
    return serve.run(config)


def demo_command(config: Config, args: argparse.Namespace) -> int:
    """Run the demo in its own fresh database under --out."""
    from rehearsal.demo import run as run_demo  # noqa: PLC0415

    return run_demo(out_dir=args.out, workers=args.workers)

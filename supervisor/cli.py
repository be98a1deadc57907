"""The `hookline` command line: parse arguments, build one frozen Config, call a typed run().

Settings come from flags > `HOOKLINE_*` environment > `--config FILE` (TOML) > defaults;
this is the only module that reads the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from shared.config import Config
from shared.errors import ConfigError
from supervisor import commands

_GLOBAL_FLAGS = ("db", "log_level")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also documents every HOOKLINE_* variable in --help)."""
    docs = Config.docs()
    env_help = "\n".join(f"  HOOKLINE_{k.upper():<22} {v}" for k, v in docs.items())
    parser = argparse.ArgumentParser(
        prog="hookline", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Durable webhook delivery: accept events, deliver each one signed, "
                    "at least once (receivers dedupe by webhook-id).",
        epilog="environment (a flag wins over its variable, which wins over the config "
               f"file):\n{env_help}")
    _add_global_flags(parser, docs, argparse.SUPPRESS)
    common = argparse.ArgumentParser(add_help=False)
    _add_global_flags(common, docs, argparse.SUPPRESS)
    sub = _SubParsers(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"),
                      common)

    serve = sub.add_parser("serve", help="run ingest and the workers (the service)")
    serve.add_argument("--workers", type=int, help=docs["workers"])
    serve.add_argument("--listen", help=docs["listen"])
    serve.add_argument("--check", action="store_true",
                       help="validate configuration and database access, exit 0 or 1")

    dest = sub.add_parser("destinations", help="manage destinations (endpoints)")
    dsub = _SubParsers(dest.add_subparsers(dest="action", required=True, metavar="ACTION"),
                       common)
    add = dsub.add_parser("add", help="register a destination")
    add.add_argument("name")
    add.add_argument("url")
    add.add_argument("--secret", help="whsec_ secret; generated and printed once if omitted")
    add.add_argument("--event-type", action="append",
                     help="subscribe to a type, `prefix.*` or `*` (repeatable; default `*`)")
    add.add_argument("--max-in-flight", type=int, default=10,
                     help="most concurrent requests to it across all workers (default 10)")
    add.add_argument("--json", action="store_true")
    lst = dsub.add_parser("list", help="list destinations (secrets hidden)")
    lst.add_argument("--json", action="store_true")

    jobs = sub.add_parser("jobs", help="list jobs, newest first")
    jobs.add_argument("--status", choices=["pending", "running", "done", "dead"])
    jobs.add_argument("--limit", type=int, default=50)
    jobs.add_argument("--json", action="store_true")

    stats = sub.add_parser("stats", help="counts by status, events, attempts")
    stats.add_argument("--json", action="store_true")

    cfg = sub.add_parser("config", help="show the effective configuration")
    cfg.add_argument("action", choices=["show"])

    demo = sub.add_parser("demo", help="run the end-to-end demo on real GitHub payloads")
    demo.add_argument("--out", default="results", help="folder for the result files")
    demo.add_argument("--workers", type=int, default=3)

    sub.add_parser("receiver", help="run the receiver fixture (see `hookline receiver -h`)",
                   add_help=False)
    return parser


def _add_global_flags(parser: argparse.ArgumentParser, docs: dict[str, str],
                      default: object) -> None:
    """--db, --config, --log-level: accepted before or after the command name."""
    parser.add_argument("--db", default=default, help=docs["db"] + " [HOOKLINE_DB]")
    parser.add_argument("--config", default=default,
                        help="TOML config file [HOOKLINE_CONFIG]")
    parser.add_argument("--log-level", default=default,
                        choices=["debug", "info", "warning", "error"])


class _SubParsers:
    """Adds every sub-command with the global flags as a parent parser."""

    def __init__(self, action: Any, common: argparse.ArgumentParser) -> None:
        self._action = action
        self._common = common

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        parents = [] if kwargs.get("add_help") is False else [self._common]
        return self._action.add_parser(name, parents=parents, **kwargs)  # type: ignore[no-any-return]


def load_config(args: argparse.Namespace, env: dict[str, str]) -> Config:
    """Merge flags, environment and config file into one Config."""
    flags = {name: getattr(args, name, None) for name in (*_GLOBAL_FLAGS, "workers", "listen")}
    return Config.load(flags=flags, env=env,
                       file=getattr(args, "config", None) or env.get("HOOKLINE_CONFIG"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hookline` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["receiver"]:
        from rehearsal.receiver import main as receiver_main  # noqa: PLC0415

        return receiver_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args, dict(os.environ))
    except ConfigError as exc:
        return commands.fail(f"configuration: {exc}", 2)
    return dispatch(args, config)


def dispatch(args: argparse.Namespace, config: Config) -> int:
    """Run the chosen command."""
    if args.command == "serve":
        from supervisor import serve  # noqa: PLC0415

        if args.check:
            code = commands.run_command(lambda: _check(config))
            print("ok" if code == 0 else "check failed", file=sys.stderr)
            return code
        return serve.run(config)
    if args.command == "destinations":
        fn = {"add": commands.destinations_add, "list": commands.destinations_list}[args.action]
        return commands.run_command(lambda: fn(config, args))
    if args.command == "jobs":
        return commands.run_command(lambda: commands.jobs(config, args))
    if args.command == "stats":
        return commands.run_command(lambda: commands.stats(config, args))
    if args.command == "config":
        print(json.dumps(config.redacted(), indent=2))
        return 0
    if args.command == "demo":
        from rehearsal.demo import run as run_demo  # noqa: PLC0415

        return run_demo(out_dir=args.out, workers=args.workers)
    raise AssertionError(f"unhandled command {args.command}")


async def _check(config: Config) -> int:
    from supervisor import serve  # noqa: PLC0415

    await serve.check(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `hookline` command line: parse arguments, build one frozen Config, call a typed run().

Settings come from flags > `HOOKLINE_*` environment > `--config FILE` (TOML) > defaults;
this is the only module that reads the environment. Each command group lives in its own
module of this package with a `register(sub)` function; COMMAND_MODULES lists them.
Every command handler is `handler(config, args) -> exit code` (0 ok, 1 failed at run time,
2 usage or validation; see supervisor/cli/common.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from hookline.shared.config import CONFIG_FILE_ENV, Config, unknown_env_warnings
from hookline.shared.errors import ConfigError
from hookline.shared.logs import configure_logging
from hookline.shared.version import VERSION
from hookline.supervisor.cli.common import fail

# In `hookline --help`'s order: what operators use first, the drills (rehearse, demo,
# receiver, bench) last.
COMMAND_MODULES = (
    "hookline.supervisor.cli.service",
    "hookline.supervisor.cli.send",
    "hookline.supervisor.cli.destinations",
    "hookline.supervisor.cli.tenants",
    "hookline.supervisor.cli.event_types",
    "hookline.supervisor.cli.events",
    "hookline.supervisor.cli.controls",
    "hookline.supervisor.cli.sources",
    "hookline.supervisor.cli.logs",
    "hookline.supervisor.cli.backup",
    "hookline.supervisor.cli.maintenance",
    "hookline.supervisor.cli.migrate_store",
    "hookline.supervisor.cli.rehearse",
    "hookline.supervisor.cli.bench",
    "hookline.supervisor.cli.bench_table",
)
_OWN_PACKAGE = "hookline"
_CONFIG_FLAGS = ("db", "log_level", "workers", "ingest_processes", "listen")


class SubParsers:
    """Adds sub-commands that accept the global flags (--db, --config, --log-level) too."""

    def __init__(self, action: Any, common: argparse.ArgumentParser) -> None:
        self._action = action
        self.common = common

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Like argparse's add_parser, with the global flags inherited."""
        parents = [] if kwargs.get("add_help") is False else [self.common]
        return self._action.add_parser(name, parents=parents, **kwargs)  # type: ignore[no-any-return]

    def group(self, name: str, **kwargs: Any) -> SubParsers:
        """A command with actions of its own (`hookline destinations add ...`)."""
        parser = self.add_parser(name, **kwargs)
        action = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        return SubParsers(action, self.common)


def _add_global_flags(parser: argparse.ArgumentParser, docs: dict[str, str]) -> None:
    """--db, --config, --log-level: accepted before or after the command name."""
    parser.add_argument("--db", default=argparse.SUPPRESS, help=docs["db"] + " [HOOKLINE_DB]")
    parser.add_argument("--config", default=argparse.SUPPRESS,
                        help="TOML config file [HOOKLINE_CONFIG]")
    parser.add_argument("--log-level", default=argparse.SUPPRESS,
                        choices=["debug", "info", "warning", "error"])


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
    parser.add_argument("--version", action="version", version=f"hookline {VERSION}")
    _add_global_flags(parser, docs)
    common = argparse.ArgumentParser(add_help=False)
    _add_global_flags(common, docs)
    sub = SubParsers(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"),
                     common)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def load_config(args: argparse.Namespace, env: dict[str, str]) -> Config:
    """Merge flags, environment and config file into one Config; warn on stderr, once, about
    each `HOOKLINE_*` variable that is not a known name (a mistyped setting)."""
    for warning in unknown_env_warnings(env):
        print(f"hookline: warning: {warning}", file=sys.stderr)
    flags = {name: getattr(args, name, None) for name in _CONFIG_FLAGS}
    return Config.load(flags=flags, env=env,
                       file=getattr(args, "config", None) or env.get(CONFIG_FILE_ENV))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hookline` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    receiver_at = _receiver_position(argv)
    try:
        if receiver_at is not None:  # its own parser: `hookline receiver -h`
            from hookline.rehearsal.receiver import main as receiver_main  # noqa: PLC0415  (the rehearsal loads only for `hookline receiver`)

            return receiver_main(argv[receiver_at + 1:])
        args = build_parser().parse_args(argv)
        try:
            config = load_config(args, dict(os.environ))
        except ConfigError as exc:
            return fail(f"configuration: {exc}", 2)
        # Log lines (an operator action's audit line among them) go to stderr and the
        # service's log file, so stdout carries only the answer (`--json` stays parseable);
        # `serve` and the commands that run processes route their own.
        configure_logging("cli", config.log_level, stream=_log_stream(),
                          log_file=config.log_file)
        return int(args.handler(config, args))
    except BrokenPipeError:  # `hookline ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] == _OWN_PACKAGE:
            raise  # a broken install of hookline itself: the traceback is the report
        # demo, receiver, rehearse and bench use packages the runtime-only install lacks.
        return fail(f"this command needs the Python package {exc.name!r}, which is not "
                    "installed: the drills (demo, receiver, rehearse, bench) need hookline's "
                    "bench extra (pip install 'hookline[bench]', or `make venv` in a "
                    "checkout)", 2)


def _receiver_position(argv: list[str]) -> int | None:
    """Index of a `receiver` command preceded only by global flags and their values."""
    i = 0
    while i < len(argv) and argv[i] in ("--db", "--config", "--log-level"):
        i += 2
    return i if i < len(argv) and argv[i] == "receiver" else None


def _log_stream() -> Any:
    """Where the CLI's own log lines go: stderr as JSON lines, or as the readable lines of
    `hookline logs` when stderr is a terminal (the log file always gets JSON)."""
    if not sys.stderr.isatty():
        return sys.stderr
    from hookline.supervisor.logview import HumanLines  # noqa: PLC0415  (only for a terminal)

    return HumanLines(sys.stderr, colour="NO_COLOR" not in os.environ)

"""`python -m hookline.rehearsal.hooked_serve --crash-event-type TYPE [FLAGS] serve [...]`:
`hookline serve` whose workers crash on one event type, for the rehearsal's poison job.

The command line after `--crash-event-type TYPE` is `hookline`'s own (parsed by its parser,
settings merged by its loader); the only difference from `hookline serve` is the module each
worker child runs: rehearsal/hooked_worker.py, the production worker with a crashing wrapper
around its Sender. The production CLI, supervisor and worker carry no crash hook.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from hookline.rehearsal.hooked_worker import CRASH_EVENT_TYPE_ENV
from hookline.shared.errors import ConfigError
from hookline.supervisor import serve
from hookline.supervisor.cli.common import fail
from hookline.supervisor.cli.main import build_parser, load_config

HOOKED_WORKER_MODULE = "hookline.rehearsal.hooked_worker"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the hooked service until stopped; returns `hookline serve`'s exit code (2 for a
    command line that is not a `serve` one, or a refused setting)."""
    own = argparse.ArgumentParser(
        prog="python -m hookline.rehearsal.hooked_serve",
        description="hookline serve whose workers SIGKILL themselves when about to send an "
                    "event of TYPE (a rehearsal's poison job); the rest is hookline's own "
                    "command line.")
    own.add_argument("--crash-event-type", required=True, metavar="TYPE")
    hooks, rest = own.parse_known_args(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(rest)
    if args.command != "serve" or args.check:
        return fail("hooked_serve runs `serve` only (without --check)", 2)
    try:
        config = load_config(args, dict(os.environ))
    except ConfigError as exc:
        return fail(f"configuration: {exc}", 2)
    os.environ[CRASH_EVENT_TYPE_ENV] = hooks.crash_event_type  # inherited by the children
    return serve.run(config, worker_module=HOOKED_WORKER_MODULE)


if __name__ == "__main__":
    sys.exit(main())

"""The `hookline` command line, one module per command group.

`main` (in :mod:`hookline.supervisor.cli.main`) is the console script's entry point
(`hookline = "hookline.supervisor.cli:main"`); `python -m hookline.supervisor.cli` runs it too.
Modules:

- main: the parser, global flags, configuration loading, the exit code;
- common: store access, tables and records, `--json` printing, one-line errors and the exit
  codes (0, 1 runtime, 2 usage); human: how values are spelled for people (times, units);
- service: serve, init, config show; preflight: what `serve --check` adds;
- destinations: destinations add/list, jobs, stats; controls: destinations show/update/remove,
  pause, resume, dead, replay, purge, job;
- tenants: tenants list/show/put/delete/disable/enable and the `--tenant` flag;
- sources: sources add/list/remove; logs: logs, scale; backup: backup, verify, restore;
- migrate_store; the drills, listed last: rehearse (rehearse, demo, receiver), bench,
  bench_compare, bench_table.
"""

from hookline.supervisor.cli.main import main

__all__ = ["main"]

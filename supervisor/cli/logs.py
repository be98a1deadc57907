"""`hookline logs`: read, filter and pretty-print the service's JSON log lines;
`hookline scale N`: change the running service's worker count.

`hookline logs [FILE|-] [--follow] [--job ID] [--event REF [--source S]] [--destination NAME]
[--level L] [--since T] [--json]` reads FILE (default: the `log_file` setting), or standard
input for `-` (e.g. `journalctl -u hookline -o cat | hookline logs - --job 42`). With --follow
it keeps reading as lines are appended and across rotation (like `tail -F`).

`--event REF` takes an internal event id, a webhook-id (`msg_...`) or the sender's id (see
`hookline event`): log lines carry the internal id, so REF is resolved through the store
first. It exits 1 with a message when no event matches, or (without --follow) when no line
is about it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from hookline.shared.config import Config
from hookline.shared.db_url import parse_db_url
from hookline.shared.errors import ConfigError, HooklineError, InvalidSetting
from hookline.shared.process.lifecycle import STATUS_FILE, pid_file, read_status, runtime_dir
from hookline.shared.store import Store
from hookline.shared.timeparse import parse_instant
from hookline.supervisor.cli.common import fail, with_store
from hookline.supervisor.cli.tenants import tenant_arg
from hookline.supervisor.logview import LEVELS, LogFilter, format_record, parse_line

T = TypeVar("T")
_FOLLOW_POLL_S = 0.2
_SCALE_STEP_TIMEOUT_S = 10.0


def register(sub: Any) -> None:
    """Add `logs` and `scale` to the CLI."""
    logs = sub.add_parser("logs", help="filter and pretty-print the JSON log lines")
    logs.add_argument("file", nargs="?", metavar="FILE|-",
                      help="log file, or - for standard input (default: the log_file setting)")
    logs.add_argument("--follow", "-f", action="store_true",
                      help="keep reading new lines, across rotation (like tail -F)")
    logs.add_argument("--job", type=int, metavar="ID", help="a job's whole story")
    logs.add_argument("--event", metavar="REF",
                      help="lines about this event: internal id, msg_ id or the sender's id")
    logs.add_argument("--source", metavar="S",
                      help="with --event: REF is the sender's id in this source")
    logs.add_argument("--destination", metavar="NAME", help="lines about this destination "
                      "(every tenant's of that name, unless --tenant or the label "
                      "TENANT~NAME)")
    logs.add_argument("--tenant", metavar="ID", help="lines naming this tenant (with "
                      "--destination: that tenant's destination)")
    logs.add_argument("--level", choices=LEVELS, default="debug", help="lowest level shown")
    logs.add_argument("--since", metavar="T",
                      help="hide older lines: 2h, 30m (ago), ISO 8601 or unix seconds")
    logs.add_argument("--json", action="store_true", help="print matching lines as JSON")
    logs.set_defaults(handler=logs_command)

    scale = sub.add_parser("scale", help="set the running service's worker count (signals it)")
    scale.add_argument("count", type=int, metavar="N", help="wanted number of workers (>= 1)")
    scale.add_argument("--json", action="store_true",
                       help='print {"workers_wanted": N} once the supervisor has it')
    scale.set_defaults(handler=scale_command)


# -- logs ----------------------------------------------------------------------------------


def logs_command(config: Config, args: argparse.Namespace) -> int:
    """Print the matching lines of FILE or stdin; 0, 2 on a bad argument, 1 when the file
    cannot be read."""
    try:
        since_s = parse_instant(args.since, time.time()) if args.since else None
    except ConfigError as exc:
        return fail(f"--since: {exc}", 2)
    source = args.file or config.log_file
    if not source:
        return fail("no log file: give FILE, `-` for standard input, or set log_file", 2)
    if args.source is not None and args.event is None:
        return fail("--source goes with --event", 2)
    try:  # `--destination TENANT~NAME` (a label) becomes NAME of TENANT here
        tenant = tenant_arg(args)
    except InvalidSetting as exc:
        return fail(f"--{exc.field}: {exc.detail}", 2)
    event_id: str | None = None
    if args.event is not None:
        event_id, problem = resolve_event(config, args.event, args.source, tenant)
        if event_id is None:
            return fail(problem)
    flt = LogFilter(job_id=args.job, event_id=event_id, destination=args.destination,
                    tenant=tenant, min_level=args.level, since_s=since_s)
    shown = 0
    colour = not args.json and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    try:
        if source == "-":
            lines: Iterator[str] = _follow_stream(sys.stdin) if args.follow else iter(sys.stdin)
        else:
            lines = _follow_file(Path(source)) if args.follow else _read_file(Path(source))
        for line in lines:
            record = parse_line(line)
            if record is None or not flt.matches(record):
                continue
            out = json.dumps(record) if args.json else format_record(record, colour=colour)
            print(out, flush=args.follow)
            shown += 1
    except BrokenPipeError:  # `hookline logs | head`; before OSError, its base class
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        return fail(f"cannot read {source}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        return 0
    if event_id is not None and shown == 0:
        return fail(f"no log lines about event {event_id} ({args.event}) in "
                    f"{'standard input' if source == '-' else source} with these filters")
    return 0


def resolve_event(config: Config, ref: str, source: str | None,
                  tenant: str | None = None) -> tuple[str | None, str]:
    """The internal id (as log lines carry it) of the event `ref` names, looked up in the
    store as `hookline event` does (see Store.find_event: a sender's id in `tenant`'s
    events; when None, the default tenant's, else the one tenant's that has it); (None,
    why) when it cannot be found. A
    whole-number `ref` is taken as the internal id as it is when the SQLite database does
    not exist (reading another host's logs)."""
    try:
        db = parse_db_url(config.db)
    except ConfigError as exc:
        return None, f"cannot look event {ref!r} up: {exc}"
    if db.path is not None and not Path(db.path).exists():
        if source is None and ref.isascii() and ref.isdigit():
            return ref, ""
        return None, (f"cannot look event {ref!r} up: the database {db.path} does not "
                      "exist (give --db, or the internal event id)")
    try:
        match = run_sync(lambda store: store.find_event(ref, source, tenant=tenant), config)
    except HooklineError as exc:
        return None, str(exc)
    return str(match.event.id), ""


def run_sync(fn: Callable[[Store], Awaitable[T]], config: Config) -> T:
    """Run `fn(store)` on the configured store from synchronous code."""
    return asyncio.run(with_store(config, fn))


def _read_file(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        yield from fh


def _follow_stream(stream: IO[str]) -> Iterator[str]:
    while True:
        line = stream.readline()
        if not line:
            return
        yield line


def _follow_file(path: Path) -> Iterator[str]:
    """Yield the file's lines, then new ones as they come; reopen on rotation.

    Rotation is seen as the path naming another inode (renamed away, recreated) or the file
    shrinking (truncated); what was appended to the old file before the switch is read first.
    """
    fh = path.open(encoding="utf-8", errors="replace")
    try:
        partial = ""
        while True:
            chunk = fh.readline()
            if chunk:
                partial += chunk
                if partial.endswith("\n"):
                    yield partial
                    partial = ""
                continue
            time.sleep(_FOLLOW_POLL_S)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue  # between the rename and the new file's creation
            opened = os.fstat(fh.fileno())
            if (st.st_dev, st.st_ino) != (opened.st_dev, opened.st_ino):
                rest = fh.read()  # the old file's last lines
                yield from (partial + rest).splitlines(keepends=True)
                partial = ""
                fh.close()
                fh = path.open(encoding="utf-8", errors="replace")
            elif st.st_size < fh.tell():
                fh.seek(0)
                partial = ""
    finally:
        fh.close()


# -- scale ---------------------------------------------------------------------------------


def scale_command(config: Config, args: argparse.Namespace) -> int:
    """Signal the running supervisor (SIGTTIN/SIGTTOU, one at a time) until N workers run."""
    if args.count < 1:
        return fail(f"N must be at least 1, not {args.count}", 2)
    path = pid_file(config)
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError) as exc:
        return fail(f"no running supervisor: cannot use pid file {path} ({exc})")
    status_path = runtime_dir(config) / STATUS_FILE
    while True:
        status = read_status(status_path)
        if status is None or status.get("pid") != pid:
            return fail(f"no status from supervisor {pid} in {status_path}")
        wanted = int(status.get("workers_wanted", 0))
        if wanted == args.count:
            print(json.dumps({"workers_wanted": wanted}) if args.json else f"{wanted} workers")
            return 0
        # One signal at a time: signals of one kind sent together may arrive as one.
        os.kill(pid, signal.SIGTTIN if wanted < args.count else signal.SIGTTOU)
        deadline = time.monotonic() + _SCALE_STEP_TIMEOUT_S
        while True:
            time.sleep(0.05)
            status = read_status(status_path) or {}
            if int(status.get("workers_wanted", wanted)) != wanted:
                break
            if time.monotonic() > deadline:
                return fail(f"supervisor {pid} did not change its worker count "
                            f"(still {wanted})")

"""Process lifecycle helpers shared by every child of the supervisor (ingest and workers).

The supervisor and its children agree on a few things only: the exit codes
:data:`BOOT_ERROR_EXIT` (permanent: stop the service) and :data:`TRANSIENT_EXIT` (respawn)
(and `hookline serve` itself uses :data:`REFUSED_EXIT`),
the heartbeat and readiness files, and that a child exits when its parent is gone. Nothing here
imports the supervisor, so a child can be run on its own (for tests, or under another supervisor).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hookline.shared.config import Config
from hookline.shared.db_url import parse_db_url
from hookline.shared.errors import ConfigError
from hookline.shared.logs import configure_logging, get_logger

REFUSED_EXIT = 2
"""Exit code of `hookline serve` refused before anything starts: an invalid setting, a database
refused as unable to keep the delivery promise (a missing or world-writable folder, a network
filesystem, a damaged file, ...), or another `hookline serve` already running on the same
database or runtime folder (:mod:`hookline.shared.process.service_lock`). The same code as the CLI's
usage and validation errors, so `serve`, `serve --check` and `init` agree."""

BOOT_ERROR_EXIT = 3
"""Exit code of a child that cannot boot because of a permanent misconfiguration (bad
config, a path that cannot be a database, schema newer than the code, a refused login, a
port that cannot be bound).

The supervisor stops the whole service instead of respawning such a child forever
(compare gunicorn's `WORKER_BOOT_ERROR`). Transient faults never use it.
"""

TRANSIENT_EXIT = 75
"""Exit code of a child (or of `hookline serve` at start) that met a transient fault: the
database is unreachable, restarting, busy or read-only for a while (sysexits' EX_TEMPFAIL).
The supervisor respawns the child with its backoff; systemd restarts the service.
"""

CRASH_EXIT = 1
"""Exit code of a child that ended on an unexpected error; respawned like TRANSIENT_EXIT."""


async def stopped_within(stop: asyncio.Event, timeout_s: float) -> bool:
    """Wait up to `timeout_s` seconds for `stop`; True when it is set, False when the time
    ran out first (the usual outcome of a periodic task's pause, not an error)."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=timeout_s)
    except TimeoutError:
        return False
    return True


async def watch_parent(stop: asyncio.Event, interval_s: float = 1.0) -> None:
    """Set `stop` when this process's parent changes, i.e. the supervisor died.

    An orphan is re-parented (to init or a subreaper), so a change of `os.getppid()` is the
    portable sign that nobody will stop or reap us any more. Returns as soon as `stop` is set,
    by us or by anyone else.

    Args:
        stop: event the child's main loop waits on; set when the parent is gone.
        interval_s: how often to check the parent, in seconds.
    """
    parent_pid = os.getppid()
    while not stop.is_set():
        await stopped_within(stop, interval_s)
        if os.getppid() != parent_pid:
            get_logger().warning("parent_gone", parent_pid=parent_pid, new_parent_pid=os.getppid())
            stop.set()


def install_stop_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Make SIGTERM and SIGINT set `stop`, and do nothing else.

    SIGINT is included because Ctrl-C in a terminal reaches the whole process group, children
    too; each child then stops gracefully on its own rather than dying with a traceback.

    Args:
        loop: the running event loop (handlers run in its thread, between callbacks).
        stop: event the child's main loop waits on.
    """
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)


# -- runtime files shared by the supervisor and its children --------------------------------

STATUS_FILE = "status.json"
"""Name, inside the runtime folder, of the supervisor's view of its children."""


def _db_path(db: str) -> Path | None:
    """The SQLite file of a `db` setting, or None for a server URL (e.g. PostgreSQL).
    Raises ConfigError as :func:`hookline.shared.db_url.parse_db_url` (Config already refused
    those)."""
    path = parse_db_url(db).path
    return None if path is None else Path(path)


def runtime_dir(config: Config) -> Path:
    """The folder for heartbeat files and `status.json`.

    Returns:
        `config.runtime_dir` when set; else `<db>.run` beside a SQLite database; else
        `./hookline.run` (a server database has no folder of its own).
    """
    if config.runtime_dir:
        return Path(config.runtime_dir)
    db = _db_path(config.db)
    return db.with_name(db.name + ".run") if db is not None else Path("hookline.run")


def pid_file(config: Config) -> Path:
    """The supervisor's pid file: `config.pid_file`, else `<db>.pid`, else `./hookline.pid`."""
    if config.pid_file:
        return Path(config.pid_file)
    db = _db_path(config.db)
    return db.with_name(db.name + ".pid") if db is not None else Path("hookline.pid")


def heartbeat_path(config: Config, slot: str) -> Path:
    """The heartbeat file of `slot`: `<runtime_dir>/<slot>.heartbeat`."""
    return runtime_dir(config) / f"{slot}.heartbeat"


def ready_path(config: Config, slot: str) -> Path:
    """The readiness marker of `slot`: `<runtime_dir>/<slot>.ready`, holding the child's pid
    once it serves (ingest listens, a worker has opened the store)."""
    return runtime_dir(config) / f"{slot}.ready"


def heartbeat_interval_s(timeout_s: float) -> float:
    """How often a child touches its heartbeat file: a quarter of the timeout, at most 1 s."""
    return max(0.05, min(1.0, timeout_s / 4))


async def heartbeat(path: Path, interval_s: float, stop: asyncio.Event) -> None:
    """Touch `path` (its mtime is the heartbeat) every `interval_s` seconds until `stop`.

    Runs as a task on the child's event loop, so a loop blocked by a stuck callback (or a
    process stopped with SIGSTOP) stops heartbeating and the supervisor replaces it
    (compare gunicorn's `WorkerTmp.notify`). A missing folder or file is (re)created; an
    unwritable one is logged once and retried, never fatal.

    Args:
        path: the heartbeat file the supervisor watches.
        interval_s: seconds between touches.
        stop: the child's stop event; the task returns once it is set.
    """
    warned = False
    while not stop.is_set():
        try:
            touch(path)
            warned = False
        except OSError as exc:
            if not warned:
                get_logger().warning("heartbeat_failed", path=str(path), error=str(exc))
                warned = True
        await stopped_within(stop, interval_s)


def touch(path: Path) -> None:
    """Set `path`'s mtime to now, creating it (and its folder) when missing.

    Raises:
        OSError: the file cannot be created or updated.
    """
    try:
        os.utime(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def write_status(path: Path, status: Mapping[str, Any]) -> None:
    """Atomically replace the JSON status file at `path` (write a temp file, rename).

    Raises:
        OSError: the folder is not writable.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dict(status)))
    os.replace(tmp, path)


def write_lock_report_path(config: Config, slot: str) -> Path:
    """Where `slot` leaves its write-lock figures at exit:
    `<runtime_dir>/<slot>.write-lock.json`."""
    return runtime_dir(config) / f"{slot}.write-lock.json"


def report_write_lock(config: Config, slot: str, stats: Mapping[str, Any] | None) -> None:
    """Log a process's write-lock figures (SqliteDiagnostics.write_lock_stats) as
    `write_lock_stats` and leave them in :func:`write_lock_report_path` for `hookline bench`
    and operators: SQLite's single writer is shared by every process, so how long each one
    waited is what shows a starved process. Nothing happens for None (PostgreSQL). An
    unwritable folder is logged, never fatal: the process is exiting anyway.
    """
    if stats is None:
        return
    get_logger().info("write_lock_stats", **stats)
    try:
        write_status(write_lock_report_path(config, slot), {"slot": slot, **stats})
    except OSError as exc:
        get_logger().warning("write_lock_report_failed", error=str(exc))


GIL_SWITCH_INTERVAL_S = 0.0005


def shorten_gil_switch_interval() -> None:
    """Let a thread waiting for the GIL get it within 0.5 ms instead of Python's default 5 ms.

    The SQLite store runs each transaction on its own thread while holding the database's
    single write lock (shared/store/write_lock.py). Between two statements that thread needs the
    GIL back from the event loop; at the default interval a busy loop can keep it for 5 ms,
    and every other process then waits that long for the lock too.
    """
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


GC_YOUNG_THRESHOLD = 10_000
"""Container allocations (net of frees) between two young-generation collections; Python's
default is 700."""


def tune_garbage_collector() -> None:
    """Make Python's cycle collector cheap for a long-running service process.

    Measured at a steady 1,000 events/s (`hookline bench --rate 1000`): with Python's defaults
    a worker ran about 1,400 young, 130 middle and 12 full collections in 15 s, 11 % of its
    CPU, each full one a 40 ms pause of its event loop (46,000 objects, nearly all of them
    modules, classes and functions loaded at boot), and they found almost nothing to free.
    `gc.freeze()` moves what boot loaded out of every later collection, and a larger young
    threshold makes collections rare; cycles are still collected, later. Call once, after
    the imports, before the main coroutine starts.
    """
    gc.collect()  # boot's own garbage first: what is frozen is never collected
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, oldest)


def read_status(path: Path) -> dict[str, Any] | None:
    """Read the supervisor's status file; None when absent or not valid JSON (mid-write)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def child_config_or_exit(config_json: str | None, slot: str) -> Config:
    """A child process's Config (Config.for_child: --config-json, else the supervisor's
    HOOKLINE_CONFIG_JSON variable). A bad or missing config never gets better by respawning,
    so it is logged as `boot_failed` and the process exits with BOOT_ERROR_EXIT (SystemExit).
    """
    try:
        return Config.for_child(config_json, os.environ)
    except ConfigError as exc:
        configure_logging(slot)
        get_logger().error("boot_failed", reason=str(exc))
        raise SystemExit(BOOT_ERROR_EXIT) from None


def pid_alive(pid: int) -> bool:
    """True when a process with `pid` exists (ours or another user's: EPERM means it does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

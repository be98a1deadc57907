"""`hookline serve`: build the child process specs (ingest + N workers) and run the arbiter.

Before anything else it takes the service locks (:mod:`hookline.shared.process.service_lock`): one
supervisor per database and per runtime folder. Runtime files (see
:mod:`hookline.shared.process.lifecycle`): the pid file (for `hookline scale`), and in the runtime
folder one heartbeat file per slot plus `status.json` (read by ingest's `/readyz`); a refused start
writes none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hookline.shared.config import (
    CONFIG_ENV,
    Config,
    ingest_not_ready_reason,
    shared_port_problem,
)
from hookline.shared.db_url import sqlite_path
from hookline.shared.errors import ConfigError, HooklineError, StoreUnavailable
from hookline.shared.logs import configure_logging, get_logger, rotate_log_file
from hookline.shared.process.ingest_writer import WRITER_SLOT, uses_writer_process
from hookline.shared.process.lifecycle import (
    BOOT_ERROR_EXIT,
    REFUSED_EXIT,
    STATUS_FILE,
    TRANSIENT_EXIT,
    heartbeat_path,
    pid_file,
    read_status,
    ready_path,
    runtime_dir,
)
from hookline.shared.process.listen_check import unbindable
from hookline.shared.process.service_lock import ServiceLock, ServiceLocked
from hookline.shared.process.spawn import child_argv, child_import_env
from hookline.shared.store import store_for
from hookline.shared.store.clock import reanchor_at_serve_start
from hookline.shared.store.preflight import QuickCheck, database_file, preflight
from hookline.supervisor.arbiter import Arbiter
from hookline.supervisor.children import ChildSpec, worker_slot
from hookline.supervisor.code_on_disk import CodeWatch


def ingest_slot(number: int) -> str:
    """The slot of ingest process `number` (1-based): `ingest`, then `ingest-2`, `ingest-3`,
    ... (the first keeps the name a single ingest always had; it alone runs the database's
    maintenance and retention rounds: ingest/main.py)."""
    return "ingest" if number == 1 else f"ingest-{number}"


def _child_spec(config: Config, module: str, slot: str) -> ChildSpec:
    """Child `slot` running `python -P -m MODULE --slot SLOT`, its Config in CONFIG_ENV (see
    shared/process/spawn.py for why -P and PYTHONPATH), with its heartbeat and readiness
    files in the runtime folder."""
    return ChildSpec(slot=slot, argv=child_argv(module, "--slot", slot),
                     env={CONFIG_ENV: config.to_json(), **child_import_env()},
                     heartbeat_file=str(heartbeat_path(config, slot)),
                     ready_file=str(ready_path(config, slot)))


def ingest_spec(config: Config, number: int = 1) -> ChildSpec:
    """Ingest child `number` (1-based; `config.ingest_processes` of them share the listen
    port): `python -P -m hookline.ingest --slot SLOT`."""
    return _child_spec(config, "hookline.ingest", ingest_slot(number))


def writer_spec(config: Config) -> ChildSpec:
    """The ingest writer process (`ingest_writer = process` on SQLite:
    ingest/writer_process.py), which commits every ingest process's batches."""
    return _child_spec(config, "hookline.ingest.writer_process", WRITER_SLOT)


WORKER_MODULE = "hookline.workers"
"""What each worker child runs (`python -P -m WORKER_MODULE --slot worker-N`)."""


def worker_spec(config: Config, number: int, module: str = WORKER_MODULE) -> ChildSpec:
    """Worker child number `number` (1-based): `python -P -m MODULE --slot worker-N`, its
    Config in CONFIG_ENV. `module` is :data:`WORKER_MODULE` in production; a harness running
    the supervisor in its own entry point (rehearsal/hooked_serve.py) names its own module,
    which runs the same worker with the harness's wrapper around it."""
    return _child_spec(config, module, worker_slot(number))


async def check(config: Config) -> QuickCheck | None:
    """Check the database once for the whole service, then open it (applying migrations) and
    close it: run by `hookline serve` before any child starts, and by `serve --check`.

    First the store's preflight (:func:`hookline.shared.store.preflight.preflight`: on SQLite the
    folder exists, is writable and not world-writable, is not on a network or FUSE filesystem
    without the opt-in, takes WAL mode, and `PRAGMA quick_check` within
    `config.quick_check_timeout_s`; nothing on PostgreSQL), then the open.

    Returns:
        What `PRAGMA quick_check` found, or None when it did not run. The caller reports
        it: `serve` as a log line, `serve --check` as a sentence.

    Raises:
        HooklineError: the database cannot be opened or migrated; StorageRefused when it
            cannot keep the delivery promise (damaged, in memory, network filesystem, ...).
    """
    checked = await preflight(config)
    store = store_for(config)
    try:
        await store.open()
    finally:
        await store.close()  # also after a half-done open: no thread may keep us alive
    return checked


def run(config: Config, *, worker_module: str = WORKER_MODULE) -> int:
    """Run `config.ingest_processes` ingest processes and `config.workers` workers under the
    arbiter until stopped.

    First of all the service locks are taken (:mod:`hookline.shared.process.service_lock`): while
    another supervisor serves this database or runtime folder, this one stops at once and
    touches nothing. Then the database is opened (and migrated) once, so that children never
    race to migrate and a bad path stops the service before anything is spawned.

    Args:
        config: the service's settings.
        worker_module: what each worker child runs (:func:`worker_spec`).

    Returns:
        The process exit code: 0 after a clean stop; 2 (REFUSED_EXIT) when another supervisor
        holds a service lock or the settings (several ingest processes on port 0) or storage
        are refused; 3 when the database or a
        child is misconfigured (permanent); 75 when the database is away at start (transient:
        systemd's Restart=on-failure tries again).
    """
    configure_logging("supervisor", config.log_level, log_file=config.log_file)
    if (reason := shared_port_problem(config)) is not None:
        print(f"hookline: cannot start: {reason}", file=sys.stderr)
        return REFUSED_EXIT
    try:
        lock = ServiceLock.take(config)
    except (ServiceLocked, ConfigError) as exc:
        print(f"hookline: cannot start: {exc}", file=sys.stderr)
        return REFUSED_EXIT
    except OSError as exc:
        print(f"hookline: cannot start: cannot write runtime files ({runtime_dir(config)}): "
              f"{exc.strerror or exc}", file=sys.stderr)
        return BOOT_ERROR_EXIT
    with lock:
        return _run_locked(config, worker_module)


def _run_locked(config: Config, worker_module: str) -> int:
    """:func:`run` once this process holds the service locks."""
    await_previous_children(runtime_dir(config) / STATUS_FILE,
                            timeout_s=config.graceful_timeout_s + 2.0)
    # Several ingest processes bind with SO_REUSEPORT, which another process of this user
    # listening the same way would silently share (taking a share of the events): the port
    # must be free first, as a single ingest's plain bind requires anyway.
    if config.ingest_processes > 1 and (taken := unbindable(config.listen)) is not None:
        print(f"hookline: cannot start: cannot listen on {config.listen}: {taken}",
              file=sys.stderr)
        return BOOT_ERROR_EXIT
    try:
        new_file = _missing_database_file(config.db)
        checked = asyncio.run(check(config))
        if new_file is not None:
            # A relative `db` follows the working directory: started from another folder, a
            # service would otherwise look empty with no word said (its data elsewhere).
            print(f"hookline: created a new, empty database {new_file}" + (
                f" (`db` {config.db!r} is relative: it is read from the working directory)"
                if not os.path.isabs(sqlite_path(config.db) or "/") else ""), file=sys.stderr)
            get_logger().warning("database_created", path=new_file)
        if checked is not None:
            checked.log()
        reanchor_at_serve_start(config.db, lease_s=config.lease_s, retry_cap_s=config.retry_cap_s,
                                busy_timeout_s=config.busy_timeout_s)  # shared/store/clock.py
    except StoreUnavailable as exc:
        print(f"hookline: cannot start yet: {exc}", file=sys.stderr)
        return TRANSIENT_EXIT
    except ConfigError as exc:  # storage refused (StorageRefused), same code as serve --check
        print(f"hookline: cannot start: {exc}", file=sys.stderr)
        return REFUSED_EXIT
    except HooklineError as exc:
        print(f"hookline: cannot start: {exc}", file=sys.stderr)
        return BOOT_ERROR_EXIT
    folder = runtime_dir(config)
    pid_path = pid_file(config)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        pid_path.write_text(f"{os.getpid()}\n")
    except OSError as exc:
        print(f"hookline: cannot start: cannot write runtime files ({folder}, {pid_path}): "
              f"{exc.strerror or exc}", file=sys.stderr)
        return BOOT_ERROR_EXIT
    specs = ([writer_spec(config)] if uses_writer_process(config) else []) + [
        ingest_spec(config, n) for n in range(1, config.ingest_processes + 1)] + [
        worker_spec(config, n, worker_module) for n in range(1, config.workers + 1)]
    arbiter = Arbiter(specs, graceful_timeout_s=config.graceful_timeout_s + 2.0,
                      make_worker_spec=lambda n: worker_spec(config, n, worker_module),
                      heartbeat_timeout_s=config.heartbeat_timeout_s,
                      status_file=folder / STATUS_FILE,
                      on_tick=_log_rotator(config), metrics_folder=folder,
                      not_ready_reason=ingest_not_ready_reason(config),
                      code_changed=CodeWatch().changed)
    try:
        return arbiter.run()
    finally:
        _remove_own_pid_file(pid_path)


def _missing_database_file(db: str) -> str | None:
    """The absolute path of the SQLite file `db` names when it does not exist yet (serve
    will create it), else None (it exists, or the database is on a server)."""
    path = database_file(db)
    return path if path is not None and not os.path.exists(path) else None


def await_previous_children(status_path: Path, timeout_s: float) -> list[int]:
    """Wait for the children of a supervisor that died without stopping them (kill -9, OOM).

    They notice their parent is gone within a second and stop gracefully (workers hand their
    jobs back), but until then ingest may still hold the listen port and the workers their
    claims; a new service started meanwhile would fail to bind. The dead supervisor's
    `status.json` names them: each still running, and still one of our children by its command
    line (a pid may have been reused), is waited for, at most `timeout_s` seconds in all.

    Returns:
        The pids that were still running when the wait began (logged as
        `previous_children_awaited`, with those still running at the end, if any).
    """
    status = read_status(status_path) or {}
    if status.get("pid") == os.getpid() or not isinstance(status.get("slots"), dict):
        return []
    pids = [slot.get("pid") for slot in status["slots"].values() if isinstance(slot, dict)]
    running = [pid for pid in pids if isinstance(pid, int) and _is_service_child(pid)]
    if not running:
        return []
    deadline = time.monotonic() + timeout_s
    left = running
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if _is_service_child(pid)]
    get_logger().info("previous_children_awaited", pids=running, still_running=left,
                      waited_s=round(timeout_s - max(0.0, deadline - time.monotonic()), 3))
    return running


def _is_service_child(pid: int) -> bool:
    """Whether `pid` runs and is an ingest or worker child (its command line has `--slot`)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and b"--slot" in argv


def _log_rotator(config: Config) -> Callable[[], None] | None:
    """The arbiter's tick hook rotating `config.log_file` (checked at most once a second)."""
    if not config.log_file:
        return None
    path = config.log_file
    checked_at = 0.0

    def rotate() -> None:
        nonlocal checked_at
        now = time.monotonic()
        if now - checked_at < 1.0:
            return
        checked_at = now
        if rotate_log_file(path, config.log_file_max_bytes, config.log_file_backups):
            get_logger().info("log_file_rotated", path=path, backups=config.log_file_backups)

    return rotate


def _remove_own_pid_file(path: Path) -> None:
    """Remove the pid file unless another supervisor has since replaced it."""
    with contextlib.suppress(OSError, ValueError):
        if int(path.read_text().strip()) == os.getpid():
            path.unlink()

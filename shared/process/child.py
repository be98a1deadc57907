"""One lifecycle for every child of the supervisor (ingest and each worker), written once.

:func:`child_context` wraps a child's main coroutine: SIGTERM/SIGINT and the parent going
away set its stop event; the event loop heartbeats until the process is about to exit; the
store is opened (and closed again even when opening failed half way, so no database thread
outlives a failed boot); :meth:`ChildContext.mark_ready` leaves the readiness marker the
supervisor waits for before telling systemd READY=1.

:func:`run_child` runs that coroutine on uvloop (when installed) and turns how it ended into
the exit code the supervisor reads (shared/faults.py classifies):

* 0: a clean stop;
* :data:`~hookline.shared.process.lifecycle.BOOT_ERROR_EXIT` (3): a permanent misconfiguration met
  before the child was ready; the log line `boot_failed` says what to fix;
* :data:`~hookline.shared.process.lifecycle.TRANSIENT_EXIT` (75): the database was away
  (unreachable, restarting, busy, read-only), at boot or later;
* :data:`~hookline.shared.process.lifecycle.CRASH_EXIT` (1): any other error (after boot a permanent
  fault too: the respawned process checks it again at boot and exits 3 if it persists).

The last two are respawned by the supervisor with its backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

from hookline.shared.config import Config
from hookline.shared.errors import StoreUnavailable
from hookline.shared.faults import is_transient
from hookline.shared.logs import configure_logging, get_logger
from hookline.shared.metrics_catalog import (
    OTEL_SPANS_DROPPED,
    STORE_TIMEOUTS,
    WRITE_LOCK_WAIT_SECONDS,
)
from hookline.shared.process.clock import watch_clock
from hookline.shared.process.lifecycle import (
    BOOT_ERROR_EXIT,
    CRASH_EXIT,
    TRANSIENT_EXIT,
    heartbeat,
    heartbeat_interval_s,
    heartbeat_path,
    install_stop_signals,
    ready_path,
    runtime_dir,
    shorten_gil_switch_interval,
    tune_garbage_collector,
    watch_parent,
)
from hookline.shared.process.metrics_file import (
    HistogramData,
    ProcessMetrics,
    SnapshotWriter,
    write_snapshots,
)
from hookline.shared.store import Store, store_for, store_timeouts, write_lock_waits
from hookline.shared.store.write_lock import DurationHistogram
from hookline.shared.tracing import start_tracing

if TYPE_CHECKING:
    from hookline.shared.otel import Tracing

# How long exit_process waits in all for ending threads before it calls them left (seconds).
THREAD_EXIT_GRACE_S = 2.0


class BootState:
    """Whether the child has reported ready: a fault before that is a boot fault."""

    def __init__(self) -> None:
        self.booted = False


@dataclasses.dataclass(slots=True)
class ChildContext:
    """What :func:`child_context` hands the child's main coroutine.

    Attributes:
        config: the child's settings.
        slot: the supervisor's name for this process (`ingest`, `worker-2`).
        stop: set by SIGTERM/SIGINT, by the parent going away, or by the caller.
        store: the open store.
        boot: where readiness is recorded for :func:`run_child`.
        metrics: what this process counts in memory for /metrics; its snapshot is written
            to the runtime folder every few seconds (shared/process/metrics_file.py).
        snapshots: writes that snapshot (ingest also writes it at each scrape).
        tracing: the process's OpenTelemetry tracing (the `tracing` setting), or None.
    """

    config: Config
    slot: str
    stop: asyncio.Event
    store: Store
    boot: BootState
    metrics: ProcessMetrics
    snapshots: SnapshotWriter
    tracing: Tracing | None = None

    def mark_ready(self) -> None:
        """Record that this child serves: faults from here on are runtime faults, and the
        supervisor's readiness marker (:func:`hookline.shared.process.lifecycle.ready_path`) gets
        our pid. An unwritable marker is logged, never fatal (the supervisor then waits on)."""
        self.boot.booted = True
        path = ready_path(self.config, self.slot)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(f"{os.getpid()}\n")
            os.replace(tmp, path)  # the supervisor never reads half a pid
        except OSError as exc:
            get_logger().warning("ready_marker_failed", path=str(path), error=str(exc))


@contextlib.asynccontextmanager
async def child_context(config: Config, slot: str, *, stop: asyncio.Event | None = None,
                        boot: BootState | None = None,
                        worker_store: bool = False,
                        inline_store: bool = False) -> AsyncIterator[ChildContext]:
    """Run a child's main coroutine inside its lifecycle (module docstring).

    Signal handlers are removed again, the heartbeat stops and the store is closed on the way
    out, whatever happened.

    Args:
        config: settings; `db`, `synchronous` (or `worker_synchronous`), `busy_timeout_s`,
            `heartbeat_timeout_s` and `runtime_dir` are read here.
        slot: the supervisor's name for this process; names its heartbeat and ready files.
        stop: set it to stop; a new event when None.
        boot: records readiness for :func:`run_child`; a new one when None.
        worker_store: open the workers' store (:func:`hookline.shared.store.store_for`'s
            `worker`: on SQLite, transactions on this event loop's thread, committed with
            `worker_synchronous`).
        inline_store: on SQLite, a store whose transactions run on this event loop's thread,
            committed with `synchronous` (the ingest writer process's).

    Raises:
        ConfigError: the database URL is unsupported.
        StoreError: the store cannot be opened (StoreUnavailable when that may pass).
    """
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    install_stop_signals(loop, stop)
    # The parent watch and the clock-step log (shared/process/clock.py) run as one task.
    parent_watch = asyncio.gather(watch_parent(stop), watch_clock(stop))
    exiting = asyncio.Event()
    beat = asyncio.create_task(heartbeat(heartbeat_path(config, slot),
                                         heartbeat_interval_s(config.heartbeat_timeout_s),
                                         exiting), name="heartbeat")
    tracing = None
    try:
        tracing = start_tracing(config.tracing, slot)  # ConfigError: a malformed OTEL_BSP_*
        store = store_for(config, worker=worker_store, inline=inline_store)
        try:
            await store.open()
        except BaseException:
            await _close_quietly(store)  # a half-open store's thread would keep us alive
            raise
        metrics = ProcessMetrics()
        waits = write_lock_waits(store)
        if waits is not None:  # SQLite: this process's waits for the single writer
            metrics.histogram_sources.append(lambda: {WRITE_LOCK_WAIT_SECONDS.name: {
                (): write_lock_histogram(waits)}})
        if store_timeouts(store) is not None:  # PostgreSQL: calls that missed a deadline
            metrics.value_sources.append(lambda: {STORE_TIMEOUTS.name: {
                (): float(store_timeouts(store) or 0)}})
        if tracing is not None:
            metrics.value_sources.append(partial(spans_dropped, tracing))
        snapshots = SnapshotWriter(runtime_dir(config), slot, metrics)
        snapshots_done = asyncio.Event()
        snapshot_task = asyncio.create_task(write_snapshots(snapshots, snapshots_done),
                                            name="metrics-snapshots")
        try:
            yield ChildContext(config, slot, stop, store, boot or BootState(), metrics,
                               snapshots, tracing)
        finally:
            if tracing is not None:  # its last spans (bounded, off the event loop), counted
                await asyncio.to_thread(tracing.shutdown)
            snapshots_done.set()  # the task writes a last snapshot and returns
            await snapshot_task
            await _close_quietly(store)
    finally:
        if tracing is not None:  # a failed boot: its thread ends too (idempotent)
            await asyncio.to_thread(tracing.shutdown)
        with contextlib.suppress(OSError):
            ready_path(config, slot).unlink(missing_ok=True)
        parent_watch.cancel()
        exiting.set()
        with contextlib.suppress(asyncio.CancelledError):
            await parent_watch
        await beat
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def spans_dropped(tracing: Tracing) -> dict[str, dict[tuple[str, ...], float]]:
    """`hookline_otel_spans_dropped_total` of this process, by reason."""
    return {OTEL_SPANS_DROPPED.name: {(reason,): float(n)
                                      for reason, n in tracing.dropped().items()}}


def write_lock_histogram(waits: DurationHistogram) -> HistogramData:
    """The write-lock wait histogram in snapshot form (seconds)."""
    bounds, cumulative, count, total_s = waits.cumulative()
    return {"bounds": bounds, "cumulative": cumulative, "count": count, "sum": total_s}


async def _close_quietly(store: Store) -> None:
    """Close the store; a failure to close is logged (the process is ending anyway)."""
    try:
        await store.close()
    except Exception as exc:  # noqa: BLE001  (closing must not hide why we are exiting)
        get_logger().warning("store_close_failed", error=f"{type(exc).__name__}: {exc}")


def run_child(config: Config, slot: str,
              main: Callable[[BootState], Coroutine[Any, Any, None]], *,
              failed_event: str) -> int:
    """Run a child's main coroutine to completion and return its exit code.

    Args:
        config: the child's settings (`log_level`, `log_file` are read here).
        slot: the supervisor's name for this process, logged on every line.
        main: builds the coroutine, given the BootState it must mark when ready (through
            :class:`ChildContext`).
        failed_event: the log event for a fault after boot, e.g. `worker_failed`.

    Returns:
        0 after a clean stop; BOOT_ERROR_EXIT for a permanent fault before ready (logged
        `boot_failed`); TRANSIENT_EXIT for StoreUnavailable at any time; CRASH_EXIT for any
        other error.
    """
    try:
        configure_logging(slot, config.log_level, log_file=config.log_file)
    except ValueError as exc:  # Config does not check log_level; a bad one cannot boot
        configure_logging(slot)
        get_logger().error("boot_failed", reason=str(exc))
        return BOOT_ERROR_EXIT
    shorten_gil_switch_interval()
    tune_garbage_collector()
    log = get_logger()
    boot = BootState()
    try:
        event_loop_runner()(main(boot))
    except Exception as exc:  # the process boundary: classify and log it
        if not boot.booted and not is_transient(exc):
            log.error("boot_failed", reason=str(exc))
            return BOOT_ERROR_EXIT
        event = failed_event if boot.booted else "boot_failed"
        if isinstance(exc, StoreUnavailable):
            log.error(event, reason=str(exc), transient=True)
            return TRANSIENT_EXIT
        log.exception(event, reason=str(exc))
        return CRASH_EXIT
    return 0


def event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """`uvloop.run` when uvloop is installed, else `asyncio.run`."""
    try:
        import uvloop  # noqa: PLC0415  (optional: absent on some platforms)
    except ImportError:
        return asyncio.run
    return uvloop.run


def _non_daemon_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate()
            if t is not threading.main_thread() and t.is_alive() and not t.daemon]


def exit_process(code: int) -> NoReturn:
    """End a child process with `code`, even if a library left a non-daemon thread running
    (Python would otherwise wait for it forever and the slot would be dead but present).
    Such threads are logged as `threads_left` first.

    A thread that is ending gets up to THREAD_EXIT_GRACE_S in all to do so: aiosqlite's
    connection thread, for one, answers `close()` just before it leaves its loop, so right
    after a clean close it may still be alive for a moment on a busy machine."""
    deadline = time.monotonic() + THREAD_EXIT_GRACE_S
    for thread in _non_daemon_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in _non_daemon_threads()]
    if left:
        get_logger().error("threads_left", threads=left, exit_code=code)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

"""Entry of the ingest process: open the store, serve the app until told to stop, exit with a
code the supervisor reads (0 after a clean stop, 3 when it cannot boot)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from ingest import auth
from ingest.app import IN_FLIGHT_KEY, build_app
from ingest.group_commit import GroupCommitter
from ingest.http_limits import IngestRunner, parser_limits
from ingest.maintenance import run_maintenance, run_retention
from shared.config import Config, listen_host_port
from shared.errors import ConfigError, StoreBusy, StoreError
from shared.lifecycle import (
    BOOT_ERROR_EXIT, heartbeat, heartbeat_interval_s, heartbeat_path, install_stop_signals,
    report_write_lock, shorten_gil_switch_interval, watch_parent,
)
from shared.logs import configure_logging, get_logger
from shared.store import store_for

_LAST_STEP = 0.25
"""Share of graceful_timeout_s left to aiohttp's shutdown after our own drain step."""


class ListenError(ConfigError):
    """The listen address cannot be bound (in use, not local, not permitted)."""


async def serve(config: Config, *, ready: Callable[[int], None] | None = None,
                stop: asyncio.Event | None = None, slot: str = "ingest") -> None:
    """Serve ingest on `config.listen` until `stop` is set.

    SIGTERM and SIGINT set `stop` (their handlers are removed again on return), and so does
    the parent process going away. On stop, within about `config.graceful_timeout_s`
    seconds: the listening socket closes; requests in flight (even those still receiving
    their body) finish and are answered, with `Connection: close`; then aiohttp closes the
    connections, cancelling any request still unfinished (never answered, so never a lost
    2xx); the group committer commits what is queued; the store closes.

    Args:
        config: settings; `db`, `synchronous`, `busy_timeout_s`, `listen`,
            `graceful_timeout_s`, `max_body_bytes`, `max_header_bytes`, `max_headers` are
            read.
        ready: called with the bound port (useful with port 0) once serving.
        stop: set it to stop; a new event when None.
        slot: the supervisor's name for this process; its heartbeat file is named after it
            (the event loop touches it until the process is about to exit).

    Raises:
        StoreError: the store cannot be opened.
        ConfigError: the database URL is unsupported; ListenError when the address cannot
            be bound.
    """
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    log = get_logger()
    host, port = listen_host_port(config.listen)
    install_stop_signals(loop, stop)
    parent_watch = asyncio.create_task(watch_parent(stop), name="watch-parent")
    exiting = asyncio.Event()
    beat = asyncio.create_task(heartbeat(heartbeat_path(config, slot),
                                         heartbeat_interval_s(config.heartbeat_timeout_s),
                                         exiting), name="heartbeat")
    try:
        store = store_for(config)
        await store.open()
        housekeeping = asyncio.create_task(  # WAL hygiene (ingest/maintenance.py)
            run_maintenance(store, config.maintenance_interval_s, stop), name="maintenance")
        retention = asyncio.create_task(run_retention(store, config, stop), name="retention")
        try:
            committer = GroupCommitter(store, min_interval_s=config.batch_interval_s)
            app = build_app(store, config, committer=committer)
            # Stopping happens in two steps within graceful_timeout_s: most of it to drain
            # (below), the rest for aiohttp's own shutdown of whatever is left.
            # Header limits are enforced by aiohttp's parser; IngestRunner answers a
            # violation with JSON 431 (ingest/http_limits.py).
            runner = IngestRunner(app, shutdown_timeout=config.graceful_timeout_s * _LAST_STEP,
                                  access_log=None,  # our own event logs say what happened
                                  **parser_limits(config))
            await runner.setup()
            try:
                site = web.TCPSite(runner, host, port)
                try:
                    await site.start()
                except OSError as exc:
                    raise ListenError(f"cannot listen on {config.listen}: "
                                      f"{exc.strerror or exc}") from exc
                bound_port = _bound_port(runner, port)
                log.info("ingest_listening", host=host, port=bound_port)
                auth.warn_if_unconfigured(config)
                if ready is not None:
                    ready(bound_port)
                await stop.wait()
                in_flight = app[IN_FLIGHT_KEY]
                in_flight.draining = True  # /readyz answers 503 from here on
                log.info("ingest_stopping", in_flight=in_flight.count,
                         committed=committer.committed, batches=committer.batches)
                for running_site in list(runner.sites):
                    await running_site.stop()  # no new connections from here on
                if not await in_flight.drain(config.graceful_timeout_s * (1 - _LAST_STEP)):
                    log.warning("ingest_drain_timeout", in_flight=in_flight.count)
            finally:
                await runner.cleanup()  # stops the committer too (the app's cleanup_ctx)
            report_write_lock(config, slot, store.write_lock_stats())  # after serving only
        finally:
            housekeeping.cancel()
            retention.cancel()
            await asyncio.gather(housekeeping, retention, return_exceptions=True)
            await store.close()
    finally:
        parent_watch.cancel()
        exiting.set()
        with contextlib.suppress(asyncio.CancelledError):
            await parent_watch
        await beat
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    log.info("ingest_stopped")


def _bound_port(runner: web.AppRunner, requested: int) -> int:
    """The port actually bound (differs from `requested` when that was 0)."""
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return requested


def run(config: Config, slot: str = "ingest") -> int:
    """Run the ingest process to completion.

    Args:
        config: settings for this process.
        slot: the supervisor's name for this process, logged on every line.

    Returns:
        0 after a clean stop; BOOT_ERROR_EXIT (3) when the store cannot be opened or the
        address cannot be bound, so the supervisor stops instead of respawning; 1 for
        anything else that ends the process early (an unexpected error, or StoreBusy at
        boot, which is transient), so the supervisor respawns it.
    """
    try:
        configure_logging(slot, config.log_level, log_file=config.log_file)
    except ValueError as exc:  # Config does not check log_level; a bad one cannot boot
        configure_logging(slot)
        get_logger().error("boot_failed", reason=str(exc))
        return BOOT_ERROR_EXIT
    log = get_logger()
    shorten_gil_switch_interval()
    booted = False

    def on_ready(port: int) -> None:
        nonlocal booted
        booted = True

    try:
        _event_loop_runner()(serve(config, ready=on_ready, slot=slot))
    except StoreBusy as exc:
        # Transient (another process held the write lock through migrations): exit 1 so the
        # supervisor respawns us with backoff instead of giving up on the whole service.
        log.error("boot_failed" if not booted else "ingest_failed", reason=str(exc))
        return 1
    except (StoreError, ConfigError, OSError) as exc:
        if booted:
            log.exception("ingest_failed")
            return 1
        log.error("boot_failed", reason=str(exc))
        return BOOT_ERROR_EXIT
    except Exception:  # the process boundary: log it as one JSON line
        log.exception("ingest_failed")
        return 1
    return 0


def _event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """`uvloop.run` when uvloop is installed, else `asyncio.run`."""
    try:
        import uvloop  # noqa: PLC0415  (optional: absent on some platforms)
    except ImportError:
        return asyncio.run
    return uvloop.run

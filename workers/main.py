"""Entry of a worker process: open the store, run a :class:`~workers.loop.Worker` until told to
stop (SIGTERM/SIGINT, or the supervisor vanished), exit with a code the supervisor reads."""

from __future__ import annotations

import asyncio
import os
import socket

from shared.config import Config
from shared.errors import ConfigError, StoreError
from shared.lifecycle import (
    BOOT_ERROR_EXIT, heartbeat, heartbeat_interval_s, heartbeat_path, install_stop_signals,
    report_write_lock, shorten_gil_switch_interval, watch_parent,
)
from shared.logs import configure_logging, get_logger
from shared.store import store_for
from workers.loop import Worker
from workers.sender import Sender


def worker_identity(slot: str) -> str:
    """The lease identity of this process: `slot@host:pid`, e.g. `worker-2@web1:4242`."""
    return f"{slot}@{socket.gethostname()}:{os.getpid()}"


async def serve(config: Config, slot: str, stop: asyncio.Event | None = None) -> None:
    """Deliver jobs until `stop` is set (created and wired to signals when None).

    The event loop heartbeats to the supervisor (:func:`shared.lifecycle.heartbeat`) until
    the process has drained and is about to exit, so a blocked loop gets replaced.

    Raises:
        StoreError, ConfigError: the database cannot be opened.
    """
    stop = stop or asyncio.Event()
    install_stop_signals(asyncio.get_running_loop(), stop)
    parent_watch = asyncio.create_task(watch_parent(stop))
    exiting = asyncio.Event()
    beat = asyncio.create_task(heartbeat(heartbeat_path(config, slot),
                                         heartbeat_interval_s(config.heartbeat_timeout_s),
                                         exiting))
    store = store_for(config)
    try:
        await store.open()
    except BaseException:
        exiting.set()
        parent_watch.cancel()
        raise
    log = get_logger()
    worker_id = worker_identity(slot)
    log.info("worker_started", worker=worker_id)
    try:
        async with Sender(timeout_s=config.attempt_timeout_s, policy=config.address_policy,
                          max_connections=config.worker_concurrency) as sender:
            await Worker(store, config, worker_id, sender).run(stop)
    finally:
        parent_watch.cancel()
        report_write_lock(config, slot, store.write_lock_stats())
        await store.close()
        exiting.set()
        await beat
        log.info("worker_stopped", worker=worker_id)


def run(config: Config, slot: str) -> int:
    """Run one worker process to completion; returns its exit code (3 = cannot boot)."""
    configure_logging(slot, config.log_level, log_file=config.log_file)
    shorten_gil_switch_interval()
    try:
        import uvloop  # noqa: PLC0415

        runner = uvloop.run
    except ImportError:  # uvloop is optional on platforms without it
        runner = asyncio.run
    try:
        runner(serve(config, slot))
    except (StoreError, ConfigError) as exc:
        get_logger().error("boot_failed", reason=str(exc))
        return BOOT_ERROR_EXIT
    return 0

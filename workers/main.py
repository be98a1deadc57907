"""Entry of a worker process: open the store, run a :class:`~hookline.workers.loop.Worker` until
told to stop (SIGTERM/SIGINT, or the supervisor vanished), exit with a code the supervisor reads
(shared/process/child.py: 0 clean stop, 3 misconfigured, 75 database away, 1 crashed)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable

from hookline.shared.config import Config
from hookline.shared.logs import get_logger
from hookline.shared.process.child import BootState, child_context, run_child
from hookline.shared.process.lifecycle import report_write_lock
from hookline.shared.store import write_lock_stats
from hookline.workers.loop import Worker
from hookline.workers.sender import Sender, SendsAttempts

SenderWrapper = Callable[[Sender], SendsAttempts]
"""Wraps the worker's Sender by composition: how a harness (the rehearsal's
rehearsal/hooked_worker.py) adds behaviour around each attempt without touching this code."""


def worker_identity(slot: str) -> str:
    """The lease identity of this process: `slot@host:pid`, e.g. `worker-2@web1:4242`."""
    return f"{slot}@{socket.gethostname()}:{os.getpid()}"


async def serve(config: Config, slot: str, stop: asyncio.Event | None = None,
                boot: BootState | None = None, *, wrap_sender: SenderWrapper | None = None
                ) -> None:
    """Deliver jobs until `stop` is set (created and wired to signals when None).

    The lifecycle (signals, parent watch, heartbeat, store open and close) is
    :func:`hookline.shared.process.child.child_context`; the worker reports ready once the store is
    open. A database that goes away while running is retried inside the worker (workers/loop.py),
    never a reason to exit.

    Args:
        config: the process's settings.
        slot: the supervisor's name for this process, e.g. `worker-2`.
        stop: set it to stop; None: made here and set by SIGTERM/SIGINT.
        boot: where the lifecycle records how far the boot got (for the exit code).
        wrap_sender: None in production; a harness's wrapper around the Sender.

    Raises:
        StoreError, ConfigError: the database cannot be opened (StoreUnavailable: for now).
    """
    log = get_logger()
    # The store's transactions run on this loop (SqliteStore's `inline`): its sends wait
    # out a transaction of a few milliseconds, and the write lock is held for less time.
    # Its commits skip the fsync by default (`worker_synchronous`): no caller waits on them.
    async with child_context(config, slot, stop=stop, boot=boot, worker_store=True) as child:
        worker_id = worker_identity(slot)
        log.info("worker_started", worker=worker_id)
        child.mark_ready()  # the supervisor's READY=1 waits for the first of each slot
        try:
            async with Sender(timeout_s=config.attempt_timeout_s, policy=config.address_policy,
                              max_connections=config.worker_concurrency,
                              max_connection_age_s=config.max_connection_age_s) as sender:
                attempts = sender if wrap_sender is None else wrap_sender(sender)
                await Worker(child.store, config, worker_id, attempts,
                             tracing=child.tracing).run(child.stop)
        finally:
            report_write_lock(config, slot, write_lock_stats(child.store))
    log.info("worker_stopped", worker=worker_id)


def run(config: Config, slot: str, *, wrap_sender: SenderWrapper | None = None) -> int:
    """Run one worker process to completion; returns its exit code (shared/process/child.py:
    3 = permanent misconfiguration, 75 = database away, 1 = crashed). `wrap_sender`: as
    :func:`serve`'s."""
    return run_child(config, slot,
                     lambda boot: serve(config, slot, boot=boot, wrap_sender=wrap_sender),
                     failed_event="worker_failed")

"""Entry of the ingest process: open the store, serve the app until told to stop, exit with a
code the supervisor reads (shared/process/child.py: 0 clean stop, 3 misconfigured, 75 database away,
1 crashed)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from aiohttp import web

from hookline.ingest import auth
from hookline.ingest.app import build_app
from hookline.ingest.app_state import IN_FLIGHT_KEY
from hookline.ingest.group_commit import GroupCommitter
from hookline.ingest.http_limits import IngestRunner, parser_limits
from hookline.ingest.maintenance import run_maintenance, run_retention
from hookline.ingest.writer_link import WriterLink
from hookline.shared.config import Config
from hookline.shared.config_checks import listen_host_port
from hookline.shared.errors import ConfigError
from hookline.shared.logs import get_logger
from hookline.shared.process.child import BootState, child_context, run_child
from hookline.shared.process.ingest_writer import published_socket, uses_writer_process
from hookline.shared.process.lifecycle import report_write_lock
from hookline.shared.store import read_store_for, write_lock_stats

_LAST_STEP = 0.25
"""Share of graceful_timeout_s left to aiohttp's shutdown after our own drain step."""


KEEPER_SLOT = "ingest"
"""The ingest slot that runs the retention round: the first ingest process's
(supervisor/serve.py, ingest_slot)."""


class ListenError(ConfigError):
    """The listen address cannot be bound (in use, not local, not permitted)."""


async def serve(config: Config, *, ready: Callable[[int], None] | None = None,
                stop: asyncio.Event | None = None, slot: str = KEEPER_SLOT,
                boot: BootState | None = None) -> None:
    """Serve ingest on `config.listen` until `stop` is set.

    SIGTERM and SIGINT set `stop` (their handlers are removed again on return), and so does
    the parent process going away. On stop, within about `config.graceful_timeout_s`
    seconds: the listening socket closes; requests in flight (even those still receiving
    their body) finish and are answered, with `Connection: close`; then aiohttp closes the
    connections, cancelling any request still unfinished: it is never answered, so never a
    lost 2xx, and its event is dropped from the group committer's queue unless a commit
    already holds it (a retry then finds it a duplicate); then the committer stops and the
    store closes.

    Args:
        config: settings; `db`, `synchronous`, `busy_timeout_s`, `listen`,
            `graceful_timeout_s`, `max_body_bytes`, `max_header_bytes`, `max_headers` are
            read.
        ready: called with the bound port (useful with port 0) once serving.
        stop: set it to stop; a new event when None.
        slot: the supervisor's name for this process; its heartbeat file is named after it
            (the event loop touches it until the process is about to exit), and so is the
            readiness marker left once listening (shared/process/child.py). Only KEEPER_SLOT
            runs the retention round. With `config.ingest_processes` above
            1 the port is bound with SO_REUSEPORT, shared with the other ingest processes.
        boot: marked booted once listening (for :func:`run`'s exit code).

    Raises:
        StoreError: the store cannot be opened (StoreUnavailable: for now).
        ConfigError: the database URL is unsupported; ListenError when the address cannot
            be bound.
    """
    log = get_logger()
    host, port = listen_host_port(config.listen)
    async with child_context(config, slot, stop=stop, boot=boot) as child:
        store, stop = child.store, child.stop
        # Every ingest process keeps its own view of the WAL's health (/healthz) with the
        # maintenance round (checkpoints, the metric fold: repeating them costs little);
        # retention purges the whole database, so only the first process runs it.
        rounds = {"maintenance": run_maintenance(store, config.maintenance_interval_s, stop)}
        if slot == KEEPER_SLOT:
            rounds["retention"] = run_retention(store, config, stop)
        background = [asyncio.create_task(work, name=name) for name, work in rounds.items()]
        # Whole-table reads (/metrics, stats) on a second store where the first one's writes
        # would wait behind a scan of a million rows (hookline.shared.store.read_store_for).
        reader = read_store_for(config)
        link = (WriterLink(functools.partial(published_socket, config))
                if uses_writer_process(config) else None)
        try:
            if reader is not None:
                await reader.open()
            committer = GroupCommitter(store, min_interval_s=config.batch_interval_s,
                                       timeout_s=config.ingest_commit_timeout_s,
                                       create_tenants=config.tenants_auto_create,
                                       tracing=child.tracing, writer=link)
            app = build_app(store, config, committer=committer, snapshots=child.snapshots,
                            read_store=reader, tracing=child.tracing)
            # Stopping happens in two steps within graceful_timeout_s: most of it to drain
            # (below), the rest for aiohttp's own shutdown of whatever is left.
            # Request-head limits are enforced by aiohttp's parser; IngestRunner answers a
            # violation in JSON: 431, or 414 for the request line (ingest/http_limits.py).
            runner = IngestRunner(app, shutdown_timeout=config.graceful_timeout_s * _LAST_STEP,
                                  access_log=None,  # our own event logs say what happened
                                  **parser_limits(config))
            await runner.setup()
            try:
                # Several ingest processes share the port; the kernel spreads connections.
                site = web.TCPSite(runner, host, port,
                                   reuse_port=True if config.ingest_processes > 1 else None)
                try:
                    await site.start()
                except OSError as exc:
                    raise ListenError(f"cannot listen on {config.listen}: "
                                      f"{exc.strerror or exc}") from exc
                bound_port = _bound_port(runner, port)
                log.info("ingest_listening", host=host, port=bound_port)
                auth.warn_if_unconfigured(config)
                child.mark_ready()  # the supervisor's READY=1 waits for this
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
                # Cancels what is unfinished, then stops the committer (the app's cleanup_ctx).
                await runner.cleanup()
            report_write_lock(config, slot, write_lock_stats(store))  # after serving only
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if reader is not None:
                await reader.close()
            if link is not None:
                await link.close()  # after the committer's last batch: the writer may stop
    log.info("ingest_stopped")


def _bound_port(runner: web.AppRunner, requested: int) -> int:
    """The port actually bound (differs from `requested` when that was 0)."""
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return requested


def run(config: Config, slot: str = KEEPER_SLOT) -> int:
    """Run the ingest process to completion (:func:`hookline.shared.process.child.run_child`).

    Args:
        config: settings for this process.
        slot: the supervisor's name for this process, logged on every line.

    Returns:
        0 after a clean stop; BOOT_ERROR_EXIT (3) for a permanent misconfiguration at boot
        (unopenable database, address that cannot be bound), so the supervisor stops;
        TRANSIENT_EXIT (75) when the database is away, CRASH_EXIT (1) for anything else, so
        the supervisor respawns it.
    """
    return run_child(config, slot, lambda boot: serve(config, slot=slot, boot=boot),
                     failed_event="ingest_failed")

"""The ingest writer process (`ingest_writer = process`, SQLite only): commits every ingest
process's batches of events, so that their HTTP side never waits for the GIL behind a
database thread.

`python -P -m hookline.ingest.writer_process --slot ingest-writer`, started by the
supervisor before the ingest processes. It listens on a Unix stream socket in the runtime
folder (ingest/writer_link.py: framing, the peer's user id checked), takes each batch an
ingest process sends, and answers it with one result per event once the COMMIT that holds
them has returned. Batches that arrive from several ingest processes while a commit runs
share the next transaction. Its store runs each transaction on this event loop's thread
(no database thread), with the `synchronous` setting of every event's commit.

On stop (SIGTERM, or the supervisor going away) it stops taking connections and serves the
ones it has until the ingest processes close them (they stop at the same time and finish
their requests first), for at most `graceful_timeout_s`. Killed or crashed, the batches in
flight get 503 from their ingest process (outcome unknown; the sender's retry is
deduplicated) and the supervisor respawns it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hookline.ingest.writer_link import (
    PeerRefused,
    check_peer,
    encode,
    events_from_wire,
    read_message,
    results_to_wire,
)
from hookline.shared.config import Config
from hookline.shared.errors import StoreError, StoreUnavailable
from hookline.shared.faults import is_transient
from hookline.shared.logs import get_logger
from hookline.shared.models import NewEvent, StoreResult
from hookline.shared.process.child import BootState, child_context, exit_process, run_child
from hookline.shared.process.ingest_writer import (
    WRITER_SLOT,
    make_socket_path,
    publish_socket,
    withdraw_socket,
)
from hookline.shared.process.lifecycle import (
    child_config_or_exit,
    report_write_lock,
    runtime_dir,
)
from hookline.shared.store import Store, write_lock_stats

PROBE_WRITE_S = 1.5
"""Longest a readiness probe waits for the writer's store to take a write, seconds (under
the 2 s ingest's /readyz gives the whole probe)."""


@dataclass(slots=True)
class _Waiting:
    events: list[NewEvent]
    create_tenants: bool
    answer: asyncio.Future[list[StoreResult]]


class SharedCommits:
    """Batches from every connection, committed together: whatever arrived while the last
    commit ran goes into the next one (one `add_events` call per `create_tenants` value).

    Args:
        store: the writer's open store.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._waiting: list[_Waiting] = []
        self._arrived = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="shared-commits")

    async def submit(self, events: list[NewEvent], create_tenants: bool
                     ) -> list[StoreResult]:
        """Commit `events`; their results in order, once committed.

        Raises:
            whatever the store's `add_events` raised for the transaction holding them.
        """
        answer: asyncio.Future[list[StoreResult]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(events, create_tenants, answer))
        self._arrived.set()
        return await answer

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while self._waiting:
                flag = self._waiting[0].create_tenants
                batch = [w for w in self._waiting if w.create_tenants == flag]
                self._waiting = [w for w in self._waiting if w.create_tenants != flag]
                await self._commit(batch, flag)

    async def _commit(self, batch: list[_Waiting], create_tenants: bool) -> None:
        events = [event for waiting in batch for event in waiting.events]
        try:
            results: Sequence[StoreResult] = await self.store.add_events(
                events, create_tenants=create_tenants)
        except Exception as exc:  # noqa: BLE001  (every fault goes back to its batches' senders)
            for waiting in batch:
                if not waiting.answer.done():
                    waiting.answer.set_exception(exc)
            return
        start = 0
        for waiting in batch:
            if not waiting.answer.done():  # its connection went away meanwhile
                waiting.answer.set_result(list(results[start:start + len(waiting.events)]))
            start += len(waiting.events)

    async def stop(self) -> None:
        """Stop committing; batches still waiting are answered with StoreUnavailable."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        for waiting in self._waiting:
            if not waiting.answer.done():
                waiting.answer.set_exception(StoreUnavailable("the ingest writer is stopping"))
        self._waiting.clear()


def sendable_fault(exc: Exception) -> Exception:
    """`exc` as it can travel back to the ingest process: itself when it survives a pickle
    round trip, else a StoreUnavailable (transient) or StoreError with its text, so the
    ingest side still answers 503 or 500 as it would have in-process."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001  (a fault's own pickling may raise anything)
        return (StoreUnavailable(str(exc)) if is_transient(exc)
                else StoreError(f"{type(exc).__name__}: {exc}"))
    return exc


async def serve(config: Config, *, stop: asyncio.Event | None = None, slot: str = WRITER_SLOT,
                boot: BootState | None = None) -> None:
    """Serve ingest processes' batches on the writer socket until `stop` is set (module
    docstring).

    Raises:
        StoreError: the store cannot be opened (StoreUnavailable: for now).
        ConfigError: the database URL is unsupported.
        OSError: the socket cannot be bound.
    """
    log = get_logger()
    async with child_context(config, slot, stop=stop, boot=boot, inline_store=True) as child:
        connections: set[asyncio.Task[None]] = set()
        commits: SharedCommits | None = None
        server: asyncio.Server | None = None
        path: Path | None = None

        async def serve_connection(reader: asyncio.StreamReader,
                                   writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                connections.add(task)
            try:
                check_peer(writer.get_extra_info("socket"))
                assert commits is not None  # made before the server that calls this
                await _answer_batches(reader, writer, commits)
            except (PeerRefused, OSError, ValueError) as exc:
                log.warning("ingest_writer_connection_dropped", error=str(exc))
            finally:
                if task is not None:
                    connections.discard(task)
                writer.close()

        try:
            commits = SharedCommits(child.store)
            runtime_dir(config).mkdir(parents=True, exist_ok=True)
            path = make_socket_path(config)
            server = await asyncio.start_unix_server(serve_connection, str(path))
            path.chmod(0o600)
            publish_socket(config, path)
            log.info("ingest_writer_listening", path=str(path))
            child.mark_ready()
            await child.stop.wait()
            server.close()  # no new connections; ingest processes finish and close theirs
            if connections:
                _, unfinished = await asyncio.wait(set(connections),
                                                   timeout=config.graceful_timeout_s)
                for task in unfinished:
                    task.cancel()
                await asyncio.gather(*unfinished, return_exceptions=True)
        finally:  # also after a failed start: nothing of it is left behind
            if server is not None:
                server.close()
            if commits is not None:
                await commits.stop()
            if path is not None:
                withdraw_socket(config, path)
        report_write_lock(config, slot, write_lock_stats(child.store))
    log.info("ingest_writer_stopped")


async def _answer_batches(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          commits: SharedCommits) -> None:
    """Answer one connection's batches, one at a time, until it closes."""
    while True:
        try:
            message = await read_message(reader)
        except asyncio.IncompleteReadError:
            return  # the ingest process closed its end
        create_tenants, events = _batch(message)
        if not events:  # a readiness probe: answered between commits
            writer.write(encode(await _writable(commits.store)))
            try:
                await writer.drain()
            except ConnectionError:
                return  # a probe that gave up waiting (a stopped writer's backlog): quietly
            continue
        try:
            reply: tuple[str, object] = (
                "ok", results_to_wire(await commits.submit(events, bool(create_tenants))))
        except Exception as exc:  # noqa: BLE001  (the sender decides: 503 or 500, as in-process)
            reply = ("raised", sendable_fault(exc))
        writer.write(encode(reply))
        await writer.drain()


async def _writable(store: Store) -> tuple[str, object]:
    """A readiness probe's answer: whether this writer's own store takes writes (the one
    that commits the events), within PROBE_WRITE_S."""
    try:
        await asyncio.wait_for(store.check_writable(), PROBE_WRITE_S)
    except (StoreError, TimeoutError) as exc:
        return "raised", StoreUnavailable(
            "the ingest writer's database is not writable: "
            + (str(exc) or f"no answer within {PROBE_WRITE_S:g} s"))
    return "ok", []


def _batch(message: object) -> tuple[bool, list[NewEvent]]:
    """A frame's (create_tenants, events).

    Raises:
        ValueError: it is not one (the connection is then dropped).
    """
    if isinstance(message, tuple) and len(message) == 2:
        return bool(message[0]), events_from_wire(message[1])
    raise ValueError(f"a frame that is no batch of events ({type(message).__name__})")


def run(config: Config, slot: str = WRITER_SLOT) -> int:
    """Run the writer process to completion (the exit codes of
    :func:`hookline.shared.process.child.run_child`)."""
    return run_child(config, slot, lambda boot: serve(config, slot=slot, boot=boot),
                     failed_event="ingest_writer_failed")


def main() -> None:
    """`python -m hookline.ingest.writer_process [--config-json JSON] [--slot NAME]`."""
    parser = argparse.ArgumentParser(prog="python -m hookline.ingest.writer_process")
    parser.add_argument("--config-json", help="the Config as Config.to_json() wrote it "
                        "(default: the HOOKLINE_CONFIG_JSON variable)")
    parser.add_argument("--slot", default=WRITER_SLOT, help="process name logged on every line")
    args = parser.parse_args()
    exit_process(run(child_config_or_exit(args.config_json, args.slot), args.slot))


if __name__ == "__main__":
    main()

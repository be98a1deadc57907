"""The ingest writer process's two ends (`ingest_writer = process`): ingest/writer_process.py
serving on a real Unix socket, in this test's event loop, with a real SQLite file; the
links of ingest processes (ingest/writer_link.py) sending it batches. The whole service
with a writer that is SIGKILLed: tests/acceptance/test_serve_production.py."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from hookline.ingest.writer_link import (
    PeerRefused,
    WriterAway,
    WriterLink,
    check_peer,
    encode,
    events_from_wire,
    events_to_wire,
    results_from_wire,
    results_to_wire,
)
from hookline.ingest.writer_process import sendable_fault, serve
from hookline.shared.config import Config
from hookline.shared.errors import InvalidSetting, StoreError, StoreUnavailable
from hookline.shared.models import Accepted, Duplicate, NewEvent, TenantRefused
from hookline.shared.process.ingest_writer import (
    address_file,
    published_socket,
    uses_writer_process,
)
from hookline.shared.process.lifecycle import runtime_dir
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[Config]:
    """The writer serving a fresh database with one destination; yields its Config."""
    db = str(tmp_path / "w.db")
    store = SqliteStore(db)
    await store.open()
    await store.add_destination(name="d", url="http://127.0.0.1:9/x",
                                secret="whsec_" + "A" * 32, event_types=["*"], max_in_flight=5)
    await store.close()
    config = replace(Config(), db=db, runtime_dir=str(tmp_path / "run"),
                     ingest_writer="process")
    stop = asyncio.Event()
    task = asyncio.create_task(serve(config, stop=stop))
    for _ in range(500):
        if published_socket(config) is not None:
            break
        assert not task.done(), task.exception()
        await asyncio.sleep(0.01)
    path = published_socket(config)
    assert path is not None and path.exists()
    yield config
    stop.set()
    await asyncio.wait_for(task, 10)
    assert not path.exists(), "the writer removes its socket on stop"
    assert not address_file(config).exists(), "and its announcement"


def link_to(config: Config) -> WriterLink:
    """An ingest process's link to the writer `config` runs."""
    return WriterLink(lambda: published_socket(config))


async def test_batches_of_two_ingest_processes_are_committed_with_their_jobs(
        writer: Config) -> None:
    first, second = link_to(writer), link_to(writer)
    try:
        one, two = await asyncio.gather(
            first.add_events([new_event("a"), new_event("b"), new_event("a")]),
            second.add_events([new_event("c"), new_event("b")]))
        again = await first.add_events([new_event("c")])
    finally:
        await first.close()
        await second.close()
    assert [type(r) for r in one] == [Accepted, Accepted, Duplicate]
    assert one[0].event_id == one[2].event_id  # the same id twice in one batch
    assert isinstance(two[0], Accepted)
    assert all(len(r.job_ids) == 1 for r in (*one[:2], two[0]) if isinstance(r, Accepted))
    # `b` from both links: one stored, whichever committed first
    b_ids = {r.event_id for r in (one[1], two[1])}
    assert len(b_ids) == 1
    assert isinstance(again[0], Duplicate) and again[0].event_id == two[0].event_id
    store = SqliteStore(writer.db)
    await store.open()
    try:
        jobs = await store.list_jobs(limit=100)
    finally:
        await store.close()
    assert len(jobs) == 3  # a, b, c: one job each, committed before the answers


async def test_a_link_with_no_writer_listening_is_a_transient_fault(tmp_path: Path) -> None:
    link = WriterLink(lambda: tmp_path / "none.sock")
    with pytest.raises(WriterAway) as raised:
        await link.add_events([new_event("x")])
    assert isinstance(raised.value, StoreUnavailable)  # ingest answers 503, the sender retries
    with pytest.raises(WriterAway):
        await link.probe()


async def test_a_batch_cancelled_mid_exchange_leaves_the_next_one_a_fresh_connection(
        writer: Config, tmp_path: Path) -> None:
    """A commit timeout cancels the link's call between its send and the answer: the stream
    may then hold the late answer, which must not be read as the next batch's."""
    silent_path = tmp_path / "silent.sock"
    received: list[bytes] = []
    answered = asyncio.Event()  # never set: the fake writer keeps its answer

    async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(1 << 16))
        await answered.wait()
        writer.close()

    server = await asyncio.start_unix_server(never_answers, str(silent_path))
    where = [silent_path]
    link = WriterLink(lambda: where[0])
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(link.add_events([new_event("late")]), 0.3)
        with pytest.raises(TimeoutError):  # a stopped writer accepts, and never answers
            await asyncio.wait_for(link.probe(), 0.3)
        where[0] = published_socket(writer)  # type: ignore[assignment]  (the real writer)
        results = await link.add_events([new_event("next")])
    finally:
        await link.close()
        answered.set()
        server.close()
        await server.wait_closed()
    assert received and isinstance(results[0], Accepted)


class TwoArguments(StoreUnavailable):
    """A fault whose pickle cannot be loaded again (its __init__ takes two arguments)."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


class Plain(StoreError):
    """A fault that pickles."""


def test_a_fault_that_cannot_travel_back_keeps_its_transience() -> None:
    busy = sendable_fault(TwoArguments("database", "locked"))
    assert type(busy) is StoreUnavailable and str(busy) == "database: locked"
    plain = Plain("broken")
    assert sendable_fault(plain) is plain  # pickles: goes back as it is
    invalid = sendable_fault(InvalidSetting("url", "x"))  # its pickle does not load again
    assert type(invalid) is StoreError and str(invalid) == "InvalidSetting: url: x"


def test_a_peer_of_another_user_is_refused() -> None:
    """Pickle is safe on the writer's socket only because both ends refuse a peer of another
    user id: a process running as `nobody` connects to a socket in a folder it may use."""
    assert os.geteuid() == 0, "runs as root, as `make test` does (runuser)"
    folder = Path(tempfile.mkdtemp(prefix="hookline-peer-", dir="/tmp"))  # pytest's is 0700
    os.chmod(folder, 0o777)
    path = folder / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen()
    server.settimeout(10)
    connect = (f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); "
               "s.recv(1)")
    # the system interpreter: a virtual environment under /root is not reachable by nobody
    stranger = subprocess.Popen(["runuser", "-u", "nobody", "--", SYSTEM_PYTHON, "-c", connect],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        peer, _ = server.accept()
        with pytest.raises(PeerRefused, match="uid"):
            check_peer(peer)
        peer.close()
        own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        own.connect(str(path))
        mine, _ = server.accept()
        check_peer(mine)  # this process's own user: accepted
        mine.close()
        own.close()
    finally:
        stranger.wait(10)
        server.close()
        shutil.rmtree(folder)


def test_the_setting_applies_to_sqlite_only_in_any_case(tmp_path: Path) -> None:
    on_sqlite = replace(Config(), db=str(tmp_path / "x.db"), ingest_writer="process")
    assert uses_writer_process(on_sqlite)
    assert uses_writer_process(replace(on_sqlite, ingest_writer="Process"))  # as checked
    assert not uses_writer_process(replace(on_sqlite, ingest_writer="thread"))
    assert not uses_writer_process(replace(on_sqlite, db="postgresql://h/db"))


async def test_a_runtime_folder_too_long_for_a_socket_gets_a_private_folder(
        tmp_path: Path) -> None:
    """A Unix socket's path holds 108 bytes: past that the writer listens in a folder of
    its own in the temp folder (0700, a random name another user cannot take first), and
    says where in the runtime folder; it removes both when it stops, and a restarted writer
    removes what a killed one left."""
    db = str(tmp_path / "w.db")
    store = SqliteStore(db)
    await store.open()
    await store.close()
    config = replace(Config(), db=db, runtime_dir=str(tmp_path / ("d" * 120)),
                     ingest_writer="process")
    left_by_a_killed_writer = Path(tempfile.mkdtemp(prefix="hookline-writer-")) / "s.sock"
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(left_by_a_killed_writer))  # a real socket, as a killed writer leaves
    leftover.close()
    runtime_dir(config).mkdir()
    address_file(config).write_text(f"{left_by_a_killed_writer}\n")
    stop = asyncio.Event()
    task = asyncio.create_task(serve(config, stop=stop))
    try:
        for _ in range(500):
            if published_socket(config) not in (None, left_by_a_killed_writer):
                break
            assert not task.done(), task.exception()
            await asyncio.sleep(0.01)
        path = published_socket(config)
        assert path is not None and len(str(path)) < 100
        assert not left_by_a_killed_writer.parent.exists()
        assert path.parent.parent == Path(tempfile.gettempdir())
        assert path.parent.stat().st_mode & 0o777 == 0o700
        link = link_to(config)
        try:
            assert isinstance((await link.add_events([new_event("x")]))[0], Accepted)
            await asyncio.wait_for(link.probe(), 5)
        finally:
            await link.close()
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert not path.parent.exists() and not address_file(config).exists()


async def test_a_link_reconnects_to_a_respawned_writer_without_failing_a_batch(
        tmp_path: Path) -> None:
    """An idle link whose writer was stopped (or killed) and started again sends its next
    batch to the new writer: no 503 for a batch that never reached one."""
    db = str(tmp_path / "w.db")
    store = SqliteStore(db)
    await store.open()
    await store.close()
    # graceful_timeout_s: the stopping writer waits that long for the idle link, then
    # closes its connection, as a killed one's is closed
    config = replace(Config(), db=db, runtime_dir=str(tmp_path / "run"),
                     ingest_writer="process", graceful_timeout_s=0.2)

    async def start() -> tuple[asyncio.Event, asyncio.Task[None]]:
        stop = asyncio.Event()
        task = asyncio.create_task(serve(config, stop=stop))
        while published_socket(config) is None:
            assert not task.done(), task.exception()
            await asyncio.sleep(0.01)
        return stop, task

    link = link_to(config)
    try:
        stop, task = await start()
        await link.add_events([new_event("before")])
        stop.set()
        await asyncio.wait_for(task, 10)
        stop, task = await start()
        await asyncio.sleep(0.05)  # the old connection's end has arrived
        results = await link.add_events([new_event("after")])
        stop.set()
        await asyncio.wait_for(task, 10)
    finally:
        await link.close()
    assert isinstance(results[0], Accepted)


async def test_a_malformed_frame_drops_its_connection_and_the_writer_serves_on(
        writer: Config) -> None:
    path = published_socket(writer)
    assert path is not None
    overflowing = b"\x80\x05\x95" + (2**64 - 1).to_bytes(8, "little")  # OverflowError
    garbage = (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01x", encode(5),
               encode((False, [1, 2])), b"\x7f\xff\xff\xff",
               len(overflowing).to_bytes(4, "big") + overflowing)
    with capture_logs() as logs:
        for frame in garbage:
            reader, stream = await asyncio.open_unix_connection(str(path))
            stream.write(frame)
            await stream.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the writer
            stream.close()
    dropped = [e for e in logs if e["event"] == "ingest_writer_connection_dropped"]
    assert len(dropped) == len(garbage) and all(e["log_level"] == "warning" for e in dropped)
    link = link_to(writer)
    try:
        assert isinstance((await link.add_events([new_event("fine")]))[0], Accepted)
    finally:
        await link.close()


def test_a_stale_address_naming_what_is_no_longer_ours_is_left_alone(tmp_path: Path) -> None:
    """A writer killed uncleanly leaves its address file; after a reboot empties the temp
    folder, another user may make something of the private folder's old name. The next
    writer touches none of it (a file there, a folder of another user, a link to a folder
    of ours) and starts in a new private folder."""
    assert os.geteuid() == 0, "runs as root, as `make test` does (chown to nobody)"
    db = str(tmp_path / "w.db")
    config = replace(Config(), db=db, runtime_dir=str(tmp_path / ("d" * 120)),
                     ingest_writer="process")
    runtime_dir(config).mkdir()
    temp = Path(tempfile.gettempdir())
    a_file = Path(tempfile.mkstemp(prefix="hookline-writer-", dir=temp)[1])
    others = Path(tempfile.mkdtemp(prefix="hookline-writer-", dir=temp))
    (others / "s.sock").write_text("another user's")
    os.chown(others, 65534, 65534)
    os.chown(others / "s.sock", 65534, 65534)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "s.sock").write_text("ours, not a socket")
    link = temp / f"hookline-writer-{os.getpid()}-link"
    link.symlink_to(victim)
    try:
        for stale in (a_file, others, link):
            address_file(config).write_text(f"{stale / 's.sock'}\n")
            asyncio.run(_serve_one_event(config, stale / "s.sock"))
        assert a_file.is_file() and (others / "s.sock").read_text() == "another user's"
        assert (victim / "s.sock").read_text() == "ours, not a socket" and link.is_symlink()
    finally:
        a_file.unlink()
        shutil.rmtree(others)
        link.unlink()


async def _serve_one_event(config: Config, stale: Path) -> None:
    """Start the writer (announced elsewhere than `stale`), commit one event through it,
    stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(serve(config, stop=stop))
    while published_socket(config) in (stale, None):
        assert not task.done(), task.exception()
        await asyncio.sleep(0.01)
    link = link_to(config)
    try:
        assert isinstance((await link.add_events([new_event(str(stale))]))[0], Accepted)
    finally:
        await link.close()
        stop.set()
        await asyncio.wait_for(task, 10)


def test_events_and_results_cross_the_wire_unchanged() -> None:
    """Every field of an event and every kind of result survives the tuples the frames
    carry; anything else is a ValueError (its connection is dropped)."""
    event = NewEvent(source="github", source_event_id="e-1", type="push", body=b"{}",
                     forwarded_headers=(("x-github-event", "push"),), tenant="acme",
                     trace_context="00-abc-def-01", schema_problem="/data/x")
    assert events_from_wire(events_to_wire([event, new_event("plain")])) == [
        event, new_event("plain")]
    results = [Accepted(event_id=1, message_id="msg_1", job_ids=(4, 5)),
               Duplicate(event_id=2, message_id="msg_2"),
               TenantRefused(tenant="gone", reason="tenant_not_found")]
    assert results_from_wire(results_to_wire(results)) == results
    for rows in ("x", [1], [("a", 1)], [("z", 1, 2)], ["a123"], [("a", "1", "m", ())],
                 [("r", "t", "no_reason")], [()]):
        with pytest.raises(ValueError):
            results_from_wire(rows)
    for rows in ({}, [("too", "short")], ["abcdefgh"],
                 [("api", "e", "t", "not bytes", (), "_default", None, None)]):
        with pytest.raises(ValueError):
            events_from_wire(rows)

"""The ingest writer process's two ends (`ingest_writer = process`): ingest/writer_process.py
serving on a real Unix socket, in this test's event loop, with a real SQLite file; the
links of ingest processes (ingest/writer_link.py) sending it batches. The whole service
with a writer that is SIGKILLed: tests/acceptance/test_serve_production.py."""

from __future__ import annotations

import asyncio
import os
import pickle
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from hookline.ingest.writer_link import PeerRefused, WriterAway, WriterLink, check_peer
from hookline.ingest.writer_process import sendable_fault, serve
from hookline.shared.config import Config
from hookline.shared.errors import InvalidSetting, StoreError, StoreUnavailable
from hookline.shared.models import Accepted, Duplicate
from hookline.shared.process.ingest_writer import uses_writer_process, writer_socket_path
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
    path = writer_socket_path(config)
    for _ in range(500):
        if path.exists():
            break
        assert not task.done(), task.exception()
        await asyncio.sleep(0.01)
    yield config
    stop.set()
    await asyncio.wait_for(task, 10)
    assert not path.exists(), "the writer removes its socket on stop"


async def test_batches_of_two_ingest_processes_are_committed_with_their_jobs(
        writer: Config) -> None:
    first, second = (WriterLink(writer_socket_path(writer)) for _ in range(2))
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
    link = WriterLink(tmp_path / "none.sock")
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
    link = WriterLink(silent_path)
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(link.add_events([new_event("late")]), 0.3)
        link.path = writer_socket_path(writer)  # the real writer from here on
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
    assert isinstance(pickle.loads(pickle.dumps(sendable_fault(InvalidSetting("url", "x")))),
                      Exception)


def test_a_peer_of_another_user_is_refused() -> None:
    """Pickle is safe on the writer's socket only because both ends refuse a peer of another
    user id: a process running as `nobody` connects to a socket in a folder it may use."""
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


def test_the_setting_applies_to_sqlite_only_and_the_socket_path_fits(tmp_path: Path) -> None:
    on_sqlite = replace(Config(), db=str(tmp_path / "x.db"), ingest_writer="process")
    assert uses_writer_process(on_sqlite)
    assert not uses_writer_process(replace(on_sqlite, ingest_writer="thread"))
    assert not uses_writer_process(replace(on_sqlite, db="postgresql://h/db"))
    deep = replace(on_sqlite, runtime_dir=str(tmp_path / ("d" * 120)))
    assert len(str(writer_socket_path(deep))) < 100  # a Unix socket's path holds 108 bytes
    assert writer_socket_path(deep) != writer_socket_path(on_sqlite)

"""rehearsal/ingest_floor.py, the least durable ingest `hookline bench --scenario ingest`
measures: what it accepts, the writer socket's batches, and that a commit stores each new
event with its jobs and a duplicate once (a real SQLite file). Its processes are run end to
end by tests/acceptance/test_bench_tenant_scenarios.py."""

from __future__ import annotations

import asyncio
import socket
import sqlite3

import pytest

from hookline.rehearsal.ingest_floor import (
    Event,
    FloorStore,
    GroupCommit,
    encode_batch,
    parse_event,
    read_batch,
    waking,
)
from hookline.shared.spacing import FILLED_ENOUGH


def test_an_event_needs_a_json_object_with_a_string_id_and_type():
    body = b'{"id": "e1", "type": "invoice.paid", "data": {"n": 1}}'
    assert parse_event(body) == Event("e1", "invoice.paid", body)
    for refused in (b"not json", b'["e1"]', b'{"type": "t"}', b'{"id": "e1", "type": 3}',
                    b'{"id": 1, "type": "t"}'):
        assert parse_event(refused) is None, refused


def test_a_batch_crosses_the_writer_socket_unchanged():
    events = [Event("e1", "invoice.paid", b'{"a": 1}'),
              Event("é-2", "t", bytes(range(256)) * 7), Event("", "", b"")]

    async def round_trip() -> list[Event]:
        reader = asyncio.StreamReader()
        reader.feed_data(encode_batch(events) + encode_batch(events[:1]))
        reader.feed_eof()
        first = await read_batch(reader)
        assert await read_batch(reader) == events[:1]
        return first

    assert asyncio.run(round_trip()) == events


def test_a_commit_stores_new_events_with_their_jobs_and_a_duplicate_once(tmp_path):
    path = str(tmp_path / "floor.db")
    store = FloorStore(path, jobs_per_event=3)
    first = Event("e1", "t", b"{}")
    assert store.write([first, Event("e2", "t", b"{}"), first]) == b"\x01\x01\x00"
    assert store.write([Event("e2", "t", b"{}")]) == b"\x00"
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM events").fetchone() == (2,)
    assert conn.execute("SELECT event_id, COUNT(*) FROM jobs GROUP BY event_id").fetchall() \
        == [(1, 3), (2, 3)]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_the_group_commit_answers_each_waiter_with_its_own_events():
    """Batches queued while a write runs go into the next write together; each waiter gets
    the bytes of its own events, and a failed write fails every waiter of it."""
    writes: list[list[str]] = []

    async def scenario() -> None:
        gate = asyncio.Event()

        async def write(events: list[Event]) -> bytes:
            writes.append([e.event_id for e in events])
            await gate.wait()
            if any(e.event_id == "bad" for e in events):
                raise sqlite3.OperationalError("disk I/O error")
            return bytes(e.event_id.startswith("new") for e in events)

        commits = GroupCommit(lambda events: asyncio.ensure_future(write(events)))
        first = asyncio.create_task(commits.submit([Event("new-1", "t", b"")]))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the first write has started and waits on the gate
        second = asyncio.create_task(commits.submit([Event("new-2", "t", b""),
                                                     Event("old", "t", b"")]))
        third = asyncio.create_task(commits.submit([Event("new-3", "t", b"")]))
        await asyncio.sleep(0)
        gate.set()
        assert await first == b"\x01"
        assert await second == b"\x01\x00" and await third == b"\x01"
        with pytest.raises(sqlite3.OperationalError):
            await commits.submit([Event("bad", "t", b"")])

    asyncio.run(scenario())
    assert writes == [["new-1"], ["new-2", "old", "new-3"], ["bad"]]


def test_a_waiter_that_went_away_does_not_stop_the_group_commit():
    """A request cancelled while its batch is written (its client went away) is skipped
    when the answers are handed out; later submissions are still written and answered."""

    async def scenario() -> None:
        gate = asyncio.Event()

        async def write(events: list[Event]) -> bytes:
            await gate.wait()
            return b"\x01" * len(events)

        commits = GroupCommit(lambda events: asyncio.ensure_future(write(events)))
        gone = asyncio.create_task(commits.submit([Event("e1", "t", b"")]))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # its write has started and waits on the gate
        gone.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert await asyncio.wait_for(commits.submit([Event("e2", "t", b"")]), 5) == b"\x01"

    asyncio.run(scenario())


def test_with_spacing_a_trickle_waits_for_the_interval_and_a_full_batch_does_not():
    """As hookline's `batch_interval_s`: a write that follows the last one closely starts
    no sooner than the interval after it, unless FILLED_ENOUGH events wait."""
    starts: list[float] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        async def write(events: list[Event]) -> bytes:
            starts.append(loop.time())
            return b"\x01" * len(events)

        trickle = GroupCommit(lambda events: asyncio.ensure_future(write(events)), 0.3)
        await trickle.submit([Event("e1", "t", b"")])
        await trickle.submit([Event("e2", "t", b"")])
        # The spacing runs from when the first write began, just before its task ran (a
        # loaded machine delays that task by some milliseconds); without it, ~0.
        assert starts[1] - starts[0] >= 0.25
        full = GroupCommit(lambda events: asyncio.ensure_future(write(events)), 30.0)
        await full.submit([Event("e3", "t", b"")])
        queued = [asyncio.create_task(full.submit([Event("f0", "t", b"")]))]
        await asyncio.sleep(0.05)  # f0 waits out the 30 s spacing
        queued += [asyncio.create_task(full.submit([Event(f"f{n}", "t", b"")]))
                   for n in range(1, FILLED_ENOUGH)]
        assert await asyncio.wait_for(asyncio.gather(*queued), 10) == [b"\x01"] * FILLED_ENOUGH

    asyncio.run(scenario())
    assert len(starts) == 4


def test_a_commit_that_stored_an_event_wakes_the_delivery_floor(tmp_path):
    """`--wake`: one datagram after a commit that stored an event, none after a commit of
    duplicates only, and no error when nothing listens."""
    wake_path = str(tmp_path / "wake")
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.setblocking(False)
    write = waking(FloorStore(str(tmp_path / "floor.db"), 3).write, sender, wake_path)
    assert write([Event("e0", "t", b"{}")]) == b"\x01"  # nobody listening yet: no error
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(wake_path)
    listener.settimeout(5)
    assert write([Event("e1", "t", b"{}")]) == b"\x01"
    assert listener.recv(16) == b"w"
    assert write([Event("e1", "t", b"{}")]) == b"\x00"
    listener.settimeout(0.2)
    with pytest.raises(TimeoutError):
        listener.recv(16)
    listener.close()
    sender.close()

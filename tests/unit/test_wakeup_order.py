"""A commit's wake-up pokes ONE listening worker: the first in name order that takes it. A
worker that cannot take the work passes it on to the next, each other listener at most once.
Real datagram sockets in a temporary directory."""

from __future__ import annotations

import asyncio
import socket
import tempfile
from pathlib import Path

from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.store.wakeup import WakeListener, WakeNotifier, wake_dir_for


def _bound(directory: Path, names: str) -> list[socket.socket]:
    sockets = []
    for name in names:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind(str(directory / f"{name}.sock"))
        sockets.append(sock)
    return sockets


def _received(sock: socket.socket) -> list[int]:
    """The pass counts of the wake-ups waiting on `sock`, emptying it."""
    counts = []
    while True:
        try:
            counts += list(sock.recv(64))
        except BlockingIOError:
            return counts


def test_a_commit_pokes_only_the_first_listener_with_a_pass_for_each_other(tmp_path: Path):
    a, b, c = _bound(tmp_path, "abc")
    notifier = WakeNotifier(tmp_path)
    try:
        for _ in range(3):
            notifier.notify()
        assert (_received(a), _received(b), _received(c)) == ([2, 2, 2], [], [])
    finally:
        notifier.close()
        for sock in (a, b, c):
            sock.close()


def test_a_gone_or_full_listener_is_skipped_for_the_next(tmp_path: Path):
    a, b, c = _bound(tmp_path, "abc")
    notifier = WakeNotifier(tmp_path)
    try:
        a.close()  # its process died: the socket file is left behind
        notifier.notify()
        assert (_received(b), _received(c)) == ([1], [])
        assert not (tmp_path / "a.sock").exists()  # removed as stale
        sent = 0
        while True:  # b stops reading (hung): its queue fills up
            try:
                notifier._sock.sendto(b"\x00", str(tmp_path / "b.sock"))
                sent += 1
            except BlockingIOError:
                break
        notifier.notify()
        assert _received(c) == [0]  # the last one: no pass left
        assert len(_received(b)) == sent
    finally:
        notifier.close()
        for sock in (a, b, c):
            sock.close()


def test_a_pass_on_visits_each_other_listener_once_in_a_ring(tmp_path: Path):
    a, b, c, d = _bound(tmp_path, "abcd")
    notifier = WakeNotifier(tmp_path)
    try:
        notifier.pass_on(str(tmp_path / "c.sock"), 3)
        assert [_received(s) for s in (a, b, c, d)] == [[], [], [], [2]]
        notifier.pass_on(str(tmp_path / "d.sock"), 2)  # wraps around to the first
        assert [_received(s) for s in (a, b, c, d)] == [[1], [], [], []]
        notifier.pass_on(str(tmp_path / "b.sock"), 0)  # every other one was visited
        assert [_received(s) for s in (a, b, c, d)] == [[], [], [], []]
    finally:
        notifier.close()
        for sock in (a, b, c, d):
            sock.close()


async def test_a_listener_hands_over_the_passes_of_the_wake_up_it_returned(tmp_path: Path):
    listener = WakeListener(tmp_path)
    notifier = WakeNotifier(tmp_path)
    try:
        assert await listener.wait(0.01) is False
        assert listener.take_passes() == 0
        notifier._sock.sendto(b"\x03", str(listener.path))
        notifier._sock.sendto(b"\x01", str(listener.path))
        await asyncio.sleep(0.01)
        assert await listener.wait(1.0) is True
        assert listener.take_passes() == 3  # the most any of them had
        assert listener.take_passes() == 0  # passed on once only
    finally:
        notifier.close()
        listener.close()


async def test_the_last_listener_out_removes_the_wake_up_directory(tmp_path: Path):
    """A store's wake-up directory (in the temp dir when the database's path is long) is
    removed by the last listener that closes, never while another still listens; a listener
    made after that makes the directory again, and a notifier finds it."""
    directory = tmp_path / "db.wake"
    first, second = WakeListener(directory), WakeListener(directory)
    first.close(remove_empty_directory=True)
    assert directory.is_dir()  # the second one still listens there
    second.close(remove_empty_directory=True)
    assert not directory.exists()

    third = WakeListener(directory)
    notifier = WakeNotifier(directory)
    try:
        notifier.notify()
        assert await third.wait(1.0) is True
    finally:
        notifier.close()
        third.close()
    assert directory.is_dir()  # kept unless asked


async def test_a_store_with_a_long_path_leaves_no_wake_up_directory_behind(tmp_path: Path):
    """A database path too long for a socket beside it puts the wake-ups in the temp dir;
    closing the store removes that directory."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "hookline.db")
    directory = wake_dir_for(path)
    assert directory.parent == Path(tempfile.gettempdir())
    async with SqliteStore(path) as store:
        assert await store.wait_for_jobs(0.01) is False
        assert directory.is_dir()
    assert not directory.exists()

"""The wake-up after a commit pokes every listening worker, starting one further on each
time, so no worker process is always woken (and so claims) first. Real datagram sockets;
the order is read from the kernel's receive timestamps."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from hookline.shared.store.wakeup import WakeNotifier

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; Python 3.11 lacks it


def _received_at_ns(sock: socket.socket) -> int:
    """When the kernel received the pending wake-up byte (SO_TIMESTAMPNS), nanoseconds."""
    _, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(16))
    [(_, _, data)] = ancillary
    seconds, nanos = struct.unpack("qq", data[:16])
    return seconds * 1_000_000_000 + nanos


def test_each_notify_pokes_a_different_listener_first(tmp_path: Path):
    listeners = [socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(3)]
    notifier = WakeNotifier(tmp_path)
    try:
        for sock, name in zip(listeners, "abc", strict=True):
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.bind(str(tmp_path / f"{name}.sock"))
        firsts = []
        for _ in range(3):
            notifier.notify()
            times = {sock.getsockname(): _received_at_ns(sock) for sock in listeners}
            firsts.append(min(times, key=times.__getitem__))
        assert sorted(firsts) == sorted(sock.getsockname() for sock in listeners)
    finally:
        notifier.close()
        for sock in listeners:
            sock.close()

"""The systemd notify protocol (`sd_notify(3)`): one datagram to `$NOTIFY_SOCKET` per message.

No dependency: a message such as ``READY=1`` or ``STATUS=3 of 3 children running`` is sent as
UTF-8 bytes on an AF_UNIX datagram socket. Outside systemd (no `NOTIFY_SOCKET`) every call is a
cheap no-op returning False.
"""

from __future__ import annotations

import os
import socket

# Variables that belong to the supervisor alone; children must not inherit them, or a child
# could claim readiness (or feed the watchdog) on the service's behalf.
SUPERVISOR_ONLY_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def notify(message: str) -> bool:
    """Send one notification to systemd.

    Args:
        message: newline-separated assignments, e.g. ``"READY=1"`` or ``"STATUS=starting"``.

    Returns:
        True when the datagram was sent; False when not running under systemd (no or unusable
        `NOTIFY_SOCKET`) or when sending failed. Never raises: readiness reporting must not
        take the service down.
    """
    address = os.environ.get("NOTIFY_SOCKET", "")
    if address.startswith("@"):
        # A leading "@" names a socket in Linux's abstract namespace (leading NUL byte).
        address = "\0" + address[1:]
    elif not address.startswith("/"):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


def watchdog_interval_s() -> float | None:
    """Return systemd's watchdog timeout for this process, or None when there is none.

    Reads `WATCHDOG_USEC` (microseconds) and, when present, checks that `WATCHDOG_PID` is this
    process. Send ``WATCHDOG=1`` at least every half of the returned value.

    Returns:
        The watchdog timeout, in seconds; None when unset, malformed or meant for another pid.
    """
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
        pid = int(os.environ.get("WATCHDOG_PID", str(os.getpid())))
    except ValueError:
        return None
    if usec <= 0 or pid != os.getpid():
        return None
    return usec / 1_000_000

"""Every bound on a wait for PostgreSQL, in one place: client deadlines, server-side limits and
TCP liveness on the sockets (OPERATIONS.md, "PostgreSQL for many hosts").

A silent network (packets dropped, connections neither refused nor reset) must never stop a
hookline process, nor let a lost host keep row locks that every other host waits on:

* **Client side**, each connect, pool acquire and store transaction has a deadline; a
  connection that missed one is terminated, never reused (shared/store/postgres.py).
* **Server side**, each session is opened with `statement_timeout`, `lock_timeout` and
  `idle_in_transaction_session_timeout`: a transaction whose client vanished ends within
  `statement_timeout` (a statement it was running) + `idle_in_transaction_session_timeout`
  (waiting for the next statement), and its row locks go with it. The server's TCP keepalives
  and `tcp_user_timeout` (PostgreSQL 12 and newer) close the dead socket itself; its
  `client_connection_check_interval` (PostgreSQL 14 and newer) ends, within a second, a
  transaction whose client closed the connection while a statement ran or waited for a lock.
* **The client's sockets** get TCP keepalives and `TCP_USER_TIMEOUT` too, so the kernel
  reports a dead peer instead of waiting for the Linux default of about two hours.

No asyncpg import here: :class:`PostgresLimits` is built from the Config without loading the
driver (shared/store/__init__.py).
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass
from typing import Any

_TCP_USER_TIMEOUT_SINCE = 12
"""The first PostgreSQL major version with the `tcp_user_timeout` setting."""
_CLIENT_CHECK_SINCE = 14
"""The first PostgreSQL major version with the `client_connection_check_interval` setting."""
CLIENT_CHECK_SETTING = "client_connection_check_interval"
"""A late setting some servers refuse (their platform cannot tell a closed socket while a
query runs): the store leaves it out for such a server."""


@dataclass(frozen=True, slots=True)
class PostgresLimits:
    """How long each wait on a PostgreSQL server may last (see the module docstring).

    Attributes:
        connect_timeout_s: opening one connection (TCP, TLS, startup), seconds.
        acquire_timeout_s: waiting for a pooled connection (opening one included), seconds.
        transaction_timeout_s: one store transaction from acquire to commit, seconds; past
            it the connection is terminated and the call fails StoreUnavailable (a commit's
            outcome is then unknown).
        statement_timeout_s: the server's `statement_timeout`, seconds (0 = none).
        idle_in_transaction_timeout_s: the server's `idle_in_transaction_session_timeout`:
            it ends a session whose open transaction waits this long for its client (its
            locks are released), seconds (0 = none).
        lock_timeout_s: the server's `lock_timeout`: a statement waiting this long for a
            row lock fails (StoreBusy, retried), seconds (0 = none).
        keepalives_idle_s: TCP keepalive: an idle connection is probed after this long,
            seconds, on both ends (0 = the system's default, keepalives stay on).
        keepalives_interval_s: TCP keepalive: between two probes, seconds.
        keepalives_count: TCP keepalive: unanswered probes before the connection is dead.
        tcp_user_timeout_s: `TCP_USER_TIMEOUT` on both ends: data sent and not acknowledged
            for this long kills the connection, seconds (0 = the system's default).
        client_check_interval_s: the server's `client_connection_check_interval`
            (PostgreSQL 14 and newer): while a statement runs or waits for a lock, the server
            checks this often whether its client closed the connection, and if so ends the
            transaction and releases its locks, seconds (0 = never: a killed worker's
            transaction then keeps the locks until its statement ends or times out).
    """

    connect_timeout_s: float = 5.0
    acquire_timeout_s: float = 5.0
    transaction_timeout_s: float = 15.0
    statement_timeout_s: float = 10.0
    idle_in_transaction_timeout_s: float = 10.0
    lock_timeout_s: float = 5.0
    keepalives_idle_s: float = 10.0
    keepalives_interval_s: float = 5.0
    keepalives_count: int = 3
    tcp_user_timeout_s: float = 20.0
    client_check_interval_s: float = 1.0

    @property
    def lock_bound_s(self) -> float:
        """Longest a cut-off host's transaction can keep its row locks, seconds: a statement
        it was running ends by statement_timeout, then the server waits
        idle_in_transaction_timeout for the next one (inf when either limit is off)."""
        if self.statement_timeout_s <= 0 or self.idle_in_transaction_timeout_s <= 0:
            return float("inf")
        return self.statement_timeout_s + self.idle_in_transaction_timeout_s

    @property
    def command_timeout_s(self) -> float:
        """asyncpg's own per-statement timeout: a backstop just past the server's limit (the
        transaction deadline normally ends a stuck call first), seconds."""
        return max(self.statement_timeout_s, self.transaction_timeout_s) + 5.0

    def server_settings(self) -> dict[str, str]:
        """The session settings sent in every connection's startup packet (any PostgreSQL
        hookline supports knows them; `tcp_user_timeout` is set after connecting, see
        :meth:`late_settings`)."""
        return {
            "statement_timeout": _ms(self.statement_timeout_s),
            "lock_timeout": _ms(self.lock_timeout_s),
            "idle_in_transaction_session_timeout": _ms(self.idle_in_transaction_timeout_s),
            "tcp_keepalives_idle": str(round(self.keepalives_idle_s)),
            "tcp_keepalives_interval": str(round(self.keepalives_interval_s)),
            "tcp_keepalives_count": str(self.keepalives_count),
        }

    def late_settings(self, server_major: int) -> dict[str, str]:
        """Session settings only newer servers know (an unknown one in the startup packet
        would refuse the connection), for a server of this major version."""
        late: dict[str, str] = {}
        if server_major >= _TCP_USER_TIMEOUT_SINCE:
            late["tcp_user_timeout"] = _ms(self.tcp_user_timeout_s)
        if server_major >= _CLIENT_CHECK_SINCE and self.client_check_interval_s > 0:
            late[CLIENT_CHECK_SETTING] = _ms(self.client_check_interval_s)
        return late

    def configure_socket(self, sock: Any) -> None:
        """Keepalives and TCP_USER_TIMEOUT on a client TCP socket (a Unix socket, or an
        option this system lacks, is left alone).

        Args:
            sock: the connection's socket (a socket.socket or asyncio's TransportSocket).
        """
        if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
            return
        options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        for name, value in (("TCP_KEEPIDLE", self.keepalives_idle_s),
                            ("TCP_KEEPINTVL", self.keepalives_interval_s),
                            ("TCP_KEEPCNT", self.keepalives_count),
                            ("TCP_USER_TIMEOUT", self.tcp_user_timeout_s * 1000)):
            if value > 0 and hasattr(socket, name):
                options.append((socket.IPPROTO_TCP, getattr(socket, name), round(value)))
        for level, option, value in options:
            with contextlib.suppress(OSError):  # an option the kernel refuses: keep the rest
                sock.setsockopt(level, option, value)


def _ms(seconds: float) -> str:
    """A PostgreSQL duration setting in milliseconds (0 turns the limit off)."""
    return str(round(max(seconds, 0.0) * 1000))

"""The outbound connection pool: keep-alive with a maximum connection age.

aiohttp pools connections by (host name, port, TLS, ...) and reuses one for as long as it
stays open and is not idle past the keep-alive timeout. Under steady traffic a connection is
never idle, so a destination whose DNS name moves to a new address keeps receiving on the
old one for as long as the old address still answers. :class:`AgedConnector` closes a
pooled connection instead of reusing it once it is `max_age_s` old, so the next request
opens a new connection, which resolves the name again (through aiohttp's DNS cache, whose
entries live :func:`dns_cache_s`).

The bound: after a DNS change at time T, no request starts on the old address after
T + dns_cache_s + max_age_s (a connection made by then resolved after T, and one made before
is never handed out past its age), plus whatever the system resolver itself caches.

Only public aiohttp API is used: `BaseConnector.connect` (which hands out every connection,
new or pooled), `Connection.protocol` and `Connection.close()`.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

DNS_CACHE_S = 10.0
"""aiohttp's default DNS cache lifetime, seconds; shortened to the connection age if lower."""


def dns_cache_s(max_age_s: float) -> float:
    """How long a resolved address is reused for new connections, seconds: 10, or the
    maximum connection age when that is shorter."""
    return min(DNS_CACHE_S, max_age_s)


def follow_bound_s(max_age_s: float) -> float:
    """The longest time, seconds, a destination whose name moved keeps receiving requests
    at its old address: the DNS cache plus the connection age (system resolver caches
    aside)."""
    return dns_cache_s(max_age_s) + max_age_s


class AgedConnector(aiohttp.TCPConnector):
    """A TCPConnector that never hands out a connection older than `max_age_s` seconds.

    Age counts from when :meth:`connect` first handed the connection out (right after it was
    opened). An aged connection found in the pool is closed, and another is taken (or
    opened). Other keyword arguments go to :class:`aiohttp.TCPConnector`; `ttl_dns_cache`
    defaults to :func:`dns_cache_s`.

    Raises:
        ValueError: max_age_s is not above zero.
    """

    def __init__(self, *, max_age_s: float, clock: Any = time.monotonic,
                 **kwargs: Any) -> None:
        if not max_age_s > 0:
            raise ValueError(f"max_age_s must be above zero, not {max_age_s}")
        kwargs.setdefault("ttl_dns_cache", dns_cache_s(max_age_s))
        super().__init__(**kwargs)
        self.max_age_s = max_age_s
        self._clock = clock
        # Connection protocol -> monotonic time it was first handed out.
        self._born: weakref.WeakKeyDictionary[ResponseHandler, float] = (
            weakref.WeakKeyDictionary())
        self.retired = 0  # connections closed for their age (for tests and logs)

    async def connect(
            self, req: Any, traces: Any,
            timeout: Any,  # noqa: ASYNC109  (aiohttp's signature, overridden)
    ) -> aiohttp.connector.Connection:
        """A connection for `req` no older than `max_age_s` (see the class docstring)."""
        while True:
            conn = await super().connect(req, traces, timeout)
            protocol = conn.protocol
            if protocol is None:  # closed meanwhile: aiohttp reports it on use
                return conn
            now = self._clock()
            born = self._born.setdefault(protocol, now)
            if now - born < self.max_age_s:
                return conn
            # Aged: close instead of reusing (its slot returns to the pool's limit).
            conn.close()
            self.retired += 1

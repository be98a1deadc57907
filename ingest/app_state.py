"""What the ingest application holds for its handlers: typed keys and the in-flight counter.

Every ingest module reads the app's state through these keys (and :func:`request_store`,
:func:`app_config`), so no route module imports ingest/app.py, which only assembles the app.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from hookline.ingest.group_commit import GroupCommitter
from hookline.ingest.rate_limit import SourceRateLimiter
from hookline.shared.config import Config
from hookline.shared.faults import StoreOutage
from hookline.shared.process.metrics_file import ProcessMetrics, SnapshotWriter
from hookline.shared.store import Store
from hookline.shared.tenant_tokens import TokenClaims

if TYPE_CHECKING:
    from hookline.shared.otel import Tracing


class InFlight:
    """Counts requests being handled, so that a stop can let them finish first.

    aiohttp's own graceful shutdown (AppRunner.cleanup) stops reading from every connection
    before it waits for handlers, so a request still receiving its body then can never
    finish. :func:`hookline.ingest.main.serve` therefore stops listening, calls :meth:`drain`, and
    only then runs the cleanup.

    Attributes:
        count: requests whose handler has started and not yet returned.
        draining: set by :meth:`drain`; answers then carry `Connection: close`, so clients
            on keep-alive connections reconnect (to the next instance) for their next request.
    """

    def __init__(self) -> None:
        self.count = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        """A request's handling starts."""
        self.count += 1
        self._idle.clear()

    def leave(self) -> None:
        """A request's handling ended (answered or failed)."""
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    async def drain(self, timeout_s: float) -> bool:
        """Wait until no request is in flight, at most `timeout_s` seconds; True if none is."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True


STORE_KEY = web.AppKey("store", Store)
READ_STORE_KEY = web.AppKey("read_store", Store)
"""The store that whole-table reads go through (/metrics, stats, the dashboard's summaries):
:func:`hookline.shared.store.read_store_for`'s where there is one, so a long scan never holds up the
group commit; otherwise the same store."""
CONFIG_KEY = web.AppKey("config", Config)
COMMITTER_KEY = web.AppKey("committer", GroupCommitter)
RATE_LIMITER_KEY = web.AppKey("rate_limiter", SourceRateLimiter)
IN_FLIGHT_KEY = web.AppKey("in_flight", InFlight)
PROCESS_METRICS_KEY = web.AppKey("process_metrics", ProcessMetrics)
"""What this ingest process counts in memory for /metrics (ingest/request_metrics.py)."""
SNAPSHOTS_KEY = web.AppKey("metrics_snapshots", SnapshotWriter)
"""Writes this process's metrics snapshot (written again at each /metrics scrape)."""
OUTAGE_KEY = web.AppKey("store_outage", StoreOutage)
TRACING_KEY: web.AppKey[Tracing | None] = web.AppKey("tracing")
"""The process's tracing (the `tracing` setting), or None while it is off."""
"""Logs one `store_unavailable` / `store_recovered` pair per database outage."""


def app_config(app: web.Application) -> Config:
    """The settings the ingest app was built with."""
    return app[CONFIG_KEY]


def request_store(request: web.Request) -> Store:
    """The store the ingest app serves."""
    return request.app[STORE_KEY]


def request_reader(request: web.Request) -> Store:
    """The store for long reads (see READ_STORE_KEY)."""
    return request.app[READ_STORE_KEY]


TENANT_CLAIMS = web.RequestKey("tenant_claims", TokenClaims)
"""The request key under which ingest/tenant_auth.py leaves a verified tenant token's claims."""


def request_claims(request: web.Request) -> TokenClaims | None:
    """The claims of the tenant token the request was authorized with (None: not a tenant
    API request)."""
    return request.get(TENANT_CLAIMS)


def token_tenant(request: web.Request) -> str:
    """The tenant of a tenant API request (its verified token's).

    Raises:
        RuntimeError: the request carries no verified tenant token (a route wiring error:
            ingest/tenant_auth.py guards every `/v1/tenant/` route).
    """
    claims = request_claims(request)
    if claims is None:
        raise RuntimeError("a tenant API handler ran without a verified tenant token")
    return claims.tenant


def tenant_scope(request: web.Request) -> str | None:
    """The tenant whose events and jobs a request may read or act on: the tenant token's
    only, or None (every tenant's) for the admin API."""
    claims = request_claims(request)
    return None if claims is None else claims.tenant

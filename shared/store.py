"""The job store contract: what ingest, workers and the CLI may ask of a database.

One :class:`Store` protocol; backends sit beside it (`shared/sqlite_store.py`, and later
PostgreSQL). Callers never see SQL or a dialect (DESIGN.md invariant 9). Instants are unix
seconds; the store reads its own clock (SQLite: the host's; PostgreSQL: the server's now()).
Driver errors are translated at this boundary into :mod:`shared.errors` types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shared.errors import ConfigError
from shared.models import (
    Accepted, Attempt, AttemptResult, Claim, Destination, Duplicate, Job, NewEvent, Outcome,
    Stats,
)


class Store(Protocol):
    """Durable events, destinations and delivery jobs, with leases fenced by token."""

    async def open(self) -> None:
        """Connect and apply pending migrations. Raises StoreError when it cannot."""

    async def close(self) -> None:
        """Release connections and wake-up sockets."""

    async def add_events(self, events: Sequence[NewEvent]) -> list[Accepted | Duplicate]:
        """Store events and fan each out to one job per live subscribed destination.

        All of `events` commit in ONE transaction (group commit): when this returns, every
        Accepted event and its jobs are durable; when it raises, none of them is stored.
        An event whose (source, source_event_id) already exists, or repeats earlier in the
        batch, is a Duplicate and creates nothing. Workers are woken after the commit.

        Raises:
            StoreBusy: the write lock stayed taken past the busy timeout.
        """

    async def claim(self, worker: str, limit: int, lease_s: float,
                    max_attempts: int) -> list[Claim]:
        """Atomically take up to `limit` due jobs under fresh leases of `lease_s` seconds.

        Due means pending with run_at <= now, or running with an expired lease (takeover).
        Each claim gets a lease token unique to it and counts an attempt. No destination gets
        more than its max_in_flight unexpired leases, across all processes. Paused
        destinations are skipped. An expired lease on a job that already used `max_attempts`
        makes it dead ("worker lost") instead of being claimed.
        """

    async def extend(self, claims: Sequence[Claim], lease_s: float) -> list[Claim]:
        """Push the leases of `claims` to now + `lease_s`; returns the claims whose lease was
        lost (token superseded or job no longer running)."""

    async def finish(self, items: Sequence[tuple[Claim, Outcome, AttemptResult]]) -> list[bool]:
        """Record each attempt and apply each outcome, fenced by the claim's lease token.

        Returns one bool per item: False when the lease was lost (a stale completion: the job
        row was not changed; the attempt row is still completed, since the request happened).
        """

    async def hand_back(self, claims: Sequence[Claim]) -> int:
        """Return claimed jobs to pending, due now, without charging their attempt (graceful
        stop). Fenced by token; returns how many were handed back."""

    async def wait_for_jobs(self, timeout_s: float) -> bool:
        """Sleep until new or replayed jobs may be due, or `timeout_s` passes; True if woken."""

    async def add_destination(self, *, name: str, url: str, secret: str,
                              event_types: Sequence[str], max_in_flight: int) -> Destination:
        """Register a destination. Raises ConfigError when the name is taken."""

    async def list_destinations(self) -> list[Destination]:
        """Live destinations in creation order."""

    async def get_destination(self, name: str) -> Destination:
        """One destination by name. Raises NotFound."""

    async def set_paused(self, name: str, paused: bool, reason: str | None = None) -> None:
        """Pause (no claims, no charges) or resume a destination. Raises NotFound."""

    async def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        """Jobs, newest first, optionally of one status."""

    async def list_attempts(self, job_id: int | None = None, limit: int = 10_000) -> list[Attempt]:
        """Attempt rows, oldest first, of one job or of all."""

    async def stats(self) -> Stats:
        """Counts by status, events, attempts, and the oldest due pending job's age."""


def open_store(url: str, *, synchronous: str = "FULL", busy_timeout_s: float = 5.0) -> Store:
    """Build (not yet open) the store for a database URL.

    Args:
        url: a SQLite file path, or `sqlite:///PATH` (relative) / `sqlite:////PATH` (absolute),
            as SQLAlchemy spells them.
        synchronous: SQLite `FULL` or `NORMAL` (see Config.synchronous).
        busy_timeout_s: how long a statement waits for the SQLite write lock, seconds.

    Raises:
        ConfigError: the URL names an unsupported backend.
    """
    if url.startswith(("postgres://", "postgresql://")):
        raise ConfigError("the PostgreSQL backend is not available yet; use a SQLite path")
    if "://" in url and not url.startswith("sqlite:///"):
        raise ConfigError(f"unsupported database URL {url!r}; use a path or sqlite:///PATH")
    from shared.sqlite_store import SqliteStore  # noqa: PLC0415  (backends load on demand)

    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    return SqliteStore(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s)

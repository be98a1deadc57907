"""What both `hookline bench --scenario` runs share: their options and a percentile pick.

Times: `*_unix` are unix seconds (time.time()); durations are seconds unless named `_ms`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from hookline.shared.db_url import is_postgres_url
from hookline.shared.store import Store, open_store

SCENARIOS = ("backlog", "outage", "fairness", "destinations", "tenants", "everyday", "ingest")
OUTAGE_KINDS = {"503": "status:503", "hang": "hang"}
"""Outage kind -> the receiver behaviour d3 switches to (rehearsal/receiver.py)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioOptions:
    """What to run.

    Attributes:
        scenario: one of SCENARIOS.
        out_dir: folder for scenario-<name>.json and the run's work folder.
        workers: worker processes of `hookline serve`.
        synchronous: SQLite synchronous mode of the service's commits but the workers' (theirs:
            Config.worker_synchronous, as in the timed claims).
        backend: `sqlite`, or `postgres` (every scenario but backlog; see
            hookline.rehearsal.bench.BenchOptions).
        postgres_url: a server to use instead of a throwaway one (postgres only).
        body_bytes: size of each event body, bytes (the bench's default).
        backlog_jobs: pending jobs of the backlog (backlog: split evenly over d1, d2, d3;
            fairness: tenant a's, over its destinations).
        small_backlog_jobs: pending jobs of the small backlog claims are compared with.
        claim_samples: timed claims against each backlog.
        deliver_s: seconds the service delivers from the backlog (less if it empties).
        rate_per_s: events per second offered during the outage scenario (x3 deliveries),
            or by tenant b in the fairness scenario.
        phase_s: seconds of each phase (fairness: b alone, then with a; destinations and
            tenants, ingest: each ingest measurement; everyday: each steady run's load).
        destination_counts: the destinations scenario's sizes, one ingest measurement each.
        tenants: the tenants scenario's tenants (3 destinations each).
        rounds: destinations, tenants and ingest: ingest measurements of each size or
            design, alternated between them (each figure reported is the median of its
            rounds).
        concurrency: connections of the load generator.
        baseline_s: seconds of load before the outage.
        outage_s: seconds d3 fails.
        outage_kind: `503` (d3 answers 503 at once) or `hang` (d3 never answers; each attempt
            ends at the worker's attempt timeout).
        drain_timeout_s: seconds to wait for d3's backlog after recovery (None: the larger
            of 120 s and 1.5 x outage_s).
        drain_rate_per_s: when set, the operator paces d3's drain: its rate_limit_per_s is
            set to this at recovery (before a resume) and cleared once it has drained.
    """

    scenario: str
    out_dir: Path = Path("results/bench")
    workers: int = 2
    synchronous: str = "FULL"
    backend: str = "sqlite"
    postgres_url: str | None = None
    body_bytes: int = 1500
    backlog_jobs: int = 1_000_000
    small_backlog_jobs: int = 1_000
    claim_samples: int = 200
    deliver_s: float = 30.0
    rate_per_s: float = 300.0
    concurrency: int = 64
    baseline_s: float = 60.0
    outage_s: float = 600.0
    outage_kind: str = "503"
    drain_timeout_s: float | None = None
    drain_rate_per_s: float | None = None
    phase_s: float = 20.0
    destination_counts: tuple[int, ...] = (10, 1_000, 10_000)
    tenants: int = 10_000
    rounds: int = 3
    events: int = 20_000
    steady_rates: tuple[float, ...] = (50.0, 200.0, 500.0)
    use_wrk: bool = True


def pick(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list."""
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True, slots=True)
class BenchDatabase:
    """Which database a `hookline bench` run uses, from `--backend` and the `db` setting.

    Attributes:
        backend: `sqlite` (a fresh file) or `postgres`.
        server_url: the server of a `db` setting that names one (a fresh database is made on
            it), None for a throwaway server started for the run or for SQLite.
    """

    backend: str
    server_url: str | None

    @property
    def on_server(self) -> bool:
        """Whether the run uses a database server rather than a file."""
        return self.backend != "sqlite"

    def applied_to(self, opts: OptionsT) -> OptionsT:
        """`opts` (a BenchOptions or ScenarioOptions) with this backend and server."""
        return dataclasses.replace(opts, backend=self.backend,  # type: ignore[type-var]
                                   postgres_url=self.server_url)


def chosen_database(backend: str | None, db: str) -> BenchDatabase:
    """The database of a bench run: `backend` as given (`--backend`), else `postgres` when the
    `db` setting is a PostgreSQL URL (then on that server), else `sqlite`."""
    server_url = db if is_postgres_url(db) else None
    chosen = backend or ("postgres" if server_url else "sqlite")
    return BenchDatabase(backend=chosen, server_url=server_url if chosen == "postgres" else None)


async def with_store(db: str, work: Callable[[Store], Awaitable[object]]) -> None:
    """Open the store at `db` (a SQLite path or a PostgreSQL URL), run `work(store)` on it,
    and close it, whatever happens."""
    store = open_store(db)
    await store.open()
    try:
        await work(store)
    finally:
        await store.close()

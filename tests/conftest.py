"""Shared fixtures: real SQLite files under tmp_path, factories for destinations and events."""

from __future__ import annotations

import itertools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from shared.models import Destination, NewEvent  # noqa: E402
from shared.signing import generate_secret  # noqa: E402
from shared.sqlite_store import SqliteStore  # noqa: E402
from shared.store import Store  # noqa: E402
from tests.pg import pg_server, pg_url  # noqa: E402,F401  (fixtures)


class FakeClock:
    """A unix-seconds clock that moves only when told (for lease expiry without sleeping)."""

    def __init__(self, now_s: float = 1_800_000_000.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: runs on the SQLite backend only")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database for one test: a SQLite file, or a new PostgreSQL database on the
    session's server (tests/pg.py, dropped after the test). Tests marked `sqlite_only` skip
    the PostgreSQL run."""
    if request.param == "sqlite":
        return str(tmp_path / "hookline.db")
    if request.node.get_closest_marker("sqlite_only"):
        pytest.skip("uses SQLite internals")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def store(store_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    """An open store (each backend in turn) on a fresh database, reading the fake clock
    (on PostgreSQL the fake clock replaces the database's clock: a test-only option)."""
    s: Store
    if store_url.startswith("postgresql://"):
        from shared.postgres_store import PostgresStore  # noqa: PLC0415

        s = PostgresStore(store_url, clock=clock)
    else:
        s = SqliteStore(store_url, clock=clock)
    await s.open()
    yield s
    await s.close()


@pytest.fixture
def destination_factory(store: SqliteStore) -> Callable[..., Awaitable[Destination]]:
    counter = itertools.count(1)

    async def make(name: str | None = None, url: str = "http://127.0.0.1:9/x",
                   event_types: tuple[str, ...] = ("*",), max_in_flight: int = 10,
                   secret: str | None = None) -> Destination:
        return await store.add_destination(
            name=name or f"dest-{next(counter)}", url=url, secret=secret or generate_secret(),
            event_types=event_types, max_in_flight=max_in_flight)

    return make


def new_event(event_id: str, type_: str = "push", body: bytes | None = None,
              source: str = "api") -> NewEvent:
    """A NewEvent with a small JSON body."""
    return NewEvent(source=source, source_event_id=event_id, type=type_,
                    body=body if body is not None else b'{"n": "%s"}' % event_id.encode())

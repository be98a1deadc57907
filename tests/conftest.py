"""Shared fixtures: a real database per test (a SQLite file under tmp_path, or a fresh
database on the session's PostgreSQL server), factories for destinations and events."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hookline.shared.endpoint_models import Destination  # noqa: E402  (after the sys.path insert above)
from hookline.shared.models import DEFAULT_TENANT, NewEvent  # noqa: E402  (after the sys.path insert above)
from hookline.shared.signing import generate_secret  # noqa: E402  (after the sys.path insert above)
from hookline.shared.store import Store, open_store  # noqa: E402  (after the sys.path insert above)
from hookline.shared.store.sqlite import SqliteStore  # noqa: E402  (after the sys.path insert above)
from tests.pg import fresh_database, pg_server, pg_url  # noqa: E402,F401  (fixtures)


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the wake-up directories in the temp dir that no process listens in any more
    (shared/store/wakeup.py puts one there for a database path too long for a socket beside
    it, as pytest's temporary paths are): a service a test killed leaves its own behind,
    some 300 over a few days of runs. A socket whose process is gone refuses a connection;
    a live one (another test process, a service) is left, and so is its directory."""
    for directory in Path(tempfile.gettempdir()).glob("hookline-wake-*"):
        for path in directory.glob("*.sock"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
                try:
                    probe.connect(str(path))
                except ConnectionRefusedError:
                    with contextlib.suppress(OSError):
                        path.unlink()
                except OSError:
                    pass  # gone meanwhile, or not a socket: not ours to judge
        with contextlib.suppress(OSError):  # not empty: someone still listens
            directory.rmdir()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses `store_url` (directly or through `store`, `real_store`, ...) runs
    once per backend; one marked `sqlite_only` (it reads SQLite internals) gets only the SQLite
    run: no PostgreSQL variant is collected, so none is ever skipped."""
    if "store_url" in metafunc.fixturenames:
        sqlite_only = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("store_url", ["sqlite"] if sqlite_only else list(BACKENDS),
                             indirect=True)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database for one test: a SQLite file, or a new PostgreSQL database on the
    session's server (tests/pg.py, dropped after the test). Tests marked `sqlite_only` run
    on SQLite only (see pytest_generate_tests)."""
    if request.param == "sqlite":
        return str(tmp_path / "hookline.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="module", params=BACKENDS)
def module_store_url(request: pytest.FixtureRequest,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh database shared by one module's tests, once per backend: a SQLite file, or a
    new PostgreSQL database on the session's server (dropped after the module). For a
    module that runs one `hookline serve` on it for all its tests; on PostgreSQL such
    tests fail rather than skip under CI=true when no server can start (tests/pg.py)."""
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("store") / "hookline.db")
        return
    with fresh_database(request.getfixturevalue("pg_server")) as url:
        yield url


@pytest.fixture
async def store(store_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    """An open store (each backend in turn) on a fresh database, reading the fake clock
    (on PostgreSQL the fake clock replaces the database's clock: a test-only option).
    SQLite's runs its transactions inline, on the test's event loop, and commits with
    synchronous NORMAL, as the workers' store does; every other store of the tests
    (`real_store`, `opened_store`, ingest's in a served service) runs them on its own
    thread, as ingest's does."""
    s: Store
    if store_url.startswith("postgresql://"):
        from hookline.shared.store.postgres import PostgresStore

        s = PostgresStore(store_url, clock=clock)
    else:
        s = SqliteStore(store_url, clock=clock, inline=True, synchronous="NORMAL")
    await s.open()
    yield s
    await s.close()


@pytest.fixture
async def real_store(store_url: str) -> AsyncIterator[Store]:
    """An open store (each backend in turn) on a fresh database, on the real clock: the
    host's on SQLite, the server's now() on PostgreSQL (for tests that run real HTTP
    servers, workers or processes beside it)."""
    async with opened_store(store_url) as s:
        yield s


@contextlib.asynccontextmanager
async def opened_store(url: str) -> AsyncIterator[Store]:
    """`open_store(url)`, opened for the block and closed after it: another connection to
    the same database, as another process would have."""
    s = open_store(url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[int]:
    """`app` served by a real aiohttp server on 127.0.0.1, on a free port, for the block;
    yields the port."""
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


def task_stacks() -> str:
    """The stack of every other task of the running loop, as text: for the message of a wait
    that timed out, to show where the worker, the writer and the attempts stood."""
    current = asyncio.current_task()
    out = io.StringIO()
    for task in asyncio.all_tasks():
        if task is not current:
            task.print_stack(limit=12, file=out)
    return out.getvalue()


def is_postgres(url: str) -> bool:
    """Whether a database URL names a PostgreSQL server (else it is a SQLite file)."""
    return url.startswith(("postgresql://", "postgres://"))


async def settle(store: Store, timeout_s: float = 20.0) -> dict[str, int]:
    """Wait until no job is pending or running; returns the counts by status.

    Raises:
        AssertionError: jobs are still pending or running after `timeout_s` seconds.
    """
    deadline = time.monotonic() + timeout_s
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = (await store.stats()).jobs_by_status
        if counts["pending"] == counts["running"] == 0:
            return counts
        await asyncio.sleep(0.05)
    raise AssertionError(f"jobs did not settle: {counts}")


async def execute_db(url: str, sql: str) -> None:
    """Run one writing SQL statement (portable SQL, no parameters) on its own connection
    outside the store: for a test that needs a state only an older version could leave."""
    if is_postgres(url):
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()
        return
    with contextlib.closing(sqlite3.connect(url)) as db, db:
        db.execute(sql)


async def query_db(url: str, sql: str) -> list[dict[str, Any]]:
    """Rows of one read-only SQL statement (portable SQL, no parameters), run on its own
    connection outside the store: sqlite3 on a file, asyncpg on a PostgreSQL URL. Lets a
    test check what is really stored, on either backend, without trusting the store's own
    queries. bytea/BLOB columns come back as bytes."""
    if is_postgres(url):
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            return [dict(r) for r in await conn.fetch(sql)]
        finally:
            await conn.close()
    with contextlib.closing(sqlite3.connect(f"file:{url}?mode=ro", uri=True)) as db:
        db.row_factory = sqlite3.Row
        return [{k: (bytes(r[k]) if isinstance(r[k], memoryview) else r[k]) for k in r.keys()}  # noqa: SIM118  (sqlite3.Row)
                for r in db.execute(sql)]


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


def cli_stdout(*args: str) -> str:
    """Run the `hookline` CLI in this process; its standard output (asserting exit 0)."""
    from hookline.supervisor.cli.main import main as hookline_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert hookline_main(list(args)) == 0, args
    return out.getvalue()


def new_event(event_id: str, type_: str = "push", body: bytes | None = None,
              source: str = "api", tenant: str = DEFAULT_TENANT) -> NewEvent:
    """A NewEvent with a small JSON body."""
    return NewEvent(source=source, source_event_id=event_id, type=type_,
                    body=body if body is not None else b'{"n": "%s"}' % event_id.encode(),
                    tenant=tenant)

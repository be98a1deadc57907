"""A throwaway PostgreSQL server for the test session, and a fresh database per test.

The server comes from :mod:`rehearsal.pgserver` (initdb + pg_ctl in a temp directory, on a
free 127.0.0.1 port, trust auth, no fsync: test data only; as the `postgres` user under
root), started once per session and stopped and deleted at its end. Missing binaries: the
tests fail with a clear message when CI=true, and skip with the reason locally. Each test
gets its own database, copied from a migrated template (fast, isolated).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from rehearsal.pgserver import PgServer, PgStartError, PgUnavailable, run_coroutine, start_server

TEMPLATE = "hookline_template"
_names = itertools.count(1)  # t1, t2, ...: one database per test


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """Start one PostgreSQL server for the session (initdb once), stop it at the end."""
    try:
        server = start_server()
    except PgUnavailable as exc:
        _unavailable(str(exc))
    except PgStartError as exc:
        pytest.fail(f"cannot start the test PostgreSQL server: {exc}", pytrace=False)
    try:
        server.create_database(TEMPLATE)
        _migrate_template(server)
        yield server
    finally:
        server.stop()


def _migrate_template(server: PgServer) -> None:
    from shared.postgres_store import PostgresStore  # noqa: PLC0415

    async def run() -> None:
        async with PostgresStore(server.url(TEMPLATE)):
            pass

    run_coroutine(run)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database on the session's server (its URL), dropped
    after the test."""
    url = pg_server.create_database(f"t{next(_names)}", template=TEMPLATE)
    yield url
    pg_server.drop_database(url)

"""A throwaway PostgreSQL server for the test session, and a fresh database per test.

The server comes from :mod:`hookline.rehearsal.pgserver` (initdb + pg_ctl in a temp directory, on a
free 127.0.0.1 port, trust auth, no fsync: test data only; as the `postgres` user under
root), started once per session and stopped and deleted at its end. Missing binaries: the
tests fail with a clear message when CI=true, and skip with the reason locally. Each test
gets its own database, copied from a migrated template (fast, isolated).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator

import pytest

from hookline.rehearsal.pgserver import (
    PgServer,
    PgStartError,
    PgUnavailable,
    run_coroutine,
    start_server,
)

TEMPLATE = "hookline_template"
_names = itertools.count(1)  # t1, t2, ...: one database per test


def skip_or_fail_in_ci(reason: str) -> None:
    """Skip the test with `reason`, or fail it when CI is set: CI must never pass by skipping
    what it claims to test (a missing PostgreSQL server binary, a missing Chromium)."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _unavailable(reason: str) -> None:
    skip_or_fail_in_ci(f"PostgreSQL tests: {reason}")


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
    from hookline.shared.store.postgres import PostgresStore

    async def run() -> None:
        async with PostgresStore(server.url(TEMPLATE)):
            pass

    run_coroutine(run)


@contextlib.contextmanager
def fresh_database(server: PgServer) -> Iterator[str]:
    """A new, migrated database on `server` (its URL), copied from the template and
    dropped when the block ends."""
    url = server.create_database(f"t{next(_names)}", template=TEMPLATE)
    try:
        yield url
    finally:
        server.drop_database(url)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database on the session's server (its URL), dropped
    after the test."""
    with fresh_database(pg_server) as url:
        yield url

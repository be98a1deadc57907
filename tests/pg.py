"""A throwaway PostgreSQL server for the test session, and a fresh database per test.

`initdb` + `pg_ctl` in a temp directory, listening on a free 127.0.0.1 port (trust auth, no
fsync: test data only), stopped and deleted at the end of the session. PostgreSQL refuses to
run as root, so under root the server runs as the `postgres` user (runuser). Missing
binaries: the tests fail with a clear message when CI=true, and skip with the reason locally.
Each test gets its own database, copied from a migrated template (fast, isolated).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

_SEARCH = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin",
           "/opt/homebrew/opt/postgresql*/bin")


def find_pg_bin() -> Path | None:
    """The directory holding initdb/pg_ctl/postgres ($HOOKLINE_PG_BIN, PATH, usual places)."""
    candidates = [os.environ.get("HOOKLINE_PG_BIN", "")]
    on_path = shutil.which("pg_ctl")
    candidates.append(str(Path(on_path).parent) if on_path else "")
    for pattern in _SEARCH:
        candidates += sorted(glob.glob(pattern), reverse=True)
    for c in candidates:
        if c and all((Path(c) / b).exists() for b in ("initdb", "pg_ctl", "postgres")):
            return Path(c)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running test server: `url(db)` builds a URL; `new_database()` a fresh migrated DB."""

    port: int
    _counter: Iterator[int]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """CREATE DATABASE from the migrated template; returns its URL."""
        name = f"t{next(self._counter)}"
        _psql(self, f"CREATE DATABASE {name} TEMPLATE hookline_template STRATEGY FILE_COPY")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop a database made by new_database (closing any session still on it)."""
        _psql(self, f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")


def _in_thread(make: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a coroutine to completion on a thread of its own: callers may be inside a running
    event loop (async tests and fixtures)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(make())).result()


def _psql(server: PgServer, sql: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(server.url())
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    _in_thread(run)


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """Start one PostgreSQL server for the session (initdb once), stop it at the end."""
    bindir = find_pg_bin()
    if bindir is None:
        _unavailable("initdb/pg_ctl/postgres not found (set HOOKLINE_PG_BIN or install "
                     "PostgreSQL server binaries)")
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no `postgres` user to run the server")
    root = Path(tempfile.mkdtemp(prefix="hookline-pg-"))
    if os.geteuid() == 0:
        os.chown(root, pw.pw_uid, pw.pw_gid)
    data, log = root / "data", root / "server.log"
    port = _free_port()
    opts = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
    for step in ([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync"],
                 [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w",
                  "-t", "30", "start"]):
        done = subprocess.run(_as_server_user(step), capture_output=True, text=True)
        if done.returncode != 0:
            server_log = log.read_text()[-2000:] if log.exists() else ""
            shutil.rmtree(root, ignore_errors=True)
            pytest.fail(f"cannot start the test PostgreSQL server: {Path(step[0]).name} "
                        f"exited {done.returncode}: {done.stderr.strip()[-2000:]}\n{server_log}",
                        pytrace=False)
    server = PgServer(port=port, _counter=itertools.count(1))
    try:
        _psql(server, "CREATE DATABASE hookline_template")
        _migrate_template(server)
        yield server
    finally:
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                        "-w", "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _migrate_template(server: PgServer) -> None:
    from shared.postgres_store import PostgresStore  # noqa: PLC0415

    async def run() -> None:
        async with PostgresStore(server.url("hookline_template")):
            pass

    _in_thread(run)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database on the session's server (its URL), dropped
    after the test."""
    url = pg_server.new_database()
    yield url
    pg_server.drop_database(url)

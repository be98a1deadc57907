"""A throwaway PostgreSQL server on 127.0.0.1, for the test suite and `hookline bench`.

`initdb` + `pg_ctl` in a folder of its own, listening on a free 127.0.0.1 port with trust
authentication (nothing else can reach it), stopped with `pg_ctl stop -m immediate` and its
folder deleted afterwards. PostgreSQL refuses to run as root, so under root the server runs
as the `postgres` user (runuser). The binaries are looked for in `$HOOKLINE_PG_BIN`, `PATH`
and the usual install places (`/usr/lib/postgresql/*/bin`, ...).

Tests want speed (`durable=False`: fsync off, test data only); the benchmark wants the
durability an operator would run with (`durable=True`: PostgreSQL's defaults, every commit
flushed), so its figures compare with SQLite's `synchronous=FULL`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import glob
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

_SEARCH = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin",
           "/opt/homebrew/opt/postgresql*/bin")
SERVER_USER = "postgres"
"""The account the server runs as when we are root (PostgreSQL refuses root)."""


class PgUnavailable(Exception):
    """No server can be started here: binaries missing, or root without a `postgres` user."""


class PgStartError(RuntimeError):
    """initdb or pg_ctl failed; the message holds their output and the server log's tail."""


def find_pg_bin() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres, or None.

    Looks in `$HOOKLINE_PG_BIN`, then beside `pg_ctl` on PATH, then the usual install
    folders (newest version first).
    """
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


def run_coroutine(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run the coroutine `make()` to completion on a thread of its own and return its result.

    Callers may be plain functions or already inside a running event loop (async tests,
    fixtures): either way this blocks until the coroutine is done.
    """
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *cmd] if os.geteuid() == 0 else cmd


@dataclass
class PgServer:
    """A running throwaway server.

    Attributes:
        port: its TCP port on 127.0.0.1.
        root: its folder (data directory, socket, `server.log`); deleted by :meth:`stop`.
        bindir: where its binaries are.
        options: the server options it was started with (`pg_ctl -o`), reused by
            :meth:`resume`.
    """

    port: int
    root: Path
    bindir: Path
    options: str = ""

    def url(self, database: str = "postgres") -> str:
        """A `postgresql://` URL of `database` on this server, as the superuser."""
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run one SQL statement as the superuser (CREATE DATABASE works: no transaction).

        Raises:
            asyncpg.PostgresError: the server refused the statement.
        """
        async def run() -> None:
            conn = await asyncpg.connect(self.url(database))
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        run_coroutine(run)

    def create_database(self, name: str, template: str | None = None) -> str:
        """CREATE DATABASE `name` (a plain identifier), copied from `template` when given
        (file copy: fast for a small migrated template); returns its URL."""
        copy = f" TEMPLATE {template} STRATEGY FILE_COPY" if template else ""
        self.execute(f"CREATE DATABASE {name}{copy}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop the database a URL of this server names, closing any session still on it."""
        self.execute(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")

    def halt(self, mode: str = "fast") -> None:
        """Stop the server but keep its data (`pg_ctl stop -m MODE -w`), as an operator
        restarting it would; :meth:`resume` starts it again on the same port.

        Raises:
            PgStartError: pg_ctl failed.
        """
        self._pg_ctl("-m", mode, "-w", "stop")

    def resume(self) -> None:
        """Start the server halted by :meth:`halt` again (same data, port and options);
        returns once it takes connections.

        Raises:
            PgStartError: pg_ctl failed.
        """
        self._pg_ctl("-l", str(self.root / "server.log"), "-o", self.options, "-w", "-t",
                     "30", "start")

    def _pg_ctl(self, *args: str) -> None:
        done = subprocess.run(_as_server_user([str(self.bindir / "pg_ctl"), "-D",
                                               str(self.root / "data"), *args]),
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PgStartError(f"pg_ctl {' '.join(args)} exited {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}")

    def stop(self) -> None:
        """Stop the server at once (`-m immediate`) and delete its folder (idempotent)."""
        data = self.root / "data"
        if data.exists():
            subprocess.run(_as_server_user([str(self.bindir / "pg_ctl"), "-D", str(data),
                                            "-m", "immediate", "-w", "stop"]),
                           capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def start_server(parent: Path | None = None, *, durable: bool = False,
                 max_connections: int = 300) -> PgServer:
    """initdb and start a server on a free 127.0.0.1 port; returns once it takes connections.

    Args:
        parent: the folder to create the server's folder in (default: the temp dir). Under
            root, the folders above it must be traversable by the `postgres` user.
        durable: True keeps PostgreSQL's durability defaults (fsync, synchronous_commit,
            full_page_writes on); False turns them off (test data only, much faster).
        max_connections: the server's connection limit.

    Raises:
        PgUnavailable: no binaries, or running as root without a `postgres` user.
        PgStartError: initdb or pg_ctl failed (message holds their output).
    """
    bindir = find_pg_bin()
    if bindir is None:
        raise PgUnavailable("initdb/pg_ctl/postgres not found (set HOOKLINE_PG_BIN or install "
                            "PostgreSQL server binaries)")
    owner: pwd.struct_passwd | None = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise PgUnavailable("running as root and there is no `postgres` user to run the "
                                "server") from None
    # Absolute: the server runs in a folder of its own and takes `root` for its socket
    # (`hookline bench --backend postgres` passes a relative out_dir, results/bench).
    root = Path(tempfile.mkdtemp(prefix="hookline-pg-", dir=parent)).resolve()
    if owner is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    data, log = root / "data", root / "server.log"
    port = _free_port()
    opts = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} "
            f"-c max_connections={max_connections}")
    if not durable:
        opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    initdb = [str(bindir / "initdb"), "-D", str(data), "-U", SERVER_USER, "--auth=trust",
              "-E", "UTF8"] + ([] if durable else ["--no-sync"])
    start = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w",
             "-t", "30", "start"]
    server = PgServer(port=port, root=root, bindir=bindir, options=opts)
    for step in (initdb, start):
        done = subprocess.run(_as_server_user(step), capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            server_log = log.read_text()[-2000:] if log.exists() else ""
            server.stop()
            raise PgStartError(f"{Path(step[0]).name} exited {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}\n{server_log}")
    return server


@contextlib.contextmanager
def throwaway_server(parent: Path | None = None, *, durable: bool = False) -> Iterator[PgServer]:
    """:func:`start_server` for a `with` block; the server is stopped and deleted after it.

    Raises:
        PgUnavailable, PgStartError: as :func:`start_server`.
    """
    server = start_server(parent, durable=durable)
    try:
        yield server
    finally:
        server.stop()

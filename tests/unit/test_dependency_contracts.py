"""The private hooks of dependencies that hookline's hot paths rely on, checked directly.

aiosqlite has no public "run this function on your thread" call, and aiohttp no public way to
choose the per-connection protocol of an AppRunner; hookline uses the private ones. An
upgrade that removes or reshapes one fails here, with a message naming the hook and its user,
rather than somewhere deeper in the suite (or not at all)."""

from __future__ import annotations

import inspect
import sqlite3
import threading

import aiosqlite
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from hookline.ingest.http_limits import IngestRequestHandler, IngestRunner, parser_limits
from hookline.shared.config import Config
from hookline.shared.store.sqlite import SqliteStore

AIOSQLITE_HOOK = (f"aiosqlite {aiosqlite.__version__}: SqliteStore._run runs each whole "
                  "transaction through the private Connection._execute(fn, *args, **kwargs) "
                  "on the sqlite3 connection from the private Connection._conn")
AIOHTTP_HOOK = ("aiohttp: IngestRunner overrides the private AppRunner._make_server() and "
                "swaps in a web.Server subclass whose __call__ reads Server._loop and "
                "Server._kwargs")


def test_aiosqlite_execute_and_conn_keep_their_shape():
    execute = inspect.getattr_static(aiosqlite.Connection, "_execute", None)
    assert execute is not None and inspect.iscoroutinefunction(execute), AIOSQLITE_HOOK
    params = list(inspect.signature(execute).parameters.values())
    assert [p.name for p in params[:2]] == ["self", "fn"], AIOSQLITE_HOOK
    assert params[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, AIOSQLITE_HOOK
    assert isinstance(inspect.getattr_static(aiosqlite.Connection, "_conn", None),
                      property), AIOSQLITE_HOOK


async def test_aiosqlite_execute_runs_a_function_on_the_database_thread(tmp_path):
    """A function given to _execute runs on aiosqlite's own thread, on the sqlite3
    connection _conn returns, and its result (or error) comes back to the caller."""
    caller = threading.get_ident()
    async with aiosqlite.connect(tmp_path / "contract.db") as conn:

        def transaction() -> tuple[int, int]:
            db = conn._conn
            assert isinstance(db, sqlite3.Connection), AIOSQLITE_HOOK
            db.execute("CREATE TABLE t (x INTEGER)")
            db.execute("INSERT INTO t VALUES (41)")
            return threading.get_ident(), db.execute("SELECT x + 1 FROM t").fetchone()[0]

        thread, value = await conn._execute(transaction)
        assert (value, thread != caller) == (42, True), AIOSQLITE_HOOK

        def failing() -> None:
            conn._conn.execute("SELECT * FROM no_such_table")

        try:
            await conn._execute(failing)
        except sqlite3.OperationalError as exc:
            assert "no_such_table" in str(exc), AIOSQLITE_HOOK
        else:
            raise AssertionError(f"{AIOSQLITE_HOOK}: a failing function's error was lost")


async def test_sqlite_store_runs_a_transaction_through_the_hook(tmp_path):
    """The store's own path over the hook: one call on the database thread."""
    async with SqliteStore(str(tmp_path / "h.db")) as store:
        thread, answer = await store._run(
            lambda db: (threading.get_ident(), db.execute("SELECT 6 * 7").fetchone()[0]))
    assert (answer, thread != threading.get_ident()) == (42, True), AIOSQLITE_HOOK


def test_aiohttp_make_server_keeps_its_shape():
    make_server = inspect.getattr_static(web.AppRunner, "_make_server", None)
    assert make_server is not None and inspect.iscoroutinefunction(make_server), AIOHTTP_HOOK
    assert list(inspect.signature(make_server).parameters) == ["self"], AIOHTTP_HOOK


async def test_ingest_runner_builds_json_answering_connections():
    """IngestRunner's server is aiohttp's, with only the protocol factory changed: each
    connection gets an IngestRequestHandler carrying the parser limits."""
    runner = IngestRunner(web.Application(), **parser_limits(Config(max_header_bytes=1234)))
    await runner.setup()
    try:
        server = runner.server
        assert server is not None, AIOHTTP_HOOK
        assert {"_loop", "_kwargs"} <= set(vars(server)), AIOHTTP_HOOK
        handler = server()
        assert isinstance(handler, IngestRequestHandler), AIOHTTP_HOOK
        assert isinstance(handler, RequestHandler), AIOHTTP_HOOK
        assert server._kwargs["max_field_size"] == 1234, AIOHTTP_HOOK
        assert handler.max_field_size == 1234, AIOHTTP_HOOK
    finally:
        await runner.cleanup()

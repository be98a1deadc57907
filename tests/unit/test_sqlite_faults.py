"""SQLite driver errors are classified in one place (hookline.shared.faults.sqlite_fault): a lock
held past the busy timeout, a full disk and a read-only file are transient (StoreUnavailable: the
service retries and ingest answers 503), a file that is not a database is permanent. Every
error here is raised by a real SQLite file, none is built by hand."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hookline.shared.errors import StoreBusy, StoreError, StoreUnavailable
from hookline.shared.faults import sqlite_fault
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event


def _raised(fn) -> sqlite3.Error:  # type: ignore[no-untyped-def]
    with pytest.raises(sqlite3.Error) as info:
        fn()
    return info.value


def _table(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x BLOB)")


def test_lock_held_past_the_busy_timeout_is_busy(tmp_path):
    path = tmp_path / "locked.db"
    _table(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        error = _raised(lambda: other.execute("BEGIN IMMEDIATE"))
        other.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    fault = sqlite_fault(error, "claim")
    assert isinstance(fault, StoreBusy) and "locked" in str(fault)


def test_full_disk_is_unavailable(tmp_path):
    path = tmp_path / "full.db"
    _table(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA max_page_count = 3")  # SQLite's own size cap: SQLITE_FULL when reached

    def fill() -> None:
        for _ in range(100):
            db.execute("INSERT INTO t VALUES (zeroblob(4096))")

    error = _raised(fill)
    db.close()
    fault = sqlite_fault(error, "add_events")
    assert type(fault) is StoreUnavailable and "SQLITE_FULL" in str(fault)


def test_read_only_file_is_unavailable(tmp_path):
    path = tmp_path / "ro.db"
    _table(path)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    error = _raised(lambda: db.execute("INSERT INTO t VALUES (1)"))
    db.close()
    fault = sqlite_fault(error, "finish")
    assert type(fault) is StoreUnavailable and "READONLY" in str(fault)


def test_not_a_database_is_permanent(tmp_path):
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database " * 512)
    db = sqlite3.connect(path)
    error = _raised(lambda: db.execute("SELECT * FROM sqlite_master"))
    db.close()
    fault = sqlite_fault(error, "open")
    assert not isinstance(fault, StoreUnavailable) and isinstance(fault, StoreError)


async def test_store_answers_unavailable_while_full_and_recovers(tmp_path):
    """A store whose file cannot grow raises StoreUnavailable (ingest: 503, workers: retry)
    and takes the same events once it can: nothing is half written."""
    async with SqliteStore(str(tmp_path / "h.db")) as store:
        pages = await store._run(  # the test caps the file's size
            lambda db: db.execute("PRAGMA page_count").fetchone()[0])
        await store._run(lambda db: db.execute(f"PRAGMA max_page_count = {pages}"))
        big = [new_event(f"e{i}", body=b'{"pad": "%s"}' % (b"x" * 20_000)) for i in range(5)]
        with pytest.raises(StoreUnavailable):
            await store.add_events(big)
        assert (await store.stats()).events == 0
        await store._run(
            lambda db: db.execute("PRAGMA max_page_count = 1073741823"))
        accepted = await store.add_events(big)
        assert len(accepted) == 5 and (await store.stats()).events == 5

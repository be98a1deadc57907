"""`hookline bench`'s idle check ("database_written") reads a stamp of the database before
and after the idle window (rehearsal/bench.py, _write_stamp): equal when nothing was
written, different after any write. On PostgreSQL its per-table rows come in table order:
UNION ALL promises none, and a changed row order read as a write."""

from __future__ import annotations

from hookline.rehearsal.bench import _PG_TABLES, _write_stamp
from hookline.shared.store import Store
from hookline.shared.store.postgres import PostgresStore
from tests.conftest import is_postgres


def _db(store: Store, store_url: str) -> str:
    return store_url if is_postgres(store_url) else str(store.path)  # type: ignore[attr-defined]


async def test_the_stamp_changes_with_a_write_and_only_then(store, store_url,
                                                            destination_factory):
    db = _db(store, store_url)
    await destination_factory("d")
    before = _write_stamp(db)
    assert _write_stamp(db) == before
    await destination_factory("e")
    assert _write_stamp(db) != before


async def test_postgresql_stamp_rows_come_in_table_order(pg_url):
    async with PostgresStore(pg_url):  # the schema
        pass
    assert [row[0] for row in _write_stamp(pg_url)] == sorted(_PG_TABLES)

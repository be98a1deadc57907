"""Copy a SQLite hookline database into an empty PostgreSQL one (`hookline migrate-store`).

Everything moves with its ids: tenants (the target's own `_default` row, made by its
migration, is replaced by the source's), destinations, sources (when the table exists),
events with their exact body bytes, jobs in every state (pending, running with their leases,
done, dead) and attempts; the PostgreSQL id sequences are then moved past the copied ids.
Both schemas are migrated to the newest version first, so their columns line up; a column
only one side has is left to its default. The subscription index
(`destination_subscriptions`) is not copied: the target's trigger fills it as each
destination row arrives. The copy reads one SQLite snapshot and writes in ONE PostgreSQL
transaction: it lands whole or not at all. Stop the service first: jobs claimed in SQLite
after the snapshot would not be copied.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import asyncpg

from hookline.shared.errors import StoreError
from hookline.shared.store.postgres import PostgresStore
from hookline.shared.store.sqlite import SqliteStore

# Parents before children (foreign keys); tables missing on either side are skipped.
# metric_counts holds /metrics' maintained figures (counters that include what retention
# purged cannot be counted again from the rows, so they are copied too).
TABLES = ("tenants", "destinations", "sources", "events", "jobs", "attempts", "metric_counts",
          "event_types", "event_type_schemas", "catalogue_state")
# Rows a freshly migrated target already holds (table -> the condition selecting them): they
# do not make it "not empty", and the source's copies replace them.
SEEDED = {"tenants": "id = '_default'", "metric_counts": "true", "catalogue_state": "true"}
ORDER = {"metric_counts": "family, destination_id, label", "event_types": "name",
         "event_type_schemas": "event_type, version"}
"""The copy order of a table without an `id` (its primary key)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyResult:
    """Rows copied per table, in copy order."""

    rows: dict[str, int]


async def copy_sqlite_to_postgres(sqlite_path: str, postgres_url: str) -> CopyResult:
    """Copy every hookline row from the SQLite file into the PostgreSQL database.

    Args:
        sqlite_path: the source database file (must exist).
        postgres_url: the target; its hookline tables must be empty.

    Returns:
        The number of rows copied per table.

    Raises:
        StoreError: the source is missing or unreadable, the target is unreachable or not
            empty, or a row is refused by the target (nothing is written then).

    While it copies it holds the source's write lock: another writer waits, then fails as
    busy, and nothing committed after the snapshot can be left behind.
    """
    # Migrate the source to the newest schema, and fold the metric deltas its writers
    # appended (metric_count_deltas) into metric_counts, which is what is copied.
    async with SqliteStore(sqlite_path) as store:
        await store.fold_metric_deltas()
    async with PostgresStore(postgres_url):  # create / migrate the target schema
        pass
    source = sqlite3.connect(f"file:{sqlite_path}?mode=rw", uri=True, timeout=5.0)
    source.row_factory = sqlite3.Row
    try:
        # One snapshot for every table, holding SQLite's write lock until the copy ends: a
        # hookline command writing meanwhile (`destinations add`, `replay`...) is refused as
        # busy rather than committing what PostgreSQL would never get. Nothing is written.
        source.execute("BEGIN IMMEDIATE")
        conn = await asyncpg.connect(postgres_url)
        try:
            async with conn.transaction():
                return CopyResult(rows=await _copy_all(source, conn))
        except asyncpg.PostgresError as exc:
            raise StoreError(f"the copy was refused by PostgreSQL, nothing was written: "
                             f"{exc}") from exc
        finally:
            await conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read {sqlite_path}: {exc}") from exc
    finally:
        source.close()


async def _copy_all(source: sqlite3.Connection, conn: asyncpg.Connection) -> dict[str, int]:
    src_tables = {r[0] for r in source.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    dst_columns: dict[str, dict[str, str]] = {}
    for r in await conn.fetch(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema()"):
        dst_columns.setdefault(r["table_name"], {})[r["column_name"]] = r["data_type"]
    tables = [t for t in TABLES if t in src_tables and t in dst_columns]
    for table in tables:
        others = f" WHERE NOT ({SEEDED[table]})" if table in SEEDED else ""
        if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {table}{others})"):  # noqa: S608  (table names and conditions from the fixed TABLES and SEEDED)
            raise StoreError(f"the target already holds {table}; migrate-store copies into "
                             "an empty database only")
    for table, seeded in SEEDED.items():
        if table in tables:
            await conn.execute(f"DELETE FROM {table} WHERE {seeded}")  # noqa: S608  (from the fixed SEEDED)
    copied: dict[str, int] = {}
    for table in tables:
        src_cols = [r[1] for r in source.execute(f"PRAGMA table_info({table})")]
        columns = [c for c in src_cols if c in dst_columns[table]]
        types = [dst_columns[table][c] for c in columns]
        records = [tuple(_convert(row[c], t) for c, t in zip(columns, types, strict=True))
                   for row in source.execute(
                       f"SELECT {', '.join(columns)} FROM {table} "  # noqa: S608  (names from TABLES, ORDER and the target's catalogue)
                       f"ORDER BY {ORDER.get(table, 'id')}")]
        if records:
            await conn.copy_records_to_table(table, records=records, columns=columns)
        if dst_columns[table].get("id") in ("integer", "bigint"):  # tenants' ids are text
            await conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # noqa: S608  (table names from the fixed TABLES list)
                f"coalesce((SELECT max(id) FROM {table}), 0) + 1, false)")
        copied[table] = len(records)
    return copied


def _convert(value: Any, pg_type: str) -> Any:
    """A SQLite value as the target column wants it (0/1 -> boolean, blobs -> bytes)."""
    if value is None:
        return None
    if pg_type == "boolean":
        return bool(value)
    if pg_type == "bytea":
        return bytes(value) if not isinstance(value, str) else value.encode()
    if pg_type in ("integer", "bigint", "smallint"):
        return int(value)
    if pg_type == "double precision":
        return float(value)
    return value

-- hookline schema, version 23: nothing to change in PostgreSQL's tables. Its fold
-- (fold_metric_deltas in postgres.sql) reads the oldest pending job anew for every destination
-- whose pending count changed, as SQLite's trigger now does (sqlite_migrations/023), so the
-- writers leave the `oldest` row out beside a `pending` count row. A host still running the
-- previous version would fold the new rows without reading those destinations' oldest
-- pending job: upgrade every host together. A statement all the same: asyncpg refuses a
-- script of comments alone.
SELECT 1;

-- hookline schema, version 21: nothing to change on PostgreSQL, whose writers have appended
-- their metric deltas to metric_count_deltas since 011_metric_counts.sql.
-- (sqlite_migrations/021 makes SQLite's do the same.) A statement all the same: asyncpg
-- refuses a script of comments alone.
SELECT 1;

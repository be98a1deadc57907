-- hookline schema, version 20: nothing to change on PostgreSQL, whose jobs_status has held no
-- pending jobs since 006_claim_index.sql. (sqlite_migrations/020 makes SQLite's the same, so
-- ingest writes no jobs_status entry per job.) A statement all the same: asyncpg refuses a
-- script of comments alone.
SELECT 1;

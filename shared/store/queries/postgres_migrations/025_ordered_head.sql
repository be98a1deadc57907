-- hookline schema, version 25: nothing to change on PostgreSQL. (sqlite_migrations/025 gives
-- SQLite an index of the ordered destinations' unfinished jobs, jobs_ordered, so a claim
-- finds such a destination's head in one entry inside its write transaction; here the claim
-- still reads that destination's unfinished jobs and sorts them, with no single write lock
-- that every writer waits for.) A statement all the same: asyncpg refuses a script of
-- comments alone.
SELECT 1;

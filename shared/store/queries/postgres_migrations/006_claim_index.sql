-- hookline schema, version 6 (sqlite_migrations/006_claim_index.sql is a no-op): claims
-- walk jobs_due whatever the table statistics say. Without statistics (a new or fast-growing
-- jobs table, before autovacuum's next ANALYZE) the planner took jobs_status for a claim's
-- "due pending jobs of one destination, oldest first, LIMIT n" and sorted the whole backlog
-- on every claim. Pending jobs are covered by jobs_due (and counted through it), so
-- jobs_status no longer holds them and cannot be mistaken for the claim's index.
DROP INDEX jobs_status;
CREATE INDEX jobs_status ON jobs (status, destination_id) WHERE status <> 'pending';

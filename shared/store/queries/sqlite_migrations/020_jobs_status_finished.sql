-- hookline schema, version 20: jobs_status no longer holds pending jobs, as on PostgreSQL
-- since postgres_migrations/006. Every ingested job wrote an entry keyed (pending,
-- destination_id) there: with many destinations each lands on a leaf page of its own, some 53
-- more pages written to the WAL and fsynced per commit of 64 events with 10,000 destinations
-- (ingest CPU per event 138 -> 103 us there, 74 -> 61.5 us with 10). Pending jobs are read
-- through jobs_due, running ones through jobs_leased; the queries that read finished jobs
-- through jobs_status name its term (status <> 'pending'), which SQLite's planner needs to
-- take a partial index.
DROP INDEX jobs_status;
CREATE INDEX jobs_status ON jobs (status, destination_id) WHERE status <> 'pending';

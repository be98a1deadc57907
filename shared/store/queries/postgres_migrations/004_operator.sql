-- hookline schema, version 4 (mirrors sqlite_migrations/004_operator.sql).
ALTER TABLE events ADD COLUMN body_purged_at double precision;
ALTER TABLE jobs ADD COLUMN replays integer NOT NULL DEFAULT 0;
CREATE INDEX jobs_finished ON jobs (status, finished_at) WHERE status IN ('done', 'dead');
CREATE INDEX events_received ON events (received_at);

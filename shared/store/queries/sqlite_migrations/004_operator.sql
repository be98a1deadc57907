-- hookline schema, version 4: operator controls (dead letters, replay, purge/retention).
-- A purged event keeps its row (message_id and the (source, source_event_id) dedupe key) but
-- its body becomes the empty blob and body_purged_at records when; replay refuses it.
ALTER TABLE events ADD COLUMN body_purged_at REAL;
-- How many times an operator replayed the job (dead -> pending, attempt budget reset).
ALTER TABLE jobs ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;
-- Dead-letter listing and retention both read terminal jobs by age.
CREATE INDEX jobs_finished ON jobs (status, finished_at) WHERE status IN ('done', 'dead');
CREATE INDEX events_received ON events (received_at);

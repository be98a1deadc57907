-- hookline schema, version 14: the live destinations (not paused, not removed) in id order,
-- so that a claim's window (claim_window) steps from one live destination to the next with
-- one index search, however many paused or removed destinations lie between. Mirrors
-- postgres_migrations/014_live_destinations.sql.
CREATE INDEX destinations_live ON destinations (id) WHERE paused = 0 AND deleted_at IS NULL;

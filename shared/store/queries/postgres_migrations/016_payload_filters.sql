-- hookline schema, version 16: a payload filter per destination (shared/policy/filters.py), a
-- JSON object checked by the rule book; NULL: none, every subscribed event is delivered.
-- Fan-out reads it inside ingest's transaction (shared/store/filter_tx.py). Mirrors
-- sqlite_migrations/016_payload_filters.sql.
ALTER TABLE destinations ADD COLUMN filter text;

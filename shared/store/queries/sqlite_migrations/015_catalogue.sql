-- The event-type catalogue: the types a SaaS sends, each with versioned JSON Schemas (draft
-- 2020-12) of its `data` and an example per version. Optional: with no rows, hookline
-- behaves as before it existed. `catalogue_state.revision` goes up with every change, so
-- each ingest process notices one with a one-row read (ingest/catalogue_cache.py).
CREATE TABLE event_types (
    name         TEXT PRIMARY KEY,  -- event type rules (shared/policy/inputs.py)
    description  TEXT NOT NULL DEFAULT '',
    validation   TEXT NOT NULL DEFAULT 'off' CHECK (validation IN ('off', 'warn', 'reject')),
    deprecated   INTEGER NOT NULL DEFAULT 0 CHECK (deprecated IN (0, 1)),
    archived     INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE event_type_schemas (
    event_type  TEXT NOT NULL REFERENCES event_types (name) ON DELETE CASCADE,
    version     INTEGER NOT NULL CHECK (version >= 1),
    schema      TEXT NOT NULL,  -- JSON Schema of the event's `data`
    example     TEXT,           -- JSON example of `data` (NULL: none)
    PRIMARY KEY (event_type, version)
) WITHOUT ROWID;
CREATE TABLE catalogue_state (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    revision  INTEGER NOT NULL
);
INSERT INTO catalogue_state (id, revision) VALUES (1, 0);
-- warn mode's mark: where the event's `data` first failed its schema (NULL: it did not)
ALTER TABLE events ADD COLUMN schema_problem TEXT;

-- hookline schema, version 1. Instants are unix seconds (REAL).
CREATE TABLE destinations (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    name           TEXT NOT NULL UNIQUE,
    url            TEXT NOT NULL,
    secret         TEXT NOT NULL,
    event_types    TEXT NOT NULL DEFAULT '["*"]',  -- JSON list of patterns
    max_in_flight  INTEGER NOT NULL DEFAULT 10 CHECK (max_in_flight >= 1),
    paused         INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    paused_reason  TEXT,
    created_at     REAL NOT NULL,
    deleted_at     REAL
);

-- AUTOINCREMENT: ids are never reused, not even after deletes or a restore.
CREATE TABLE events (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id       TEXT NOT NULL UNIQUE,
    source           TEXT NOT NULL,
    source_event_id  TEXT NOT NULL,
    type             TEXT NOT NULL,
    body             BLOB NOT NULL,
    received_at      REAL NOT NULL,
    UNIQUE (source, source_event_id)
);

CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        INTEGER NOT NULL REFERENCES events (id),
    destination_id  INTEGER NOT NULL REFERENCES destinations (id),
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'running', 'done', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    run_at          REAL NOT NULL,
    lease_token     TEXT,
    lease_owner     TEXT,
    lease_until     REAL,
    last_error      TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    finished_at     REAL,
    CHECK ((status = 'running') = (lease_token IS NOT NULL))
);
-- Claims read due pending jobs per destination in run_at order, and expired leases.
CREATE INDEX jobs_due ON jobs (destination_id, run_at) WHERE status = 'pending';
CREATE INDEX jobs_leased ON jobs (destination_id, lease_until) WHERE status = 'running';
CREATE INDEX jobs_status ON jobs (status, destination_id);
CREATE INDEX jobs_event ON jobs (event_id);

-- One row per claim (= one attempt), written at claim and completed by finish.
CREATE TABLE attempts (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id            INTEGER NOT NULL REFERENCES jobs (id),
    attempt           INTEGER NOT NULL,
    worker            TEXT NOT NULL,
    lease_token       TEXT NOT NULL UNIQUE,
    started_at        REAL NOT NULL,
    duration_s        REAL,
    status_code       INTEGER,
    error             TEXT,
    response_excerpt  TEXT
);
CREATE INDEX attempts_job ON attempts (job_id, attempt);

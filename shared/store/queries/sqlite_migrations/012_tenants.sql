-- Tenants: the SaaS's customers. Every destination belongs to one; an event is published for
-- one, and its idempotency key becomes (tenant, source, source event id). Databases made
-- before tenants keep working unchanged in the reserved tenant `_default`.
-- SQLite cannot drop a UNIQUE constraint in place, so destinations (small) and events (large:
-- this step rewrites it once, time and disk in proportion to its size) are rebuilt; the
-- migration runner turns foreign keys off for the rebuild and checks them before commit.
CREATE TABLE tenants (
    id                TEXT PRIMARY KEY,  -- the caller's own id (event id character rules)
    name              TEXT NOT NULL DEFAULT '',
    metadata          TEXT NOT NULL DEFAULT '{}',  -- small JSON object
    max_destinations  INTEGER CHECK (max_destinations IS NULL OR max_destinations >= 0),
    disabled          INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    -- tokens carry it; a new random value revokes them all at once (random, so a tenant
    -- deleted and created again does not accept its predecessor's tokens)
    token_epoch       INTEGER NOT NULL DEFAULT 0,
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL
) WITHOUT ROWID;
INSERT INTO tenants (id, name, created_at, updated_at)
VALUES ('_default', 'default', (julianday('now') - 2440587.5) * 86400.0,
        (julianday('now') - 2440587.5) * 86400.0);

CREATE TABLE destinations_new (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    name                   TEXT NOT NULL,
    url                    TEXT NOT NULL,
    secret                 TEXT NOT NULL,
    event_types            TEXT NOT NULL DEFAULT '["*"]',
    max_in_flight          INTEGER NOT NULL DEFAULT 10 CHECK (max_in_flight >= 1),
    paused                 INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    paused_reason          TEXT,
    created_at             REAL NOT NULL,
    deleted_at             REAL,
    previous_secret        TEXT,
    previous_secret_until  REAL,
    failure_streak         INTEGER NOT NULL DEFAULT 0,
    failing_since          REAL,
    timeout_s              REAL CHECK (timeout_s IS NULL OR timeout_s > 0),
    rate_limit_per_s       REAL CHECK (rate_limit_per_s IS NULL OR rate_limit_per_s > 0),
    next_send_at           REAL NOT NULL DEFAULT 0,
    ordered                INTEGER NOT NULL DEFAULT 0 CHECK (ordered IN (0, 1)),
    headers                TEXT NOT NULL DEFAULT '{}',
    -- last, as PostgreSQL's ALTER TABLE puts it; no foreign key: deleting a tenant keeps its
    -- removed destinations for their jobs' history
    tenant_id              TEXT NOT NULL DEFAULT '_default',
    UNIQUE (tenant_id, name)
);
INSERT INTO destinations_new (id, tenant_id, name, url, secret, event_types, max_in_flight,
    paused, paused_reason, created_at, deleted_at, previous_secret, previous_secret_until,
    failure_streak, failing_since, timeout_s, rate_limit_per_s, next_send_at, ordered, headers)
SELECT id, '_default', name, url, secret, event_types, max_in_flight, paused, paused_reason,
    created_at, deleted_at, previous_secret, previous_secret_until, failure_streak,
    failing_since, timeout_s, rate_limit_per_s, next_send_at, ordered, headers
FROM destinations;
DROP TABLE destinations;
ALTER TABLE destinations_new RENAME TO destinations;
CREATE INDEX destinations_tenant ON destinations (tenant_id, id) WHERE deleted_at IS NULL;

CREATE TABLE events_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id         TEXT NOT NULL UNIQUE,
    source             TEXT NOT NULL,
    source_event_id    TEXT NOT NULL,
    type               TEXT NOT NULL,
    body               BLOB NOT NULL,
    received_at        REAL NOT NULL,
    body_purged_at     REAL,
    forwarded_headers  TEXT,
    tenant_id          TEXT NOT NULL DEFAULT '_default',
    UNIQUE (tenant_id, source, source_event_id)
);
INSERT INTO events_new (id, tenant_id, message_id, source, source_event_id, type, body,
    received_at, body_purged_at, forwarded_headers)
SELECT id, '_default', message_id, source, source_event_id, type, body, received_at,
    body_purged_at, forwarded_headers
FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_received ON events (received_at);
CREATE INDEX events_tenant ON events (tenant_id, id);

-- The subscription index: one row per (tenant, pattern, live destination). Ingest's fan-out
-- looks up an event's candidate patterns (its type, each `prefix.*` above it, `*`) here, so
-- one event costs what the destinations it reaches cost, not what exists. Triggers keep it in
-- step with every change to destinations, whichever path (API, restore, copy) makes it.
CREATE TABLE destination_subscriptions (
    tenant_id       TEXT NOT NULL,
    pattern         TEXT NOT NULL,
    destination_id  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, pattern, destination_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO destination_subscriptions (tenant_id, pattern, destination_id)
SELECT d.tenant_id, p.value, d.id FROM destinations d, json_each(d.event_types) p
WHERE d.deleted_at IS NULL;
CREATE TRIGGER destination_subscriptions_insert AFTER INSERT ON destinations
WHEN NEW.deleted_at IS NULL BEGIN INSERT OR IGNORE INTO destination_subscriptions (tenant_id, pattern, destination_id) SELECT NEW.tenant_id, p.value, NEW.id FROM json_each(NEW.event_types) p; END;
CREATE TRIGGER destination_subscriptions_update
AFTER UPDATE OF event_types, deleted_at, tenant_id ON destinations
BEGIN DELETE FROM destination_subscriptions WHERE tenant_id = OLD.tenant_id AND destination_id = OLD.id AND pattern IN (SELECT value FROM json_each(OLD.event_types)); INSERT OR IGNORE INTO destination_subscriptions (tenant_id, pattern, destination_id) SELECT NEW.tenant_id, p.value, NEW.id FROM json_each(NEW.event_types) p WHERE NEW.deleted_at IS NULL; END;
CREATE TRIGGER destination_subscriptions_delete AFTER DELETE ON destinations
BEGIN DELETE FROM destination_subscriptions WHERE tenant_id = OLD.tenant_id AND destination_id = OLD.id AND pattern IN (SELECT value FROM json_each(OLD.event_types)); END;

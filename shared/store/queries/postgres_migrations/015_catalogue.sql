-- The event-type catalogue (mirrors sqlite_migrations/015_catalogue.sql).
CREATE TABLE event_types (
    name         text PRIMARY KEY,
    description  text NOT NULL DEFAULT '',
    validation   text NOT NULL DEFAULT 'off' CHECK (validation IN ('off', 'warn', 'reject')),
    deprecated   boolean NOT NULL DEFAULT false,
    archived     boolean NOT NULL DEFAULT false,
    created_at   double precision NOT NULL,
    updated_at   double precision NOT NULL
);
CREATE TABLE event_type_schemas (
    event_type  text NOT NULL REFERENCES event_types (name) ON DELETE CASCADE,
    version     integer NOT NULL CHECK (version >= 1),
    schema      text NOT NULL,
    example     text,
    PRIMARY KEY (event_type, version)
);
CREATE TABLE catalogue_state (
    id        integer PRIMARY KEY CHECK (id = 1),
    revision  bigint NOT NULL
);
INSERT INTO catalogue_state (id, revision) VALUES (1, 0);
ALTER TABLE events ADD COLUMN schema_problem text;

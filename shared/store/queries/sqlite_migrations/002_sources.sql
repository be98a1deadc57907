-- hookline schema, version 2: inbound sources. Instants are unix seconds (REAL).
-- A source is a provider that posts to POST /v1/sources/{name}; `scheme` says how its
-- requests are verified and `secret` is its signing secret or bearer token (never logged).
-- Removal is soft: the row stays, renamed `name~removed-ID`, so the name can be reused.
CREATE TABLE sources (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    scheme      TEXT NOT NULL CHECK (scheme IN ('github', 'stripe', 'standard', 'token')),
    secret      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    deleted_at  REAL
);

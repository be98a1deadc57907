-- Keys the service signs with, one row per purpose (`tenant_tokens`: tenant API tokens). A
-- key is made on first use by whichever process needs it first (INSERT ... ON CONFLICT DO
-- NOTHING, then read back), so every process and host of one database signs and verifies
-- with the same key. Mirrors postgres_migrations/013_signing_keys.sql.
CREATE TABLE signing_keys (
    purpose     TEXT PRIMARY KEY,
    key         TEXT NOT NULL,  -- hex
    created_at  REAL NOT NULL
);

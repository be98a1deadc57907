-- Keys the service signs with (mirrors sqlite_migrations/013_signing_keys.sql): one row per
-- purpose, made on first use by whichever process needs it first, so every host of a shared
-- database signs and verifies tenant tokens with the same key.
CREATE TABLE signing_keys (
    purpose     text PRIMARY KEY,
    key         text NOT NULL,  -- hex
    created_at  double precision NOT NULL
);

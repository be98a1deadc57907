-- hookline schema, version 3 (mirrors sqlite_migrations/003_delivery_policy.sql).
ALTER TABLE destinations ADD COLUMN previous_secret text;
ALTER TABLE destinations ADD COLUMN previous_secret_until double precision;
ALTER TABLE destinations ADD COLUMN failure_streak integer NOT NULL DEFAULT 0;
ALTER TABLE destinations ADD COLUMN failing_since double precision;
ALTER TABLE destinations ADD COLUMN timeout_s double precision
    CHECK (timeout_s IS NULL OR timeout_s > 0);
ALTER TABLE destinations ADD COLUMN rate_limit_per_s double precision
    CHECK (rate_limit_per_s IS NULL OR rate_limit_per_s > 0);
ALTER TABLE destinations ADD COLUMN next_send_at double precision NOT NULL DEFAULT 0;
ALTER TABLE destinations ADD COLUMN ordered integer NOT NULL DEFAULT 0 CHECK (ordered IN (0, 1));
ALTER TABLE attempts ADD COLUMN response_headers text;
ALTER TABLE attempts ADD COLUMN location text;

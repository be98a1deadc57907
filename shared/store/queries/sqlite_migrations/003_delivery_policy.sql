-- hookline schema, version 3: delivery policy. Instants are unix seconds (REAL).
-- Secret rotation: the previous secret is still signed with until previous_secret_until.
ALTER TABLE destinations ADD COLUMN previous_secret TEXT;
ALTER TABLE destinations ADD COLUMN previous_secret_until REAL;
-- Circuit breaker: consecutive failed attempts and when the current failure run began.
ALTER TABLE destinations ADD COLUMN failure_streak INTEGER NOT NULL DEFAULT 0;
ALTER TABLE destinations ADD COLUMN failing_since REAL;
-- Per-destination overrides: attempt timeout (NULL = attempt_timeout_s), rate limit
-- (NULL = none; next_send_at is advanced inside the claim transaction), FIFO mode.
ALTER TABLE destinations ADD COLUMN timeout_s REAL CHECK (timeout_s IS NULL OR timeout_s > 0);
ALTER TABLE destinations ADD COLUMN rate_limit_per_s REAL
    CHECK (rate_limit_per_s IS NULL OR rate_limit_per_s > 0);
ALTER TABLE destinations ADD COLUMN next_send_at REAL NOT NULL DEFAULT 0;
ALTER TABLE destinations ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0 CHECK (ordered IN (0, 1));
-- Attempts keep a capped excerpt of the response headers and a redirect's Location.
ALTER TABLE attempts ADD COLUMN response_headers TEXT;
ALTER TABLE attempts ADD COLUMN location TEXT;

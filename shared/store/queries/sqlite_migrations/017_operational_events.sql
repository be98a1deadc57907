-- hookline schema, version 17: operational events (hookline.destination.*, hookline.dead_letters.*).
-- notified_state is what subscribers were last told about a destination ('ok', 'failing',
-- 'paused'): the transaction that changes a destination's failure run or pause state reads
-- and sets it, so each state change is announced once, across restarts and hosts.
-- dead_letters_unnoticed counts the jobs that died since the last hookline.dead_letters.growing
-- (dead_letters_noticed_at: when that was). body_format 'slack' delivers operational events
-- as {"text": ...} (a chat tool's incoming webhook). Mirrors postgres_migrations/017.
ALTER TABLE destinations ADD COLUMN notified_state TEXT NOT NULL DEFAULT 'ok'
    CHECK (notified_state IN ('ok', 'failing', 'paused'));
ALTER TABLE destinations ADD COLUMN dead_letters_unnoticed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE destinations ADD COLUMN dead_letters_noticed_at REAL;
ALTER TABLE destinations ADD COLUMN body_format TEXT NOT NULL DEFAULT 'standard'
    CHECK (body_format IN ('standard', 'slack'));

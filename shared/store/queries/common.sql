-- Named queries whose text is the same in both dialects; each backend's own file
-- (sqlite.sql, postgres.sql) adds the rest. Parameters are :named.

-- live_destinations: destinations that receive new events (paused ones too: their jobs wait)
SELECT * FROM destinations WHERE deleted_at IS NULL ORDER BY id

-- mark_attempt_handed_back: the attempt row of a handed-back claim
UPDATE attempts SET error = 'handed back (graceful stop)' WHERE lease_token = :lease_token
    AND duration_s IS NULL

-- get_destination: one live destination by name
SELECT * FROM destinations WHERE name = :name AND deleted_at IS NULL

-- expire_previous_secret: forget the secret before the last rotation (it signs no more)
UPDATE destinations SET previous_secret = NULL, previous_secret_until = NULL
WHERE name = :name AND deleted_at IS NULL
RETURNING *

-- jobs_by_status: job counts per status
SELECT status, count(*) AS n FROM jobs GROUP BY status

-- count_events: number of stored events
SELECT count(*) AS n FROM events

-- count_attempts: number of recorded attempts
SELECT count(*) AS n FROM attempts

-- replay_job_state: why one job can or cannot be replayed
SELECT j.id, j.status, d.deleted_at, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.id = :job_id

-- purge_attempts: attempt rows of done jobs that ended before :before and of dead jobs that
-- died before :dead_before
DELETE FROM attempts WHERE job_id IN (
    SELECT id FROM jobs WHERE (status = 'done' AND finished_at < :before)
        OR (status = 'dead' AND finished_at < :dead_before))

-- purge_jobs: done jobs that ended before :before, dead jobs that died before :dead_before
DELETE FROM jobs WHERE (status = 'done' AND finished_at < :before)
    OR (status = 'dead' AND finished_at < :dead_before)

-- purge_events: events (dedupe keys) older than the cutoff that have no job left
DELETE FROM events WHERE received_at < :before
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_id = events.id)

-- get_job: one job with its event and destination
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at, j.replays, e.source, e.source_event_id, e.received_at,
    length(e.body) AS body_bytes, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.id = :job_id

-- jobs_by_destination_status: job counts per destination and status (removed ones included)
SELECT d.name AS destination, j.status, count(*) AS n
FROM jobs j JOIN destinations d ON d.id = j.destination_id
GROUP BY d.name, j.status

-- ordered_head: an ordered destination's oldest unfinished job (FIFO: only it may be sent)
SELECT id, status, run_at, lease_until, attempts FROM jobs
WHERE destination_id = :destination_id AND status IN ('pending', 'running')
ORDER BY id LIMIT 1

-- advance_next_send: rate limit bookkeeping inside the claim transaction (GCRA arrival time)
UPDATE destinations SET next_send_at = :next_send_at WHERE id = :destination_id

-- get_source: one live source by name
SELECT * FROM sources WHERE name = :name AND deleted_at IS NULL

-- live_sources: live sources in creation order
SELECT * FROM sources WHERE deleted_at IS NULL ORDER BY id

-- attempts_by_outcome: attempt counts by outcome class
SELECT CASE
        WHEN error LIKE 'lease expired%' OR error LIKE 'worker lost%' THEN 'worker_lost'
        WHEN status_code BETWEEN 200 AND 299 THEN 'delivered'
        WHEN status_code IS NOT NULL THEN 'http_' || CAST(status_code / 100 AS TEXT) || 'xx'
        WHEN error LIKE 'handed back%' THEN 'handed_back'
        WHEN error IS NOT NULL THEN 'transport_error'
        ELSE 'in_flight'
    END AS outcome, COUNT(*) AS n
FROM attempts GROUP BY 1

-- find_event_by_id: one event's facts by its internal id (the lookup shows no body)
SELECT id, message_id, source, source_event_id, type, received_at,
    length(body) AS body_bytes, body_purged_at
FROM events WHERE id = :event_id

-- find_event_by_message_id: one event's facts by its webhook-id
SELECT id, message_id, source, source_event_id, type, received_at,
    length(body) AS body_bytes, body_purged_at
FROM events WHERE message_id = :message_id

-- find_event_by_source_id: one event's facts by the sender's id within its source
SELECT id, message_id, source, source_event_id, type, received_at,
    length(body) AS body_bytes, body_purged_at
FROM events WHERE source = :source AND source_event_id = :source_event_id

-- event_jobs: an event's jobs with their destination's name, by id
SELECT j.id, j.event_id, d.name AS destination, j.status, j.attempts, j.run_at, j.last_error,
    j.created_at, j.finished_at, j.replays
FROM jobs j JOIN destinations d ON d.id = j.destination_id
WHERE j.event_id = :event_id ORDER BY j.id

-- attempt_id_range: the smallest and the largest attempt id (both NULL when there is none)
SELECT (SELECT MIN(id) FROM attempts) AS bottom, (SELECT MAX(id) FROM attempts) AS top

-- first_attempt_after: the first attempt row after id :after_id (its start time)
SELECT id, started_at FROM attempts WHERE id > :after_id ORDER BY id LIMIT 1

-- Named queries for the SQLite store (shared/sqlite_store.py). Parameters are :named.

-- insert_event: store one event unless its (source, source_event_id) exists
INSERT INTO events (message_id, source, source_event_id, type, body, received_at)
VALUES (:message_id, :source, :source_event_id, :type, :body, :now)
ON CONFLICT (source, source_event_id) DO NOTHING
RETURNING id, message_id

-- find_event: the stored event for an idempotency key
SELECT id, message_id FROM events WHERE source = :source AND source_event_id = :source_event_id

-- insert_job: one delivery job for an event and a destination, due now
INSERT INTO jobs (event_id, destination_id, run_at, created_at, updated_at)
VALUES (:event_id, :destination_id, :now, :now, :now)
RETURNING id

-- live_destinations: destinations that receive new events (paused ones too: their jobs wait)
SELECT * FROM destinations WHERE deleted_at IS NULL ORDER BY id

-- destination_slots: free in-flight slots per active destination (expired leases do not count)
SELECT d.id, d.max_in_flight - (
    SELECT COUNT(*) FROM jobs j
    WHERE j.destination_id = d.id AND j.status = 'running' AND j.lease_until > :now
) AS free
FROM destinations d
WHERE d.paused = 0 AND d.deleted_at IS NULL

-- due_jobs: claimable jobs of one destination, oldest due first (pending due, or lease expired)
SELECT id, run_at FROM (
    SELECT id, run_at FROM jobs
    WHERE destination_id = :destination_id AND status = 'pending' AND run_at <= :now
    ORDER BY run_at LIMIT :limit
)
UNION ALL
SELECT id, lease_until FROM (
    SELECT id, lease_until FROM jobs
    WHERE destination_id = :destination_id AND status = 'running' AND lease_until <= :now
    ORDER BY lease_until LIMIT :limit
)
ORDER BY 2 LIMIT :limit

-- kill_lost_at_cap: an expired lease on a job that used its last attempt means the worker died on it
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = 'worker lost (lease expired on the final attempt)', finished_at = :now,
    updated_at = :now
WHERE status = 'running' AND lease_until <= :now AND attempts >= :max_attempts
RETURNING id

-- claim_job: take one job under a fresh lease; attempts are counted here, at claim
UPDATE jobs SET status = 'running', attempts = attempts + 1,
    lease_token = lower(hex(randomblob(16))), lease_owner = :worker,
    lease_until = :now + :lease_s, updated_at = :now
WHERE id = :id AND (
    (status = 'pending' AND run_at <= :now) OR (status = 'running' AND lease_until <= :now))
RETURNING id, event_id, destination_id, attempts, lease_token, lease_until

-- mark_attempt_lost: the previous claim of a taken-over job never finished
UPDATE attempts SET error = 'lease expired (worker lost)'
WHERE job_id = :job_id AND duration_s IS NULL AND error IS NULL AND lease_token != :lease_token

-- insert_attempt: one attempt row per claim
INSERT INTO attempts (job_id, attempt, worker, lease_token, started_at)
VALUES (:job_id, :attempt, :worker, :lease_token, :now)

-- claim_details: what a worker needs to send a claimed job
SELECT e.message_id, e.type, e.body, d.name, d.url, d.secret
FROM events e, destinations d WHERE e.id = :event_id AND d.id = :destination_id

-- extend_lease: push a lease's expiry out; fenced by the lease token
UPDATE jobs SET lease_until = :until
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- finish_done: the destination acknowledged; fenced by the lease token
UPDATE jobs SET status = 'done', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = NULL, finished_at = :now, updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- finish_retry: schedule the next attempt; fenced by the lease token
UPDATE jobs SET status = 'pending', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    run_at = :run_at, last_error = :error, updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- finish_dead: no more attempts; fenced by the lease token
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = :error, finished_at = :now, updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- record_attempt: complete the attempt row of a claim (a stale claim's result is history too)
UPDATE attempts SET duration_s = :duration_s, status_code = :status_code, error = :error,
    response_excerpt = :response_excerpt, started_at = :started_at
WHERE lease_token = :lease_token

-- hand_back: return a claimed job to pending without charging the attempt; fenced
UPDATE jobs SET status = 'pending', attempts = attempts - 1, lease_token = NULL,
    lease_owner = NULL, lease_until = NULL, run_at = :now, updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- mark_attempt_handed_back: the attempt row of a handed-back claim
UPDATE attempts SET error = 'handed back (graceful stop)' WHERE lease_token = :lease_token
    AND duration_s IS NULL

-- insert_destination: register a destination
INSERT INTO destinations (name, url, secret, event_types, max_in_flight, created_at)
VALUES (:name, :url, :secret, :event_types, :max_in_flight, :now)
RETURNING *

-- get_destination: one live destination by name
SELECT * FROM destinations WHERE name = :name AND deleted_at IS NULL

-- set_paused: pause or resume a destination
UPDATE destinations SET paused = :paused, paused_reason = :reason
WHERE name = :name AND deleted_at IS NULL

-- list_jobs: jobs with their event and destination, newest first
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE (:status IS NULL OR j.status = :status) ORDER BY j.id DESC LIMIT :limit

-- list_attempts: attempts of one job, or of all jobs when job_id is NULL, oldest first
SELECT job_id, attempt, worker, lease_token, started_at, duration_s, status_code, error,
    response_excerpt
FROM attempts WHERE (:job_id IS NULL OR job_id = :job_id) ORDER BY id LIMIT :limit

-- jobs_by_status: job counts per status
SELECT status, COUNT(*) AS n FROM jobs GROUP BY status

-- count_events: number of stored events
SELECT COUNT(*) AS n FROM events

-- count_attempts: number of recorded attempts
SELECT COUNT(*) AS n FROM attempts

-- oldest_pending: run_at of the longest-waiting due pending job
SELECT MIN(run_at) AS oldest FROM jobs WHERE status = 'pending' AND run_at <= :now

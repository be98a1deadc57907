-- Named queries whose text is the same in both dialects; each backend's own file
-- (sqlite.sql, postgres.sql) adds the rest. Parameters are :named; :now is the transaction's
-- instant on the store's clock (SQLite: the store's clock; PostgreSQL: hookline_now()).

-- finish_retry: schedule the next attempt :delay_s seconds after now (the store's clock);
-- fenced by the lease token
UPDATE jobs SET status = 'pending', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    run_at = :now + :delay_s, last_error = :error, updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- live_destinations: destinations that receive new events (paused ones too: their jobs wait)
SELECT * FROM destinations WHERE deleted_at IS NULL ORDER BY id

-- mark_attempt_handed_back: the attempt row of a handed-back claim
UPDATE attempts SET error = 'handed back (graceful stop)' WHERE lease_token = :lease_token
    AND duration_s IS NULL

-- get_destination: one live destination by name
SELECT * FROM destinations WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL

-- expire_previous_secret: forget the secret before the last rotation (it signs no more)
UPDATE destinations SET previous_secret = NULL, previous_secret_until = NULL
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL
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

-- fold_purged_attempts: add the attempts purge_attempts is about to delete to purged_attempts (outcome classes as in attempts_by_outcome)
INSERT INTO purged_attempts (destination_id, outcome, n)
SELECT j.destination_id, CASE
        WHEN a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%' THEN 'worker_lost'
        WHEN a.status_code BETWEEN 200 AND 299 THEN 'delivered'
        WHEN a.status_code IS NOT NULL THEN 'http_' || CAST(a.status_code / 100 AS TEXT) || 'xx'
        WHEN a.error LIKE 'handed back%' THEN 'handed_back'
        WHEN a.error IS NOT NULL THEN 'transport_error'
        ELSE 'in_flight'
    END AS outcome, count(*) AS n
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE (j.status = 'done' AND j.finished_at < :before)
    OR (j.status = 'dead' AND j.finished_at < :dead_before)
GROUP BY j.destination_id, 2
ON CONFLICT (destination_id, outcome) DO UPDATE SET n = purged_attempts.n + excluded.n

-- fold_purged_latency: add the done jobs purge_jobs is about to delete to purged_latency
INSERT INTO purged_latency (destination_id, n, total, le_0_05, le_0_1, le_0_25, le_0_5, le_1, le_2_5, le_5, le_10, le_30, le_60, le_300, le_900, le_3600, le_21600, le_86400)
SELECT destination_id, count(*) AS n, COALESCE(SUM(lat), 0) AS total,
    SUM(CASE WHEN lat <= 0.05 THEN 1 ELSE 0 END) AS le_0_05,
    SUM(CASE WHEN lat <= 0.1 THEN 1 ELSE 0 END) AS le_0_1,
    SUM(CASE WHEN lat <= 0.25 THEN 1 ELSE 0 END) AS le_0_25,
    SUM(CASE WHEN lat <= 0.5 THEN 1 ELSE 0 END) AS le_0_5,
    SUM(CASE WHEN lat <= 1 THEN 1 ELSE 0 END) AS le_1,
    SUM(CASE WHEN lat <= 2.5 THEN 1 ELSE 0 END) AS le_2_5,
    SUM(CASE WHEN lat <= 5 THEN 1 ELSE 0 END) AS le_5,
    SUM(CASE WHEN lat <= 10 THEN 1 ELSE 0 END) AS le_10,
    SUM(CASE WHEN lat <= 30 THEN 1 ELSE 0 END) AS le_30,
    SUM(CASE WHEN lat <= 60 THEN 1 ELSE 0 END) AS le_60,
    SUM(CASE WHEN lat <= 300 THEN 1 ELSE 0 END) AS le_300,
    SUM(CASE WHEN lat <= 900 THEN 1 ELSE 0 END) AS le_900,
    SUM(CASE WHEN lat <= 3600 THEN 1 ELSE 0 END) AS le_3600,
    SUM(CASE WHEN lat <= 21600 THEN 1 ELSE 0 END) AS le_21600,
    SUM(CASE WHEN lat <= 86400 THEN 1 ELSE 0 END) AS le_86400
FROM (SELECT j.destination_id, j.finished_at - e.received_at AS lat
      FROM jobs j JOIN events e ON e.id = j.event_id
      WHERE j.status = 'done' AND j.finished_at < :before) AS purged
WHERE true
GROUP BY destination_id
ON CONFLICT (destination_id) DO UPDATE SET n = purged_latency.n + excluded.n,
    total = purged_latency.total + excluded.total,
    le_0_05 = purged_latency.le_0_05 + excluded.le_0_05,
    le_0_1 = purged_latency.le_0_1 + excluded.le_0_1,
    le_0_25 = purged_latency.le_0_25 + excluded.le_0_25,
    le_0_5 = purged_latency.le_0_5 + excluded.le_0_5,
    le_1 = purged_latency.le_1 + excluded.le_1,
    le_2_5 = purged_latency.le_2_5 + excluded.le_2_5,
    le_5 = purged_latency.le_5 + excluded.le_5,
    le_10 = purged_latency.le_10 + excluded.le_10,
    le_30 = purged_latency.le_30 + excluded.le_30,
    le_60 = purged_latency.le_60 + excluded.le_60,
    le_300 = purged_latency.le_300 + excluded.le_300,
    le_900 = purged_latency.le_900 + excluded.le_900,
    le_3600 = purged_latency.le_3600 + excluded.le_3600,
    le_21600 = purged_latency.le_21600 + excluded.le_21600,
    le_86400 = purged_latency.le_86400 + excluded.le_86400

-- attempts_by_destination_outcome: finished attempts per live destination and outcome class (as attempts_by_outcome), stored rows plus what retention purged
SELECT d.name AS destination, t.outcome, SUM(t.n) AS n
FROM (SELECT j.destination_id, CASE
        WHEN a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%' THEN 'worker_lost'
        WHEN a.status_code BETWEEN 200 AND 299 THEN 'delivered'
        WHEN a.status_code IS NOT NULL THEN 'http_' || CAST(a.status_code / 100 AS TEXT) || 'xx'
        WHEN a.error LIKE 'handed back%' THEN 'handed_back'
        WHEN a.error IS NOT NULL THEN 'transport_error'
        ELSE 'in_flight'
    END AS outcome, count(*) AS n
      FROM attempts a JOIN jobs j ON j.id = a.job_id
      GROUP BY j.destination_id, 2
      UNION ALL
      SELECT destination_id, outcome, n FROM purged_attempts) AS t
JOIN destinations d ON d.id = t.destination_id
WHERE d.deleted_at IS NULL AND t.outcome <> 'in_flight'
GROUP BY d.name, t.outcome

-- latency_by_destination: accept -> delivered seconds of done jobs per live destination, stored rows plus what retention purged, cumulative buckets
SELECT d.name AS destination, SUM(t.n) AS n, SUM(t.total) AS total,
    SUM(t.le_0_05) AS le_0_05, SUM(t.le_0_1) AS le_0_1, SUM(t.le_0_25) AS le_0_25, SUM(t.le_0_5) AS le_0_5, SUM(t.le_1) AS le_1, SUM(t.le_2_5) AS le_2_5, SUM(t.le_5) AS le_5, SUM(t.le_10) AS le_10, SUM(t.le_30) AS le_30, SUM(t.le_60) AS le_60, SUM(t.le_300) AS le_300, SUM(t.le_900) AS le_900, SUM(t.le_3600) AS le_3600, SUM(t.le_21600) AS le_21600, SUM(t.le_86400) AS le_86400
FROM (SELECT destination_id, count(*) AS n, COALESCE(SUM(lat), 0) AS total,
        SUM(CASE WHEN lat <= 0.05 THEN 1 ELSE 0 END) AS le_0_05,
        SUM(CASE WHEN lat <= 0.1 THEN 1 ELSE 0 END) AS le_0_1,
        SUM(CASE WHEN lat <= 0.25 THEN 1 ELSE 0 END) AS le_0_25,
        SUM(CASE WHEN lat <= 0.5 THEN 1 ELSE 0 END) AS le_0_5,
        SUM(CASE WHEN lat <= 1 THEN 1 ELSE 0 END) AS le_1,
        SUM(CASE WHEN lat <= 2.5 THEN 1 ELSE 0 END) AS le_2_5,
        SUM(CASE WHEN lat <= 5 THEN 1 ELSE 0 END) AS le_5,
        SUM(CASE WHEN lat <= 10 THEN 1 ELSE 0 END) AS le_10,
        SUM(CASE WHEN lat <= 30 THEN 1 ELSE 0 END) AS le_30,
        SUM(CASE WHEN lat <= 60 THEN 1 ELSE 0 END) AS le_60,
        SUM(CASE WHEN lat <= 300 THEN 1 ELSE 0 END) AS le_300,
        SUM(CASE WHEN lat <= 900 THEN 1 ELSE 0 END) AS le_900,
        SUM(CASE WHEN lat <= 3600 THEN 1 ELSE 0 END) AS le_3600,
        SUM(CASE WHEN lat <= 21600 THEN 1 ELSE 0 END) AS le_21600,
        SUM(CASE WHEN lat <= 86400 THEN 1 ELSE 0 END) AS le_86400
      FROM (SELECT j.destination_id, j.finished_at - e.received_at AS lat
            FROM jobs j JOIN events e ON e.id = j.event_id WHERE j.status = 'done') AS done_jobs
      GROUP BY destination_id
      UNION ALL
      SELECT destination_id, n, total, le_0_05, le_0_1, le_0_25, le_0_5, le_1, le_2_5, le_5, le_10, le_30, le_60, le_300, le_900, le_3600, le_21600, le_86400 FROM purged_latency) AS t
JOIN destinations d ON d.id = t.destination_id
WHERE d.deleted_at IS NULL
GROUP BY d.name

-- destination_health: each live destination's pause state and current failure run
SELECT name, paused, paused_reason, failure_streak FROM destinations
WHERE deleted_at IS NULL ORDER BY id

-- get_tenant: one tenant by id
SELECT * FROM tenants WHERE id = :id

-- put_tenant: create a tenant, or change the given fields of an existing one (a NULL field
-- is left as it is; :clear_max removes the destination limit)
INSERT INTO tenants (id, name, metadata, max_destinations, disabled, token_epoch, created_at,
    updated_at)
VALUES (:id, COALESCE(:name, ''), COALESCE(:metadata, '{}'), :max_destinations,
    COALESCE(:disabled, false), :epoch, :now, :now)
ON CONFLICT (id) DO UPDATE SET name = COALESCE(:name, tenants.name),
    metadata = COALESCE(:metadata, tenants.metadata),
    max_destinations = CASE WHEN :clear_max THEN NULL
                            ELSE COALESCE(:max_destinations, tenants.max_destinations) END,
    disabled = COALESCE(:disabled, tenants.disabled), updated_at = :now
RETURNING *

-- list_tenants: tenants after :after in id order (keyset paging), optionally those whose id
-- starts with :prefix
SELECT * FROM tenants
WHERE id > COALESCE(:after, '')
    AND (CAST(:prefix AS text) IS NULL OR substr(id, 1, length(:prefix)) = :prefix)
ORDER BY id LIMIT :limit

-- tenant_destination_count: live destinations of a tenant
SELECT COUNT(*) AS n FROM destinations WHERE tenant_id = :tenant AND deleted_at IS NULL

-- tenant_unfinished_jobs: pending and running jobs of a tenant's live destinations
SELECT COUNT(*) AS n FROM jobs j JOIN destinations d ON d.id = j.destination_id
WHERE d.tenant_id = :tenant AND d.deleted_at IS NULL AND j.status IN ('pending', 'running')

-- remove_tenant_destinations: soft delete every live destination of a tenant (names freed)
UPDATE destinations SET deleted_at = :now, name = name || '~removed-' || id
WHERE tenant_id = :tenant AND deleted_at IS NULL
RETURNING id

-- delete_tenant: forget a tenant (its removed destinations and stored events stay for
-- their history, until retention)
DELETE FROM tenants WHERE id = :id AND id <> '_default'

-- revoke_tenant_tokens: give a tenant a new (random) token epoch: every token minted before
-- stops working
UPDATE tenants SET token_epoch = :epoch WHERE id = :id
RETURNING *

-- (tenant-api: tenant tokens and the tenant API's reads and actions)

-- signing_key: the key of one purpose (`tenant_tokens`), once made
SELECT key FROM signing_keys WHERE purpose = :purpose

-- insert_signing_key: make a purpose's key unless another process made it first
INSERT INTO signing_keys (purpose, key, created_at) VALUES (:purpose, :key, :now)
ON CONFLICT (purpose) DO NOTHING

-- tenant_token_state: the store's clock and one tenant's token state (NULLs when it does not exist): the one read of every tenant API request
SELECT :now AS now, t.id, t.disabled, t.token_epoch
FROM (SELECT 1 AS one) AS clock LEFT JOIN tenants t ON t.id = :tenant

-- tenant_live_destinations: one tenant's live destinations in creation order
SELECT * FROM destinations WHERE tenant_id = :tenant AND deleted_at IS NULL ORDER BY id

-- tenant_get_job: one job of a tenant's destinations with its event (the columns of get_job)
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at, j.replays, e.source, e.source_event_id, e.received_at,
    length(e.body) AS body_bytes, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.id = :job_id AND d.tenant_id = :tenant

-- tenant_replay_job_state: why one job of a tenant's destinations can or cannot be resent
SELECT j.id, j.status, d.deleted_at, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.id = :job_id AND d.tenant_id = :tenant

-- tenant_find_event_by_id: one event of a tenant by its internal id
SELECT id, message_id, source, source_event_id, type, received_at,
    length(body) AS body_bytes, body_purged_at
FROM events WHERE id = :event_id AND tenant_id = :tenant

-- tenant_find_event_by_message_id: one event of a tenant by its webhook-id
SELECT id, message_id, source, source_event_id, type, received_at,
    length(body) AS body_bytes, body_purged_at
FROM events WHERE message_id = :message_id AND tenant_id = :tenant

-- tenant_find_event_by_source_id: one event of a tenant by the sender's id within its source
SELECT id, message_id, source, source_event_id, type, received_at,
    length(body) AS body_bytes, body_purged_at
FROM events WHERE tenant_id = :tenant AND source = :source AND source_event_id = :source_event_id

-- tenant_event_types: the distinct types of a tenant's newest :limit events
SELECT DISTINCT type FROM (
    SELECT type FROM events WHERE tenant_id = :tenant ORDER BY id DESC LIMIT :limit) AS recent
ORDER BY type

-- tenant_subscription_patterns: the subscription patterns of a tenant's live destinations
SELECT DISTINCT pattern FROM destination_subscriptions WHERE tenant_id = :tenant
ORDER BY pattern

-- destination_job_counts: one destination's jobs in flight, pending and dead, and the oldest due pending job's run_at
SELECT
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = :destination_id
        AND j.status = 'running' AND j.lease_until > :now) AS in_flight,
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = :destination_id
        AND j.status = 'pending') AS pending,
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = :destination_id
        AND j.status = 'dead') AS dead,
    (SELECT MIN(j.run_at) FROM jobs j WHERE j.destination_id = :destination_id
        AND j.status = 'pending' AND j.run_at <= :now) AS oldest_pending_at

-- destination_recent_attempts: one destination's finished attempts started since :since, newest first, at most :limit (a worker lost or a hand-back is no delivery outcome)
SELECT a.job_id, a.started_at, a.duration_s, a.status_code, a.error, a.response_excerpt
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE j.destination_id = :destination_id AND a.started_at >= :since
    AND a.duration_s IS NOT NULL
    AND COALESCE(a.error, '') NOT LIKE 'lease expired%'
    AND COALESCE(a.error, '') NOT LIKE 'worker lost%'
    AND COALESCE(a.error, '') NOT LIKE 'handed back%'
ORDER BY a.id DESC LIMIT :limit

-- Named queries for the SQLite store (shared/store/sqlite.py). Parameters are :named; a batch
-- is a JSON array; :now is the transaction's instant (the store's clock).
--
-- The jobs indexes are partial: pending jobs are in jobs_due, running ones in jobs_leased,
-- finished ones in jobs_finished, and every job but a pending one in jobs_status. SQLite's
-- planner takes a partial index only when the WHERE clause contains the index's own term
-- (it does not infer status <> 'pending' from status = 'dead'), and without table statistics
-- it otherwise scans jobs; so queries name that term, and read pending and running jobs as two
-- parts (tests/unit/test_sqlite_query_plans.py checks the plans).

-- insert_event: store one event unless its (tenant, source, source_event_id) exists (the store
-- runs it for every event of a batch, as a few multi-row statements)
INSERT INTO events (message_id, tenant_id, source, source_event_id, type, body,
    forwarded_headers, trace_context, schema_problem, received_at)
VALUES (:message_id, :tenant_id, :source, :source_event_id, :type, :body, :forwarded_headers,
    :trace_context, :schema_problem, :now)
ON CONFLICT (tenant_id, source, source_event_id) DO NOTHING
RETURNING id, message_id, tenant_id, source, source_event_id

-- find_event: the stored event for an idempotency key (run once per key)
SELECT id, message_id, tenant_id, source, source_event_id FROM events
WHERE tenant_id = :tenant_id AND source = :source AND source_event_id = :source_event_id

-- fan_out_view: what fan-out reads, with the version it was read at (schema 22): the
-- `version` row, then each tenant of :tenants that exists with its disabled flag, then the
-- destinations subscribed to each (tenant, pattern) of :keys with their payload filters
SELECT 'version' AS kind, version, NULL AS tenant_id, NULL AS pattern, NULL AS destination_id,
    NULL AS filter, NULL AS disabled
FROM fan_out_version
UNION ALL
SELECT 'tenant', NULL, id, NULL, NULL, NULL, disabled FROM tenants
WHERE id IN (SELECT json_extract(value, '$[0]') FROM json_each(:tenants))
UNION ALL
SELECT 'subscription', NULL, json_extract(k.value, '$[0]'), json_extract(k.value, '$[1]'),
    s.destination_id, (SELECT d.filter FROM destinations d WHERE d.id = s.destination_id), NULL
FROM json_each(:keys) k JOIN destination_subscriptions s
    ON s.tenant_id = json_extract(k.value, '$[0]') AND s.pattern = json_extract(k.value, '$[1]')

-- fan_out_index: the whole subscription index with the payload filters, with the version
-- it was read at; at most :limit subscriptions, and the caller asks for one more than it
-- keeps, to learn that the index is larger
SELECT 'version' AS kind, version, NULL AS tenant_id, NULL AS pattern, NULL AS destination_id,
    NULL AS filter, NULL AS disabled
FROM fan_out_version
UNION ALL
SELECT * FROM (
    SELECT 'subscription', NULL, s.tenant_id, s.pattern, s.destination_id,
        (SELECT d.filter FROM destinations d WHERE d.id = s.destination_id), NULL
    FROM destination_subscriptions s LIMIT :limit)

-- lock_tenant: one tenant by id, inside a write (SQLite's write transaction already excludes
-- every other writer; PostgreSQL's locks the row)
SELECT * FROM tenants WHERE id = :id

-- create_tenants: the tenants of :tenants ([id, epoch] pairs) that do not exist yet, with
-- defaults and each its fresh token epoch (random, so no token of an earlier tenant of the id
-- opens it); never the id of a deleted tenant whose events are still stored (tenant_history)
INSERT INTO tenants (id, token_epoch, created_at, updated_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), :now, :now
FROM json_each(:tenants)
WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = json_extract(value, '$[0]'))
ON CONFLICT (id) DO NOTHING

-- insert_jobs: one delivery job, due now (the store runs it for every [event id, destination
-- id] pair of a batch, as a few multi-row statements); the writer holds the one write lock
-- from its fan-out read on, so every destination read live still is
INSERT INTO jobs (event_id, destination_id, run_at, created_at, updated_at)
VALUES (:event_ids, :destination_ids, :now, :now, :now)
RETURNING id, event_id, destination_id

-- any_live_destination: a row when any destination of :destination_ids (a JSON array)
-- takes deliveries (not paused, not removed): ingest's commit then wakes the workers
SELECT 1 AS live FROM destinations
WHERE id IN (SELECT value FROM json_each(:destination_ids)) AND paused = 0
    AND deleted_at IS NULL
LIMIT 1

-- claim_window: the destinations one claim considers, so that its cost follows the work it
-- can take, not the destinations that exist (see StoreLogic._claim_window). A leapfrog walk
-- from destination id :after (exclusive) up to :upto (inclusive) over two indexes at once:
-- a = the next live destination (destinations_live), b = the next destination holding
-- pending jobs from a on (jobs_due); a = b is a candidate, else the walk jumps to b. Each
-- step is one search in each index, so neither paused destinations with backlogs nor live
-- ones without jobs are visited one by one. It stops at the :window-th candidate that offers
-- work now: a due pending job (jobs_due), a free in-flight slot (jobs_leased), its rate
-- limit allowing a request (rate_limit_allows), not full for the claiming worker
-- (:full_destinations, a JSON array) and, while live destinations of more than one tenant
-- exist, its tenant not at its share (:capped_tenants). walked = 1. With :expired also the
-- destination of every expired lease, walked = 0 (few: leases are bounded by the workers'
-- slots; one may repeat). `found` counts the offering destinations walked before a row, so
-- the walk ends exactly at the :window-th; the claim still decides on what it reads.
WITH RECURSIVE walk(a, b, found) AS (
    SELECT (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > :after),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > :after)), 0
    UNION ALL
    SELECT (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END)),
        w.found + (w.a = w.b AND EXISTS (SELECT 1 FROM destinations d
            WHERE d.id = w.a AND d.id NOT IN (SELECT value FROM json_each(:full_destinations))
                AND NOT (d.tenant_id IN (SELECT value FROM json_each(:capped_tenants))
                    AND (SELECT min(tenant_id) FROM destinations WHERE deleted_at IS NULL)
                    <> (SELECT max(tenant_id) FROM destinations WHERE deleted_at IS NULL))
                AND (d.rate_limit_per_s IS NULL
                    OR d.next_send_at <= :now + max(0.0, 1.0 - 1.0 / d.rate_limit_per_s))
                AND EXISTS (SELECT 1 FROM jobs p WHERE p.destination_id = d.id
                    AND p.status = 'pending' AND p.run_at <= :now)
                AND d.max_in_flight > (SELECT count(*) FROM jobs r WHERE r.destination_id = d.id
                    AND r.status = 'running' AND r.lease_until > :now)))
    FROM walk w
    WHERE w.a IS NOT NULL AND w.b IS NOT NULL AND w.a <= :upto AND w.found < :window
)
SELECT w.a AS id, 1 AS walked FROM walk w
WHERE w.a = w.b AND w.a <= :upto AND w.found < :window AND EXISTS (SELECT 1 FROM destinations d
    WHERE d.id = w.a AND d.id NOT IN (SELECT value FROM json_each(:full_destinations))
        AND NOT (d.tenant_id IN (SELECT value FROM json_each(:capped_tenants))
            AND (SELECT min(tenant_id) FROM destinations WHERE deleted_at IS NULL)
            <> (SELECT max(tenant_id) FROM destinations WHERE deleted_at IS NULL))
        AND (d.rate_limit_per_s IS NULL
            OR d.next_send_at <= :now + max(0.0, 1.0 - 1.0 / d.rate_limit_per_s))
        AND EXISTS (SELECT 1 FROM jobs p WHERE p.destination_id = d.id
            AND p.status = 'pending' AND p.run_at <= :now)
        AND d.max_in_flight > (SELECT count(*) FROM jobs r WHERE r.destination_id = d.id
            AND r.status = 'running' AND r.lease_until > :now))
UNION ALL
SELECT destination_id, 0 FROM jobs
WHERE :expired AND status = 'running' AND lease_until <= :now

-- destination_slots: free in-flight slots of the claim's window (:destination_ids, a JSON
-- array) among the active destinations (expired leases do not count; the single writer needs
-- no lock_claimable_destinations step); several_tenants (the same on every row): whether live
-- destinations of more than one tenant exist, the two ends of the destinations_tenant index
-- (the per-tenant fair share applies only then)
SELECT d.id, d.tenant_id, d.ordered, d.rate_limit_per_s, d.next_send_at, d.max_in_flight - (
    SELECT COUNT(*) FROM jobs j
    WHERE j.destination_id = d.id AND j.status = 'running' AND j.lease_until > :now
) AS free,
    (SELECT min(tenant_id) FROM destinations WHERE deleted_at IS NULL)
    <> (SELECT max(tenant_id) FROM destinations WHERE deleted_at IS NULL) AS several_tenants
FROM destinations d
WHERE d.id IN (SELECT value FROM json_each(:destination_ids))
    AND d.paused = 0 AND d.deleted_at IS NULL

-- due_jobs: claimable jobs of the claim's destinations (:offers, a JSON array of [destination
-- id, most jobs]), each destination's oldest due first: pending and due through jobs_due, at
-- most :pending_limit of each (the claim's first read stops at a few: see _pending_bound),
-- lease expired through jobs_leased, at most :limit of each (the largest of the offers; the
-- claim keeps each destination's own number), one index search per destination and kind
-- reading no more entries than it returns; `replays` tells a job with no attempt counted
-- (see takeovers_among). An expired lease at :max_attempts is never taken over (here
-- kill_lost_at_cap, earlier in the same write transaction, has ended it already)
SELECT j.destination_id, j.id, j.run_at AS due_at, j.attempts, j.replays, 'pending' AS status
FROM json_each(:offers) o JOIN jobs j ON j.id IN (
    SELECT p.id FROM jobs p
    WHERE p.destination_id = json_extract(o.value, '$[0]') AND p.status = 'pending'
        AND p.run_at <= :now
    ORDER BY p.run_at LIMIT :pending_limit)
UNION ALL
SELECT j.destination_id, j.id, j.lease_until, j.attempts, j.replays, 'running'
FROM json_each(:offers) o JOIN jobs j ON j.id IN (
    SELECT r.id FROM jobs r
    WHERE r.destination_id = json_extract(o.value, '$[0]') AND r.status = 'running'
        AND r.lease_until <= :now AND r.attempts < :max_attempts
    ORDER BY r.lease_until LIMIT :limit)

-- claim_probe: whether a claim could take or end anything now (read-only, so that a worker
-- woken for nothing does not take the write lock): a due job on a destination that takes
-- deliveries, an expired lease on one, or an expired lease on a job that used its last
-- attempt (kill_lost_at_cap). The due job is looked for by claim_window's leapfrog walk (the
-- live destinations, destinations_live, against the pending jobs' destinations), stopping
-- at the first due one: no step per live destination without jobs (18 ms per probe with
-- 30,003 live destinations and nothing pending, when it probed each one), one per live
-- destination whose pending jobs are all retries not due yet
WITH RECURSIVE walk(a, b, found) AS (
    SELECT (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > 0),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > 0)), 0
    UNION ALL
    SELECT (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE paused = 0 AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END)),
        (w.a = w.b AND EXISTS (SELECT 1 FROM jobs p WHERE p.destination_id = w.a
            AND p.status = 'pending' AND p.run_at <= :now))
    FROM walk w WHERE w.a IS NOT NULL AND w.b IS NOT NULL AND w.found = 0
)
SELECT (SELECT max(found) FROM walk) = 1 OR EXISTS (
    SELECT 1 FROM jobs j CROSS JOIN destinations d ON d.id = j.destination_id
    WHERE j.status = 'running' AND j.lease_until <= :now AND d.paused = 0
        AND d.deleted_at IS NULL) OR EXISTS (
    SELECT 1 FROM jobs WHERE status = 'running' AND lease_until <= :now
        AND attempts >= :max_attempts
) AS claimable

-- kill_lost_at_cap: an expired lease on a job that used its last attempt means the worker died on it
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = 'worker lost (lease expired on the final attempt)', finished_at = :now,
    updated_at = :now
WHERE status = 'running' AND lease_until <= :now AND attempts >= :max_attempts
RETURNING id, destination_id, event_id, attempts,
    (SELECT name FROM destinations d WHERE d.id = jobs.destination_id) AS destination,
    (SELECT tenant_id FROM destinations d WHERE d.id = jobs.destination_id) AS tenant

-- close_attempts_lost_at_cap: the attempt each job kill_lost_at_cap just made dead was in
-- flight on (:job_ids, a JSON array) is closed with the job's error and the time it ran
UPDATE attempts SET error = 'worker lost (lease expired on the final attempt)',
    duration_s = max(:now - started_at, 0)
WHERE job_id IN (SELECT value FROM json_each(:job_ids)) AND duration_s IS NULL AND error IS NULL
RETURNING job_id

-- takeovers_among: which of the offered jobs (:job_ids, a JSON array) a claim would take over
-- (the test of mark_attempt_lost, asked before the claim so that a takeover is claimed alone):
-- an attempt of an earlier claim never finished (its worker was lost), or the latest attempt
-- was closed "worker lost" at the cap (a replay of a job that died so). A pending job with
-- no attempt counted (attempts and replays 0) has no such attempt, so the claim does not
-- ask about it: every attempt row is made by a claim, which counts it in attempts; only a
-- hand-back takes that count back, closing its attempt in the same transaction; a replay
-- counts in replays.
SELECT a.job_id, sum(a.duration_s IS NULL AND a.error IS NULL) AS open_attempts
FROM attempts a
WHERE a.job_id IN (SELECT value FROM json_each(:job_ids))
    AND ((a.duration_s IS NULL AND a.error IS NULL)
         OR (a.error LIKE 'worker lost%'
             AND a.id = (SELECT max(b.id) FROM attempts b WHERE b.job_id = a.job_id)))
GROUP BY a.job_id

-- ordered_head: an ordered destination's oldest unfinished job (FIFO: only it may be sent),
-- the first entry of jobs_ordered (schema 25: the unfinished jobs of ordered destinations,
-- by destination and id); `replays` tells a job with no attempt counted (takeovers_among)
SELECT id, status, run_at, lease_until, attempts, replays FROM jobs
WHERE destination_id = :destination_id AND ordered = 1 AND status IN ('pending', 'running')
ORDER BY id LIMIT 1

-- unheld_leases: the jobs leased to :worker under a token carrying :tag and newer than
-- :newer_than that it does not hold (:held, a JSON array): a claim it made whose answer never
-- reached it. A takeover among them (the attempt before this lease's was lost) is left to
-- expire, to be taken over again alone. It reads the running jobs only (through the partial
-- index jobs_leased), as many as the workers' slots.
SELECT j.id, j.event_id, j.destination_id, j.lease_token, d.name AS destination,
    d.tenant_id
FROM jobs j JOIN destinations d ON d.id = j.destination_id
WHERE j.status = 'running' AND j.lease_owner = :worker AND substr(j.lease_token, 17, 8) = :tag
    AND j.lease_token > :newer_than
    AND j.lease_token NOT IN (SELECT value FROM json_each(:held))
    AND NOT EXISTS (
        SELECT 1 FROM attempts a
        WHERE a.job_id = j.id AND (a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%')
            AND a.id = (SELECT max(b.id) FROM attempts b
                        WHERE b.job_id = j.id AND b.lease_token <> j.lease_token))

-- claim_job: lease a batch of chosen jobs (:job_ids, a JSON array) in ONE statement, each
-- under a fresh token, still only if due; attempts are counted here, at claim. (Unary + keeps
-- the planner on the id lookup: without it, it walks every pending job through jobs_status.)
-- A token is the claim's instant in microseconds (16 hex digits), the claiming process's
-- :token_tag (8 hex digits, or none) then 8 random bytes: tokens sort by time, so the
-- attempts' unique token index grows at its end instead of dirtying a random page (and
-- writing a WAL frame) for every attempt.
UPDATE jobs SET status = 'running', attempts = attempts + 1,
    lease_token = printf('%016x', CAST(:now * 1000000 AS INTEGER)) || :token_tag
        || lower(hex(randomblob(8))),
    lease_owner = :worker, lease_until = :now + :lease_s, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:job_ids)) AND (
    (+status = 'pending' AND +run_at <= :now)
    OR (+status = 'running' AND +lease_until <= :now AND +attempts < :max_attempts))
RETURNING id, event_id, destination_id, attempts, lease_token, lease_until, replays

-- mark_attempt_lost: the previous claims of just-claimed jobs (:job_ids) that never finished
-- are closed (error, and the time they ran until this takeover); returns those jobs, and the
-- jobs whose latest attempt was closed as "worker lost" at the cap (a replay of a job that
-- died so): both are taken over. The new claims' rows do not exist yet. (The claim leaves out
-- the jobs it counted a first attempt for, attempts 1 and replays 0: see takeovers_among.)
UPDATE attempts SET error = coalesce(error, 'lease expired (worker lost)'),
    duration_s = coalesce(duration_s, max(:now - started_at, 0))
WHERE job_id IN (SELECT value FROM json_each(:job_ids))
    AND lease_token NOT IN (SELECT value FROM json_each(:lease_tokens))
    AND ((duration_s IS NULL AND error IS NULL)
         OR (error LIKE 'worker lost%'
             AND id = (SELECT max(a.id) FROM attempts a WHERE a.job_id = attempts.job_id)))
RETURNING job_id

-- insert_attempt: one attempt row per claim (:claims, a JSON array of [job id, attempt, token])
INSERT INTO attempts (job_id, attempt, worker, lease_token, started_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), :worker,
    json_extract(value, '$[2]'), :now FROM json_each(:claims)

-- claim_details: what a worker needs to send claimed jobs (:job_ids, a JSON array);
-- received_at only for a job never delivered yet (the latency histogram observes each job's
-- first delivery: a replayed dead letter's too, not a resent job's again); attempts are read
-- only for a job replayed or resent
SELECT j.id AS job_id, e.message_id, e.type, e.body, e.forwarded_headers,
    CASE WHEN j.replays = 0 OR NOT EXISTS (
        SELECT 1 FROM attempts a WHERE a.job_id = j.id AND a.status_code BETWEEN 200 AND 299)
    THEN e.received_at END AS received_at, e.trace_context,
    d.name, d.url, d.secret, d.previous_secret, d.previous_secret_until, d.timeout_s, d.headers,
    d.tenant_id, d.body_format, d.propagate_trace
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.id IN (SELECT value FROM json_each(:job_ids))

-- extend_lease: push the expiry of many leases out to now + :lease_s in one statement (:claims,
-- a JSON array of [job id, lease token]): a worker's heartbeat; fenced by each token; returns
-- the leases kept
UPDATE jobs SET lease_until = :now + :lease_s
FROM json_each(:claims) AS u
WHERE jobs.id = json_extract(u.value, '$[0]') AND jobs.lease_token = json_extract(u.value, '$[1]')
    AND +jobs.status = 'running'  -- unary +: look jobs up by id, not through jobs_status
RETURNING jobs.id, jobs.lease_token

-- finish_done: the destination acknowledged; fenced by the lease token; finished when the
-- answer arrived (:waited_s before this write)
UPDATE jobs SET status = 'done', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = NULL, finished_at = :now - :waited_s, updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- finish_dead: no more attempts; fenced by the lease token; finished when the last answer
-- arrived (:waited_s before this write)
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = :error, finished_at = :now - :waited_s, updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- record_attempt: complete the attempt row of a claim (a stale claim's result is history too,
-- but a row already closed as lost keeps that error, so its outcome class never changes); a
-- row this finish already completed (a write retried after its commit's answer was lost) is
-- left alone and not returned
UPDATE attempts SET duration_s = :duration_s, status_code = :status_code,
    error = CASE WHEN error LIKE 'lease expired%' OR error LIKE 'worker lost%' THEN error
                 ELSE :error END,
    response_excerpt = :response_excerpt, started_at = :started_at,
    response_headers = :response_headers, location = :location
WHERE lease_token = :lease_token
    AND (duration_s IS NULL OR error LIKE 'lease expired%' OR error LIKE 'worker lost%')
RETURNING (error LIKE 'lease expired%' OR error LIKE 'worker lost%') AS was_lost

-- record_attempts: complete the attempt rows of many claims in one statement (:attempts, a
-- JSON array of [lease token, started_at, duration_s, status_code, error, response_excerpt,
-- response_headers, location]); as record_attempt, a row already completed is left alone
UPDATE attempts SET started_at = json_extract(u.value, '$[1]'),
    duration_s = json_extract(u.value, '$[2]'), status_code = json_extract(u.value, '$[3]'),
    error = CASE WHEN attempts.error LIKE 'lease expired%' OR attempts.error LIKE 'worker lost%'
                 THEN attempts.error ELSE json_extract(u.value, '$[4]') END,
    response_excerpt = json_extract(u.value, '$[5]'),
    response_headers = json_extract(u.value, '$[6]'), location = json_extract(u.value, '$[7]')
FROM json_each(:attempts) AS u WHERE attempts.lease_token = json_extract(u.value, '$[0]')
    AND (attempts.duration_s IS NULL OR attempts.error LIKE 'lease expired%'
         OR attempts.error LIKE 'worker lost%')
RETURNING attempts.lease_token,
    (attempts.error LIKE 'lease expired%' OR attempts.error LIKE 'worker lost%') AS was_lost

-- finish_delivered: many acknowledged claims to done in one statement (:claims, a JSON array
-- of [job id, lease token, seconds its answer waited before this write]); fenced by each
-- claim's token; returns the jobs it changed
UPDATE jobs SET status = 'done', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = NULL, finished_at = :now - json_extract(u.value, '$[2]'), updated_at = :now
FROM json_each(:claims) AS u
WHERE jobs.id = json_extract(u.value, '$[0]') AND jobs.lease_token = json_extract(u.value, '$[1]')
    AND +jobs.status = 'running'  -- unary +: look jobs up by id, not through jobs_status
RETURNING jobs.id

-- hand_back: return a claimed job to pending without charging the attempt, due at once and in
-- its place in the line (its run_at, kept: a claim took it due); fenced
UPDATE jobs SET status = 'pending', attempts = attempts - 1, lease_token = NULL,
    lease_owner = NULL, lease_until = NULL, run_at = min(run_at, :now), updated_at = :now
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- insert_destination: register a destination
INSERT INTO destinations (tenant_id, name, url, secret, event_types, max_in_flight, headers,
    timeout_s, rate_limit_per_s, ordered, filter, propagate_trace, created_at)
VALUES (:tenant, :name, :url, :secret, :event_types, :max_in_flight, :headers, :timeout_s,
    :rate_limit_per_s, :ordered, :filter, :propagate_trace, :now)
RETURNING *

-- set_paused: pause or resume a destination; resuming resets the failure run (breaker)
UPDATE destinations SET paused = :paused, paused_reason = :reason,
    failure_streak = CASE WHEN :paused = 0 THEN 0 ELSE failure_streak END,
    failing_since = CASE WHEN :paused = 0 THEN NULL ELSE failing_since END
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL

-- list_jobs: jobs with their event and destination, newest first; keyset paging by id
-- (:before)
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE (:status IS NULL OR j.status = :status) AND (:tenant IS NULL OR d.tenant_id = :tenant)
    AND (:before IS NULL OR j.id < :before)
ORDER BY j.id DESC LIMIT :limit

-- list_attempts: attempts of one job, or of all jobs when job_id is NULL, oldest first
SELECT job_id, attempt, worker, lease_token, started_at, duration_s, status_code, error,
    response_excerpt, response_headers, location
FROM attempts WHERE (:job_id IS NULL OR job_id = :job_id) ORDER BY id LIMIT :limit

-- oldest_pending: run_at of the longest-waiting due pending job
SELECT MIN(run_at) AS oldest FROM jobs WHERE status = 'pending' AND run_at <= :now

-- remove_destination: soft delete; the name is freed (renamed name~removed-ID) for reuse
UPDATE destinations SET deleted_at = :now, name = name || '~removed-' || id
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL
RETURNING id

-- kill_jobs_of_destination: a removed destination's unfinished jobs end dead
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = 'destination removed', finished_at = :now, updated_at = :now
WHERE id IN (SELECT id FROM jobs WHERE destination_id = :destination_id AND status = 'pending'
             UNION ALL
             SELECT id FROM jobs WHERE destination_id = :destination_id AND status = 'running')
RETURNING id

-- list_dead: dead jobs, most recently dead first, optionally of one destination / since a time,
-- with what decides whether each can be replayed (its body purged, its destination removed);
-- read newest first from jobs_finished, so it stops at :limit. Keyset paging: the next page
-- is the rows after (:before_at, :before_id), the last row's (finished_at, id), which
-- dead_letter_position reads; the id breaks ties, so each row is on exactly one page
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at, e.body_purged_at, d.deleted_at AS destination_deleted_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.status = 'dead' AND j.status IN ('done', 'dead')
    AND (:destination IS NULL OR d.name = :destination)
    AND (:tenant IS NULL OR d.tenant_id = :tenant)
    AND (:since IS NULL OR j.finished_at >= :since)
    AND (:before_at IS NULL OR j.finished_at < :before_at
         OR (j.finished_at = :before_at AND j.id < :before_id))
    -- the same bound as a range the index can start from: a deep page reads its own rows
    AND j.finished_at <= COALESCE(:before_at, 1e308)
ORDER BY j.finished_at DESC, j.id DESC LIMIT :limit

-- replay_candidates: dead jobs a replay would take (live destination, body not purged)
SELECT j.id, j.destination_id FROM jobs j JOIN events e ON e.id = j.event_id
    JOIN destinations d ON d.id = j.destination_id
WHERE j.status = 'dead' AND j.status <> 'pending' AND d.deleted_at IS NULL
    AND e.body_purged_at IS NULL
    AND (:job_id IS NULL OR j.id = :job_id)
    AND (:destination IS NULL OR d.name = :destination)
    AND (:tenant IS NULL OR d.tenant_id = :tenant)
    AND (:since IS NULL OR j.finished_at >= :since)
ORDER BY j.id

-- replay_job: dead -> pending, fresh attempt budget, due now (:job_ids, a JSON array; history
-- stays in attempts)
UPDATE jobs SET status = 'pending', attempts = 0, run_at = :now, last_error = NULL,
    finished_at = NULL, replays = replays + 1, updated_at = :now,
    -- unfinished again: its destination's `ordered` now (jobs_ordered, schema 25)
    ordered = (SELECT d.ordered FROM destinations d WHERE d.id = jobs.destination_id)
WHERE id IN (SELECT value FROM json_each(:job_ids)) AND status = 'dead'
RETURNING id

-- purge_bodies: empty the body of events whose jobs all ended before the cutoff; a dead job
-- keeps its event's body for as long as the job itself is kept, so it can be replayed
UPDATE events SET body = X'', body_purged_at = :now
WHERE body_purged_at IS NULL AND received_at < :before
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_id = events.id
                    AND (j.status IN ('pending', 'running', 'dead') OR j.finished_at >= :before))

-- paused_destinations: :tenant's live destinations that are paused, with the reason
SELECT name, paused_reason FROM destinations
WHERE paused = 1 AND deleted_at IS NULL AND tenant_id = :tenant ORDER BY id

-- destination_failed: extend a destination's failure run by one attempt (and its dead letters
-- since the last notice by :dead, 0 or 1), with what operational events are decided on
UPDATE destinations SET failure_streak = failure_streak + 1,
    dead_letters_unnoticed = dead_letters_unnoticed + :dead,
    failing_since = COALESCE(failing_since, :now)
WHERE id = :destination_id
RETURNING id, tenant_id, name, url, paused, failure_streak, failing_since,
    notified_state, event_types, dead_letters_unnoticed, dead_letters_noticed_at

-- destination_succeeded: a 2xx ends the failure run; a row comes back only when something
-- changed or an operational event announced it failing or paused (a recovery to announce)
UPDATE destinations SET failure_streak = 0, failing_since = NULL
WHERE id = :destination_id
    AND (failure_streak != 0 OR failing_since IS NOT NULL OR notified_state != 'ok')
RETURNING id, tenant_id, name, paused, notified_state, event_types

-- auto_pause: the circuit breaker (or a 410 Gone) pauses a destination with a reason
UPDATE destinations SET paused = 1, paused_reason = :reason
WHERE id = :destination_id AND paused = 0

-- pause_unreadable: pause a destination whose own stored value no request can be made of
-- (a claim met it), returning what its pause announcement is decided on
UPDATE destinations SET paused = 1, paused_reason = :reason
WHERE id = :destination_id AND paused = 0
RETURNING id, tenant_id, name, url, paused, failure_streak, failing_since,
    notified_state, event_types

-- rotate_secret: new secret now, previous one still signed with for :overlap_s seconds
UPDATE destinations SET previous_secret = secret, previous_secret_until = :now + :overlap_s,
    secret = :secret
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL
RETURNING *

-- insert_source: register an inbound source
INSERT INTO sources (name, scheme, secret, created_at)
VALUES (:name, :scheme, :secret, :now)
RETURNING *

-- remove_source: soft delete; the name is freed (renamed name~removed-ID) for reuse
UPDATE sources SET deleted_at = :now, name = name || '~removed-' || id
WHERE name = :name AND deleted_at IS NULL
RETURNING id

-- destination_summaries: per live destination, its state and jobs in flight, pending and dead
SELECT d.id, d.tenant_id, d.name, d.paused, d.paused_reason, d.failure_streak, d.failing_since,
    d.max_in_flight,
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'running'
        AND j.lease_until > :now) AS in_flight,
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'pending')
        AS pending,
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'dead'
        AND j.status <> 'pending') AS dead,
    (SELECT MIN(j.run_at) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'pending'
        AND j.run_at <= :now) AS oldest_pending_at
FROM destinations d WHERE d.deleted_at IS NULL AND (:tenant IS NULL OR d.tenant_id = :tenant)
ORDER BY d.id

-- destination_latency: nearest-rank p50/p99 of completed attempt durations per destination, over the newest :scan_limit attempts started since :since
WITH recent AS (
    SELECT j.destination_id, a.duration_s,
        CASE WHEN a.status_code BETWEEN 200 AND 299 THEN 1 ELSE 0 END AS delivered
    FROM attempts a JOIN jobs j ON j.id = a.job_id
    WHERE a.id > (SELECT COALESCE(MAX(id), 0) FROM attempts) - :scan_limit
        AND a.started_at >= :since AND a.duration_s IS NOT NULL
        AND NOT (a.error IS NOT NULL AND (a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%'))
), ranked AS (
    SELECT destination_id, duration_s, delivered,
        ROW_NUMBER() OVER (PARTITION BY destination_id ORDER BY duration_s) AS rn,
        COUNT(*) OVER (PARTITION BY destination_id) AS n
    FROM recent
)
SELECT destination_id, n AS samples, SUM(delivered) AS delivered_samples,
    MAX(CASE WHEN rn = (n * 50 + 99) / 100 THEN duration_s END) AS p50_s,
    MAX(CASE WHEN rn = (n * 99 + 99) / 100 THEN duration_s END) AS p99_s
FROM ranked GROUP BY destination_id, n

-- events_per_bucket: events received per time bucket (number = floor(received_at / :bucket_s)) since :since
SELECT CAST(received_at / :bucket_s AS INTEGER) AS bucket, COUNT(*) AS n
FROM events WHERE received_at >= :since GROUP BY 1

-- finished_per_bucket: done and dead jobs per time bucket (number = floor(finished_at / :bucket_s)) since :since
SELECT CAST(finished_at / :bucket_s AS INTEGER) AS bucket, status, COUNT(*) AS n
FROM jobs WHERE status IN ('done', 'dead') AND finished_at >= :since GROUP BY 1, 2

-- failed_attempts_per_bucket: attempts that did not deliver (an HTTP status other than 2xx, or a transport error; a lost worker or a hand-back is no delivery failure) per time bucket of their start (number = floor(started_at / :bucket_s)), among attempts after id :after_id started since :since
SELECT CAST(started_at / :bucket_s AS INTEGER) AS bucket, COUNT(*) AS n
FROM attempts
WHERE id > :after_id AND started_at >= :since AND duration_s IS NOT NULL
    AND (status_code IS NULL OR status_code NOT BETWEEN 200 AND 299)
    AND COALESCE(error, '') NOT LIKE 'lease expired%'
    AND COALESCE(error, '') NOT LIKE 'worker lost%'
    AND COALESCE(error, '') NOT LIKE 'handed back%'
GROUP BY 1

-- event_body_of_job: the first :max_bytes bytes of a job's event body, its size and purge time
-- (of :tenant's jobs only, when given)
SELECT e.id AS event_id, e.type, substr(e.body, 1, :max_bytes) AS head,
    length(e.body) AS size_bytes, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id
WHERE j.id = :job_id AND (:tenant IS NULL OR e.tenant_id = :tenant)

-- list_events: events newest first, filtered by type, received time, a job's destination
-- and/or status; keyset paging by id (:before)
SELECT e.id, e.message_id, e.tenant_id, e.source, e.source_event_id, e.type,
    e.schema_problem, e.received_at, length(e.body) AS body_bytes, e.body_purged_at
FROM events e
WHERE (:type IS NULL OR e.type = :type)
    AND (:since IS NULL OR e.received_at >= :since)
    AND (:until IS NULL OR e.received_at < :until)
    AND (:before IS NULL OR e.id < :before)
    AND (:tenant IS NULL OR e.tenant_id = :tenant)
    AND ((:destination IS NULL AND :status IS NULL) OR EXISTS (
        SELECT 1 FROM jobs j JOIN destinations d ON d.id = j.destination_id
        WHERE j.event_id = e.id AND (:destination IS NULL OR d.name = :destination)
            AND (:tenant IS NULL OR d.tenant_id = :tenant)
            AND (:status IS NULL OR j.status = :status)))
ORDER BY e.id DESC LIMIT :limit

-- jobs_of_events: the jobs of several events (:event_ids, a JSON array), by id
SELECT j.id, j.event_id, d.name AS destination, j.status, j.attempts, j.run_at, j.last_error,
    j.created_at, j.finished_at, j.replays
FROM jobs j JOIN destinations d ON d.id = j.destination_id
WHERE j.event_id IN (SELECT value FROM json_each(:event_ids)) ORDER BY j.id

-- resend_candidates: done or dead jobs a resend would take (live destination, body stored),
-- oldest first; since/until bound the job's creation (its event's receipt)
SELECT j.id, j.status, j.destination_id FROM jobs j JOIN events e ON e.id = j.event_id
    JOIN destinations d ON d.id = j.destination_id
WHERE j.status IN ('done', 'dead') AND d.deleted_at IS NULL AND e.body_purged_at IS NULL
    AND (:status IS NULL OR j.status = :status)
    AND (:job_id IS NULL OR j.id = :job_id)
    AND (:destination IS NULL OR d.name = :destination)
    AND (:tenant IS NULL OR d.tenant_id = :tenant)
    AND (:since IS NULL OR j.created_at >= :since)
    AND (:until IS NULL OR j.created_at < :until)
ORDER BY j.id LIMIT :limit

-- resend_jobs: done/dead -> pending, fresh attempt budget, due now (:job_ids, a JSON array;
-- the event row is untouched, so the same webhook-id and body bytes go out; history stays)
UPDATE jobs SET status = 'pending', attempts = 0, run_at = :now, last_error = NULL,
    finished_at = NULL, replays = replays + 1, updated_at = :now,
    -- unfinished again: its destination's `ordered` now (jobs_ordered, schema 25)
    ordered = (SELECT d.ordered FROM destinations d WHERE d.id = jobs.destination_id)
WHERE id IN (SELECT value FROM json_each(:job_ids)) AND status IN ('done', 'dead')
RETURNING id

-- retry_now_candidates: pending jobs not yet due a retry now would take, oldest first (per
-- destination from jobs_due: CROSS JOIN keeps the planner from walking all jobs in id order)
SELECT j.id, j.status, j.destination_id FROM destinations d
    CROSS JOIN jobs j ON j.destination_id = d.id
WHERE j.status = 'pending' AND j.run_at > :now
    AND (:job_id IS NULL OR j.id = :job_id)
    AND (:destination IS NULL OR d.name = :destination)
    AND (:tenant IS NULL OR d.tenant_id = :tenant)
    AND (:since IS NULL OR j.created_at >= :since)
    AND (:until IS NULL OR j.created_at < :until)
ORDER BY j.id LIMIT :limit

-- retry_now_jobs: pending jobs due now (:job_ids, a JSON array; attempts unchanged)
UPDATE jobs SET run_at = :now, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:job_ids)) AND status = 'pending' AND run_at > :now
RETURNING id

-- add_metric_deltas: append one transaction's changes to the maintained figures (one row per
-- [family, destination id, label, n, total_s]; shared/store/metric_deltas.py; the store runs
-- it as a few multi-row statements: a third of the CPU of reading them out of one JSON
-- array) to the log; its trigger (sqlite_migrations/021) folds the log into metric_counts
-- once it holds 1,024 rows
INSERT INTO metric_count_deltas (family, destination_id, label, n, total_s)
VALUES (:families, :destination_ids, :labels, :ns, :totals_s)

-- fold_metric_deltas: fold the appended deltas into metric_counts now (a `fold` row sets off
-- the log's trigger, which folds and empties it); how many rows it held. With the log empty
-- it inserts nothing and returns no row, so a read of the figures writes nothing to the WAL.
INSERT INTO metric_count_deltas (family, destination_id, label, n)
SELECT 'fold', 0, '', 0 WHERE EXISTS (SELECT 1 FROM metric_count_deltas)
RETURNING id - 1 AS folded

-- metric_counts_of: the maintained figures of some destinations (:destination_ids, a JSON
-- array; 0: the totals); every family named, so the primary key (family, destination_id,
-- label) finds each destination's rows instead of scanning the table
SELECT family, destination_id, label, n, total_s FROM metric_counts
WHERE family IN ('jobs', 'attempts', 'latency', 'oldest', 'events', 'filtered', 'notifications')
    AND destination_id IN (SELECT value FROM json_each(:destination_ids))

-- unfinished_jobs_of_destination: the jobs kill_jobs_of_destination is about to end, with
-- their status (the single writer: nothing changes them in between)
SELECT id, status FROM jobs WHERE destination_id = :destination_id AND status = 'pending'
UNION ALL
SELECT id, status FROM jobs WHERE destination_id = :destination_id AND status = 'running'

-- (tenant-api: the tenant API's reads and actions)

-- tenant_list_jobs: one tenant's jobs newest first, optionally of one destination and/or status; keyset paging by id (:before)
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at
FROM jobs j JOIN destinations d ON d.id = j.destination_id JOIN events e ON e.id = j.event_id
WHERE d.tenant_id = :tenant
    AND (:destination IS NULL OR d.name = :destination)
    AND (:status IS NULL OR j.status = :status)
    AND (:before IS NULL OR j.id < :before)
ORDER BY j.id DESC LIMIT :limit

-- destination_fold: what the live destinations not among :shown_ids add up to (the fold of
-- /metrics): how many, whether one is paused, the longest failure run, the oldest due job;
-- and the oldest due job of every live destination (NULLs when there is none)
SELECT sum(CASE WHEN r.shown THEN 0 ELSE 1 END) AS folded,
    max(CASE WHEN r.shown THEN 0 ELSE r.paused END) AS paused,
    max(CASE WHEN r.shown THEN 0 ELSE r.failure_streak END) AS failure_streak,
    min(CASE WHEN r.shown THEN NULL ELSE r.due END) AS oldest_due,
    min(r.due) AS oldest_due_all
FROM (SELECT CASE WHEN d.paused THEN 1 ELSE 0 END AS paused, d.failure_streak,
          CASE WHEN o.total_s <= :now THEN o.total_s END AS due,
          d.id IN (SELECT value FROM json_each(:shown_ids)) AS shown
      FROM destinations d
      LEFT JOIN metric_counts o ON o.family = 'oldest' AND o.destination_id = d.id
          AND o.label = ''
      WHERE d.deleted_at IS NULL) AS r

-- ---- payload filters (shared/store/filter_tx.py) ----

-- tenant_metadata: the metadata of each tenant of :tenants
SELECT id, metadata FROM tenants
WHERE id IN (SELECT json_extract(value, '$[0]') FROM json_each(:tenants))

-- operational events (shared/store/notify_tx.py) ------------------------------------------

-- pause_running: an operator's pause of a running destination (a row only for the transaction
-- that paused it, which announces it)
UPDATE destinations SET paused = 1, paused_reason = :reason
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL AND paused = 0
RETURNING id, tenant_id, name, paused_reason, failure_streak, failing_since, notified_state,
    event_types

-- forget_previous_secrets: forget every previous secret whose overlap has ended (it signs no
-- more), so the retention round keeps none in the database or its backups past its use
UPDATE destinations SET previous_secret = NULL, previous_secret_until = NULL
WHERE previous_secret IS NOT NULL AND previous_secret_until <= :now

-- remove_tenant_destinations: soft delete every live destination of a tenant (names freed)
UPDATE destinations SET deleted_at = :now, name = name || '~removed-' || id
WHERE tenant_id = :tenant AND deleted_at IS NULL
RETURNING id

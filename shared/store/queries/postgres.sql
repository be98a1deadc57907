-- Named queries for the PostgreSQL store (shared/store/postgres.py); the names match
-- sqlite.sql. Parameters are :named (the store turns them into $1, $2, ...). Time is the
-- database's: hookline_now(:test_now_s), unix seconds (test_now_s is NULL except in tests).
-- Batches are arrays (SQLite's are JSON arrays). insert_event and find_event take a batch of
-- events where SQLite's run once per event (here a statement costs a round trip).

-- insert_event: store a batch of events (each parameter an array, one element per event, in
-- batch order); an event whose (tenant, source, source_event_id) exists, or repeats earlier in
-- the batch, is skipped
INSERT INTO events (message_id, tenant_id, source, source_event_id, type, body,
    forwarded_headers, trace_context, schema_problem, received_at)
SELECT u.message_id, u.tenant_id, u.source, u.source_event_id, u.type, u.body,
    u.forwarded_headers, u.trace_context, u.schema_problem, hookline_now(:test_now_s)
FROM unnest(:message_id::text[], :tenant_id::text[], :source::text[], :source_event_id::text[],
            :type::text[], :body::bytea[], :forwarded_headers::text[], :trace_context::text[],
            :schema_problem::text[])
        WITH ORDINALITY AS u (message_id, tenant_id, source, source_event_id, type, body,
                              forwarded_headers, trace_context, schema_problem, ord)
ORDER BY u.ord
ON CONFLICT (tenant_id, source, source_event_id) DO NOTHING
RETURNING id, message_id, tenant_id, source, source_event_id

-- find_event: the stored events for a batch of idempotency keys (arrays)
SELECT e.id, e.message_id, e.tenant_id, e.source, e.source_event_id
FROM events e JOIN unnest(:tenant_id::text[], :source::text[], :source_event_id::text[])
        AS k (tenant_id, source, sid)
    ON e.tenant_id = k.tenant_id AND e.source = k.source AND e.source_event_id = k.sid

-- fan_out_view: what fan-out reads, with the version it was read at (schema 22), in one
-- statement (one snapshot): the `version` row, then each tenant of :id that exists with its
-- disabled flag, then the destinations subscribed to each (tenant, pattern) of the arrays
-- with their payload filters
SELECT 'version' AS kind, version, NULL::text AS tenant_id, NULL::text AS pattern,
    NULL::bigint AS destination_id, NULL::text AS filter, NULL::boolean AS disabled
FROM fan_out_version
UNION ALL
SELECT 'tenant', NULL, id, NULL, NULL, NULL, disabled FROM tenants WHERE id = ANY(:id::text[])
UNION ALL
SELECT 'subscription', NULL, k.tenant_id, k.pattern, s.destination_id,
    (SELECT d.filter FROM destinations d WHERE d.id = s.destination_id), NULL
FROM unnest(:tenant_id::text[], :pattern::text[]) AS k (tenant_id, pattern)
JOIN destination_subscriptions s ON s.tenant_id = k.tenant_id AND s.pattern = k.pattern

-- fan_out_index: the whole subscription index with the payload filters, with the version
-- it was read at, in one statement (one snapshot); at most :limit subscriptions, and the
-- caller asks for one more than it keeps, to learn the index is larger
SELECT 'version' AS kind, version, NULL::text AS tenant_id, NULL::text AS pattern,
    NULL::bigint AS destination_id, NULL::text AS filter, NULL::boolean AS disabled
FROM fan_out_version
UNION ALL
(SELECT 'subscription', NULL, s.tenant_id, s.pattern, s.destination_id,
    (SELECT d.filter FROM destinations d WHERE d.id = s.destination_id), NULL
 FROM destination_subscriptions s LIMIT :limit)

-- lock_tenant: one tenant by id, its row locked until the transaction ends: a tenant deleted
-- meanwhile by another transaction is seen as gone (READ COMMITTED reads it again after the
-- wait), so a create-or-update never re-creates it unchecked
SELECT * FROM tenants WHERE id = :id FOR UPDATE

-- create_tenants: the tenants of :id that do not exist yet, with defaults and each its fresh
-- token epoch (:epoch: random, so no token of an earlier tenant of the id opens it); never the
-- id of a deleted tenant whose events are still stored (tenant_history)
INSERT INTO tenants (id, token_epoch, created_at, updated_at)
SELECT t.id, t.epoch, hookline_now(:test_now_s), hookline_now(:test_now_s)
FROM unnest(:id::text[], :epoch::bigint[]) AS t (id, epoch)
WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = t.id)
ON CONFLICT (id) DO NOTHING

-- insert_jobs: the delivery jobs of a batch of events, one per (event id, destination id)
-- pair, due now, each with its destination's `ordered` (jobs_ordered, schema 26; read under
-- the shared guard, ops.OrderedMarks). Only for a destination still live once its row is
-- locked (FOR KEY SHARE, as the foreign key's check locks it anyway): the fan-out was read
-- earlier in the transaction, and a removal committed meanwhile (its kill of the jobs done)
-- would otherwise leave a job pending on a removed destination, never claimed nor ended;
-- the rows come back with their destination, so the caller counts only those written
INSERT INTO jobs (event_id, destination_id, run_at, created_at, updated_at, ordered)
SELECT u.event_id, u.destination_id, t.now, t.now, t.now, d.ordered
FROM unnest(:event_ids::bigint[], :destination_ids::bigint[]) WITH ORDINALITY
        AS u (event_id, destination_id, ord)
    JOIN destinations d ON d.id = u.destination_id,
    (SELECT hookline_now(:test_now_s) AS now) t
WHERE d.deleted_at IS NULL
ORDER BY u.ord
FOR KEY SHARE OF d
RETURNING id, event_id, destination_id

-- any_live_destination: a row when any destination of :destination_ids takes deliveries
-- (not paused, not removed)
SELECT 1 AS live FROM destinations
WHERE id = ANY(:destination_ids::bigint[]) AND NOT paused AND deleted_at IS NULL
LIMIT 1

-- claim_window: the destinations one claim considers, so that its cost follows the work it
-- can take, not the destinations that exist (see StoreLogic._claim_window). A leapfrog walk
-- from destination id :after (exclusive) up to :upto (inclusive) over two indexes at once:
-- a = the next live destination (destinations_live), b = the next destination holding
-- pending jobs from a on (jobs_due); a = b is a candidate, else the walk jumps to b. Each
-- step is one search in each index, so neither paused destinations with backlogs nor live
-- ones without jobs are visited one by one. It stops at the :window-th candidate that offers
-- work now: a due pending job, a free in-flight slot (jobs_leased), its rate limit allowing a
-- request (rate_limit_allows), not full for the claiming worker (:full_destinations) and,
-- while live destinations of more than one tenant exist, its tenant not at its share
-- (:capped_tenants): so a claim never locks the destinations of a tenant at its share.
-- walked = 1. With :expired also the destination of every expired lease, walked = 0 (few:
-- leases are bounded by the workers' slots; one may repeat). `found` counts the offering
-- destinations walked before a row, so the walk ends exactly at the :window-th. Nothing is
-- locked here: the claim locks the window, then reads its slots again.
WITH RECURSIVE walk(a, b, found) AS (
    SELECT (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > :after::bigint),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > :after::bigint)), 0::bigint
    UNION ALL
    SELECT (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END)),
        w.found + CASE WHEN w.a = w.b AND EXISTS (SELECT 1 FROM destinations d
            WHERE d.id = w.a AND d.id <> ALL(:full_destinations::bigint[])
                AND NOT (d.tenant_id = ANY(:capped_tenants::text[])
                    AND (SELECT min(tenant_id) FROM destinations WHERE deleted_at IS NULL)
                    <> (SELECT max(tenant_id) FROM destinations WHERE deleted_at IS NULL))
                AND (d.rate_limit_per_s IS NULL OR d.next_send_at
                    <= hookline_now(:test_now_s) + GREATEST(0.0, 1.0 - 1.0 / d.rate_limit_per_s))
                AND EXISTS (SELECT 1 FROM jobs p WHERE p.destination_id = d.id
                    AND p.status = 'pending' AND p.run_at <= hookline_now(:test_now_s))
                AND d.max_in_flight > (SELECT count(*) FROM jobs r WHERE r.destination_id = d.id
                    AND r.status = 'running' AND r.lease_until > hookline_now(:test_now_s)))
            THEN 1 ELSE 0 END
    FROM walk w
    WHERE w.a IS NOT NULL AND w.b IS NOT NULL AND w.a <= :upto::bigint
        AND w.found < :window::bigint
)
SELECT w.a AS id, true AS walked FROM walk w
WHERE w.a = w.b AND w.a <= :upto::bigint AND w.found < :window::bigint
    AND EXISTS (SELECT 1 FROM destinations d
    WHERE d.id = w.a AND d.id <> ALL(:full_destinations::bigint[])
        AND NOT (d.tenant_id = ANY(:capped_tenants::text[])
            AND (SELECT min(tenant_id) FROM destinations WHERE deleted_at IS NULL)
            <> (SELECT max(tenant_id) FROM destinations WHERE deleted_at IS NULL))
        AND (d.rate_limit_per_s IS NULL OR d.next_send_at
            <= hookline_now(:test_now_s) + GREATEST(0.0, 1.0 - 1.0 / d.rate_limit_per_s))
        AND EXISTS (SELECT 1 FROM jobs p WHERE p.destination_id = d.id
            AND p.status = 'pending' AND p.run_at <= hookline_now(:test_now_s))
        AND d.max_in_flight > (SELECT count(*) FROM jobs r WHERE r.destination_id = d.id
            AND r.status = 'running' AND r.lease_until > hookline_now(:test_now_s)))
UNION ALL
SELECT destination_id, false FROM jobs
WHERE :expired::boolean AND status = 'running' AND lease_until <= hookline_now(:test_now_s)

-- lock_claimable_destinations: lock (in id order, so claimers never deadlock) the destinations
-- of the claim's window (:destination_ids, from claim_window) that still take deliveries; the
-- claimer holds these row locks until it commits, so the in-flight count it reads next
-- (destination_slots) cannot be passed by two hosts at once. FOR NO KEY UPDATE does not block
-- ingest (a new job takes only KEY SHARE on its destination). Only the window is locked: a
-- claim never waits on destinations it would not take from (a tenant at its share).
SELECT d.id FROM destinations d
WHERE d.id = ANY(:destination_ids::bigint[]) AND NOT d.paused AND d.deleted_at IS NULL
ORDER BY d.id
FOR NO KEY UPDATE OF d

-- destination_slots: free in-flight slots of the locked destinations (read after the locks);
-- several_tenants (the same on every row): whether live destinations of more than one tenant
-- exist, the two ends of the destinations_tenant index (the per-tenant fair share applies
-- only then)
SELECT d.id, d.tenant_id, d.ordered, d.rate_limit_per_s, d.next_send_at, d.max_in_flight - (
    SELECT count(*) FROM jobs j
    WHERE j.destination_id = d.id AND j.status = 'running'
        AND j.lease_until > hookline_now(:test_now_s)
) AS free,
    (SELECT min(tenant_id) FROM destinations WHERE deleted_at IS NULL)
    <> (SELECT max(tenant_id) FROM destinations WHERE deleted_at IS NULL) AS several_tenants
FROM destinations d WHERE d.id = ANY(:destination_ids::bigint[]) ORDER BY d.id

-- due_jobs: claimable jobs of the claim's destinations (:destination_ids with :limits, its
-- most jobs each), each destination's oldest due first: pending ones at most min(its limit,
-- :pending_limit) (the claim's first read stops at a few: see _pending_bound), expired
-- leases at most min(its limit, :limit), not one at :max_attempts (kill_lost_at_cap ends it,
-- or skipped it while another transaction held it: never taken over); rows another
-- transaction holds are skipped (FOR UPDATE SKIP LOCKED), and the rows read are locked until
-- the claim commits. Pending and expired-lease jobs are read apart, each in index order
-- (jobs_due, jobs_leased), one index search per destination and kind: one query ordered by
-- a CASE would sort the destinations' whole backlogs on every claim.
SELECT o.destination_id, p.id, p.run_at AS due_at, p.attempts, p.replays, 'pending' AS status
FROM unnest(:destination_ids::bigint[], :limits::integer[]) AS o (destination_id, most)
CROSS JOIN LATERAL (
    SELECT id, run_at, attempts, replays FROM jobs
    WHERE destination_id = o.destination_id AND status = 'pending'
        AND run_at <= hookline_now(:test_now_s)
    ORDER BY run_at LIMIT LEAST(o.most, :pending_limit::integer)
    FOR UPDATE SKIP LOCKED) p
UNION ALL
SELECT o.destination_id, x.id, x.lease_until, x.attempts, x.replays, 'running'
FROM unnest(:destination_ids::bigint[], :limits::integer[]) AS o (destination_id, most)
CROSS JOIN LATERAL (
    SELECT id, lease_until, attempts, replays FROM jobs
    WHERE destination_id = o.destination_id AND status = 'running'
        AND lease_until <= hookline_now(:test_now_s) AND attempts < :max_attempts
    ORDER BY lease_until LIMIT LEAST(o.most, :limit::integer)
    FOR UPDATE SKIP LOCKED) x

-- claim_probe: whether a claim could take or end anything now (read-only, so that a worker
-- woken for nothing takes no row locks and writes nothing): a due job on a destination that
-- takes deliveries, an expired lease on one, or an expired lease on a job that used its last
-- attempt (kill_lost_at_cap). The due job is looked for by claim_window's leapfrog walk (the
-- live destinations, destinations_live, against the pending jobs' destinations), stopping
-- at the first due one: no step per live destination without jobs, one per live destination
-- whose pending jobs are all retries not due yet
WITH RECURSIVE walk(a, b, found) AS (
    SELECT (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > 0),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > 0)), 0
    UNION ALL
    SELECT (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END),
        (SELECT min(destination_id) FROM jobs WHERE status = 'pending'
            AND destination_id >= (SELECT min(id) FROM destinations WHERE NOT paused AND deleted_at IS NULL
            AND id > CASE WHEN w.a = w.b THEN w.a ELSE w.b - 1 END)),
        CASE WHEN w.a = w.b AND EXISTS (SELECT 1 FROM jobs p WHERE p.destination_id = w.a
            AND p.status = 'pending' AND p.run_at <= hookline_now(:test_now_s)) THEN 1 ELSE 0 END
    FROM walk w WHERE w.a IS NOT NULL AND w.b IS NOT NULL AND w.found = 0
)
SELECT (SELECT max(found) FROM walk) = 1 OR EXISTS (
    SELECT 1 FROM jobs j JOIN destinations d ON d.id = j.destination_id
    WHERE j.status = 'running' AND j.lease_until <= hookline_now(:test_now_s) AND NOT d.paused
        AND d.deleted_at IS NULL) OR EXISTS (
    SELECT 1 FROM jobs WHERE status = 'running' AND lease_until <= hookline_now(:test_now_s)
        AND attempts >= :max_attempts
) AS claimable

-- kill_lost_at_cap: an expired lease on a job that used its last attempt means the worker died
-- on it. A job another transaction holds is skipped (a late finish of it, which may hold
-- more of the same worker's jobs, in its own order): a claim never waits for a job row.
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = 'worker lost (lease expired on the final attempt)',
    finished_at = hookline_now(:test_now_s), updated_at = hookline_now(:test_now_s)
WHERE id = ANY(ARRAY(
    SELECT id FROM jobs WHERE status = 'running' AND lease_until <= hookline_now(:test_now_s)
        AND attempts >= :max_attempts
    FOR UPDATE SKIP LOCKED))
RETURNING id, destination_id, event_id, attempts,
    (SELECT name FROM destinations d WHERE d.id = jobs.destination_id) AS destination,
    (SELECT tenant_id FROM destinations d WHERE d.id = jobs.destination_id) AS tenant

-- close_attempts_lost_at_cap: the attempt each job kill_lost_at_cap just made dead was in
-- flight on is closed with the job's error and the time it ran
UPDATE attempts SET error = 'worker lost (lease expired on the final attempt)',
    duration_s = GREATEST(hookline_now(:test_now_s) - started_at, 0)
WHERE job_id = ANY(:job_ids::bigint[]) AND duration_s IS NULL AND error IS NULL
RETURNING job_id

-- takeovers_among: which of the offered jobs a claim would take over (the test of
-- mark_attempt_lost, asked before the claim so that a takeover is claimed alone): an attempt
-- of an earlier claim never finished (its worker was lost), or the latest attempt was closed
-- "worker lost" at the cap (a replay of a job that died so). Not asked about a pending job
-- with no attempt counted (attempts and replays 0): see sqlite.sql.
SELECT a.job_id,
    count(*) FILTER (WHERE a.duration_s IS NULL AND a.error IS NULL) AS open_attempts
FROM attempts a
WHERE a.job_id = ANY(:job_ids::bigint[])
    AND ((a.duration_s IS NULL AND a.error IS NULL)
         OR (a.error LIKE 'worker lost%'
             AND a.id = (SELECT max(b.id) FROM attempts b WHERE b.job_id = a.job_id)))
GROUP BY a.job_id

-- ordered_head: an ordered destination's oldest unfinished job (FIFO: only it may be sent),
-- the first entry of jobs_ordered (schema 26); `replays` tells a job with no attempt counted
-- (takeovers_among)
SELECT id, status, run_at, lease_until, attempts, replays FROM jobs
WHERE destination_id = :destination_id AND ordered = 1 AND status IN ('pending', 'running')
ORDER BY id LIMIT 1

-- unheld_leases: the jobs leased to :worker under a token carrying :tag and newer than
-- :newer_than that it does not hold: a claim it made whose answer never reached it. Tokens
-- compare byte by byte (COLLATE "C": their hex digits sort by the claim's instant). A
-- takeover among them (the attempt before this lease's was lost) is left to expire, to be
-- taken over again alone. Running jobs only, as many as the workers' slots.
SELECT j.id, j.event_id, j.destination_id, j.lease_token, d.name AS destination,
    d.tenant_id
FROM jobs j JOIN destinations d ON d.id = j.destination_id
WHERE j.status = 'running' AND j.lease_owner = :worker
    AND substr(j.lease_token, 17, 8) = :tag::text
    AND j.lease_token COLLATE "C" > :newer_than::text COLLATE "C"
    AND j.lease_token <> ALL(:held::text[])
    AND NOT EXISTS (
        SELECT 1 FROM attempts a
        WHERE a.job_id = j.id AND (a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%')
            AND a.id = (SELECT max(b.id) FROM attempts b
                        WHERE b.job_id = j.id AND b.lease_token <> j.lease_token))

-- claim_job: lease a batch of chosen jobs in ONE statement, each under a fresh token, still
-- only if due; attempts are counted here, at claim. A token is the claim's instant in
-- microseconds (16 hex digits), the claiming process's :token_tag (8 hex digits, or none)
-- then 16 random ones: tokens sort by time, so the attempts' unique token index grows at
-- its end instead of dirtying a random page per attempt.
-- A chosen job another transaction holds is skipped, not waited for: due_jobs has locked
-- the others already, but an ordered destination's head is read unlocked (ordered_head), and
-- a late finish of it (its lease expired) holds it and then wants the destination this claim
-- holds, a deadlock if the claim waited (tests/unit/test_takeover_races.py).
UPDATE jobs SET status = 'running', attempts = attempts + 1,
    lease_token = lpad(to_hex((hookline_now(:test_now_s) * 1000000)::bigint), 16, '0')
        || :token_tag::text
        || substr(md5(random()::text || clock_timestamp()::text || id::text), 1, 16),
    lease_owner = :worker, lease_until = hookline_now(:test_now_s) + :lease_s,
    updated_at = hookline_now(:test_now_s)
WHERE id = ANY(ARRAY(
    SELECT id FROM jobs WHERE id = ANY(:job_ids::bigint[]) AND (
        (status = 'pending' AND run_at <= hookline_now(:test_now_s))
        OR (status = 'running' AND lease_until <= hookline_now(:test_now_s)
            AND attempts < :max_attempts))
    FOR UPDATE SKIP LOCKED))
RETURNING id, event_id, destination_id, attempts, lease_token, lease_until, replays

-- mark_attempt_lost: the previous claims of just-claimed jobs that never finished are closed
-- (error, and the time they ran until this takeover); returns those jobs, and the jobs whose
-- latest attempt was closed as "worker lost" at the cap (a replay of a job that died so):
-- both are taken over. The new claims' rows do not exist yet. Only the open rows are
-- written (the claim holds their jobs, which a finish locks first); the closed ones are
-- only read, as the lost worker's late finish may hold such a row (its result is recorded
-- there as history) while it waits for a destination this claim holds.
WITH closed AS (
    UPDATE attempts SET error = 'lease expired (worker lost)',
        duration_s = GREATEST(hookline_now(:test_now_s) - started_at, 0)
    WHERE job_id = ANY(:job_ids::bigint[]) AND lease_token <> ALL(:lease_tokens::text[])
        AND duration_s IS NULL AND error IS NULL
    RETURNING job_id)
SELECT job_id FROM closed
UNION
SELECT a.job_id FROM attempts a
WHERE a.job_id = ANY(:job_ids::bigint[]) AND a.lease_token <> ALL(:lease_tokens::text[])
    AND a.error LIKE 'worker lost%'
    AND a.id = (SELECT max(b.id) FROM attempts b WHERE b.job_id = a.job_id)

-- insert_attempt: one attempt row per claim (batch, one element per claim)
INSERT INTO attempts (job_id, attempt, worker, lease_token, started_at)
SELECT u.job_id, u.attempt, :worker, u.lease_token, hookline_now(:test_now_s)
FROM unnest(:job_ids::bigint[], :attempts::integer[], :lease_tokens::text[])
    AS u (job_id, attempt, lease_token)

-- claim_details: what a worker needs to send claimed jobs (batch, by job id);
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
WHERE j.id = ANY(:job_ids::bigint[])

-- extend_lease: push the expiry of many leases out in one statement (arrays of job ids and
-- their lease tokens): a worker's heartbeat; fenced by each token; returns the leases kept
UPDATE jobs j SET lease_until = hookline_now(:test_now_s) + :lease_s
FROM unnest(:job_ids::bigint[], :lease_tokens::text[]) AS u (job_id, lease_token)
WHERE j.id = u.job_id AND j.lease_token = u.lease_token AND j.status = 'running'
RETURNING j.id, j.lease_token

-- finish_done: the destination acknowledged; fenced by the lease token; finished when the
-- answer arrived (:waited_s before this write)
UPDATE jobs SET status = 'done', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = NULL, finished_at = hookline_now(:test_now_s) - :waited_s::double precision,
    updated_at = hookline_now(:test_now_s)
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- finish_dead: no more attempts; fenced by the lease token; finished when the last answer
-- arrived (:waited_s before this write)
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = :error,
    finished_at = hookline_now(:test_now_s) - :waited_s::double precision,
    updated_at = hookline_now(:test_now_s)
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- record_attempt: complete the attempt row of a claim (a stale claim's result is history too,
-- but a row already closed as lost keeps that error, so its outcome class never changes); a
-- row this finish already completed (a write retried after its commit's answer was lost) is
-- left alone and not returned
UPDATE attempts SET duration_s = :duration_s, status_code = :status_code,
    error = CASE WHEN error LIKE 'lease expired%' OR error LIKE 'worker lost%' THEN error
                 ELSE :error::text END,
    response_excerpt = :response_excerpt, started_at = :started_at,
    response_headers = :response_headers, location = :location
WHERE lease_token = :lease_token
    AND (duration_s IS NULL OR error LIKE 'lease expired%' OR error LIKE 'worker lost%')
RETURNING (error LIKE 'lease expired%' OR error LIKE 'worker lost%') AS was_lost

-- record_attempts: complete the attempt rows of many claims in one statement (arrays, one
-- element per claim); as record_attempt, a row already completed is left alone
UPDATE attempts a SET started_at = u.started_at, duration_s = u.duration_s,
    status_code = u.status_code,
    error = CASE WHEN a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%' THEN a.error
                 ELSE u.error END,
    response_excerpt = u.response_excerpt,
    response_headers = u.response_headers, location = u.location
FROM unnest(:lease_tokens::text[], :started_ats::float8[], :durations_s::float8[],
            :status_codes::integer[], :errors::text[], :response_excerpts::text[],
            :response_headers::text[], :locations::text[])
    AS u (lease_token, started_at, duration_s, status_code, error, response_excerpt,
          response_headers, location)
WHERE a.lease_token = u.lease_token
    AND (a.duration_s IS NULL OR a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%')
RETURNING a.lease_token,
    coalesce(a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%', false) AS was_lost

-- finish_delivered: many acknowledged claims to done in one statement (arrays of job ids,
-- their lease tokens and the seconds each answer waited before this write); fenced by each
-- claim's token; returns the jobs it changed
UPDATE jobs j SET status = 'done', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = NULL, finished_at = hookline_now(:test_now_s) - u.waited_s,
    updated_at = hookline_now(:test_now_s)
FROM unnest(:job_ids::bigint[], :lease_tokens::text[], :waited_s::double precision[])
    AS u (job_id, lease_token, waited_s)
WHERE j.id = u.job_id AND j.lease_token = u.lease_token AND j.status = 'running'
RETURNING j.id

-- hand_back: return a claimed job to pending without charging the attempt, due at once and in
-- its place in the line (its run_at, kept: a claim took it due); fenced
UPDATE jobs SET status = 'pending', attempts = attempts - 1, lease_token = NULL,
    lease_owner = NULL, lease_until = NULL, run_at = LEAST(run_at, hookline_now(:test_now_s)),
    updated_at = hookline_now(:test_now_s)
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'

-- insert_destination: register a destination
INSERT INTO destinations (tenant_id, name, url, secret, event_types, max_in_flight, headers,
    timeout_s, rate_limit_per_s, ordered, filter, propagate_trace, created_at)
VALUES (:tenant, :name, :url, :secret, :event_types, :max_in_flight, :headers, :timeout_s,
    :rate_limit_per_s, :ordered, :filter, :propagate_trace, hookline_now(:test_now_s))
RETURNING *

-- set_paused: pause or resume a destination; resuming resets the failure run (breaker)
UPDATE destinations SET paused = :paused, paused_reason = :reason,
    failure_streak = CASE WHEN :paused THEN failure_streak ELSE 0 END,
    failing_since = CASE WHEN :paused THEN failing_since ELSE NULL END
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL

-- list_jobs: jobs with their event and destination, newest first; keyset paging by id
-- (:before)
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE (:status::text IS NULL OR j.status = :status)
    AND (:tenant::text IS NULL OR d.tenant_id = :tenant)
    AND (:before::bigint IS NULL OR j.id < :before)
ORDER BY j.id DESC LIMIT :limit

-- list_attempts: attempts of one job, or of all jobs when job_id is NULL, oldest first
SELECT job_id, attempt, worker, lease_token, started_at, duration_s, status_code, error,
    response_excerpt, response_headers, location
FROM attempts WHERE (:job_id::bigint IS NULL OR job_id = :job_id) ORDER BY id LIMIT :limit

-- oldest_pending: run_at of the longest-waiting due pending job
SELECT min(run_at) AS oldest
FROM jobs WHERE status = 'pending' AND run_at <= hookline_now(:test_now_s)

-- remove_destination: soft delete; the name is freed (renamed name~removed-ID) for reuse
UPDATE destinations SET deleted_at = hookline_now(:test_now_s), name = name || '~removed-' || id
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL
RETURNING id

-- kill_jobs_of_destination: a removed destination's unfinished jobs end dead
UPDATE jobs SET status = 'dead', lease_token = NULL, lease_owner = NULL, lease_until = NULL,
    last_error = 'destination removed', finished_at = hookline_now(:test_now_s),
    updated_at = hookline_now(:test_now_s)
WHERE destination_id = :destination_id AND status IN ('pending', 'running')
RETURNING id

-- list_dead: dead jobs, most recently dead first, optionally of one destination / since a time,
-- with what decides whether each can be replayed (its body purged, its destination removed).
-- Keyset paging: the next page is the rows after (:before_at, :before_id), the last row's
-- (finished_at, id), which dead_letter_position reads; the id breaks ties, so each row is on
-- exactly one page
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at, e.body_purged_at, d.deleted_at AS destination_deleted_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.status = 'dead' AND (:destination::text IS NULL OR d.name = :destination)
    AND (:tenant::text IS NULL OR d.tenant_id = :tenant)
    AND (:since::double precision IS NULL OR j.finished_at >= :since)
    AND (:before_at::double precision IS NULL OR j.finished_at < :before_at
         OR (j.finished_at = :before_at AND j.id < :before_id::bigint))
    -- the same bound as a range the index can start from: a deep page reads its own rows
    AND j.finished_at <= COALESCE(:before_at::double precision, 'Infinity'::float8)
ORDER BY j.finished_at DESC, j.id DESC LIMIT :limit

-- replay_candidates: dead jobs a replay would take (live destination, body not purged). The
-- destinations are locked FOR KEY SHARE (a claim's or finish's lock does not conflict): a
-- removal in progress is waited for and its destination then left out, and one that starts
-- after waits for the replay, then ends the jobs it reopened; unlocked, a job reopened just
-- after the removal's kill was left pending on a removed destination, never claimed
SELECT j.id, j.destination_id FROM jobs j JOIN events e ON e.id = j.event_id
    JOIN destinations d ON d.id = j.destination_id
WHERE j.status = 'dead' AND d.deleted_at IS NULL AND e.body_purged_at IS NULL
    AND (:job_id::bigint IS NULL OR j.id = :job_id)
    AND (:destination::text IS NULL OR d.name = :destination)
    AND (:tenant::text IS NULL OR d.tenant_id = :tenant)
    AND (:since::double precision IS NULL OR j.finished_at >= :since)
ORDER BY j.id
FOR KEY SHARE OF d

-- replay_job: dead -> pending, fresh attempt budget, due now (batch of ids; history stays)
UPDATE jobs SET status = 'pending', attempts = 0, run_at = hookline_now(:test_now_s),
    last_error = NULL, finished_at = NULL, replays = replays + 1,
    updated_at = hookline_now(:test_now_s),
    -- unfinished again: its destination's `ordered` now (jobs_ordered, schema 26)
    ordered = (SELECT d.ordered FROM destinations d WHERE d.id = jobs.destination_id)
WHERE id = ANY(:job_ids::bigint[]) AND status = 'dead'
RETURNING id

-- purge_bodies: empty the body of events whose jobs all ended before the cutoff; a dead job
-- keeps its event's body for as long as the job itself is kept, so it can be replayed
UPDATE events SET body = '\x'::bytea, body_purged_at = hookline_now(:test_now_s)
WHERE body_purged_at IS NULL AND received_at < :before
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_id = events.id
                    AND (j.status IN ('pending', 'running', 'dead') OR j.finished_at >= :before))

-- paused_destinations: :tenant's live destinations that are paused, with the reason
SELECT name, paused_reason FROM destinations
WHERE paused AND deleted_at IS NULL AND tenant_id = :tenant ORDER BY id

-- destination_failed: extend a destination's failure run by one attempt (and its dead letters
-- since the last notice by :dead, 0 or 1), with what operational events are decided on
UPDATE destinations SET failure_streak = failure_streak + 1,
    dead_letters_unnoticed = dead_letters_unnoticed + :dead,
    failing_since = COALESCE(failing_since, hookline_now(:test_now_s))
WHERE id = :destination_id
RETURNING id, tenant_id, name, url, paused, failure_streak, failing_since,
    notified_state, event_types, dead_letters_unnoticed, dead_letters_noticed_at

-- destination_succeeded: a 2xx ends the failure run; a row comes back only when something
-- changed or an operational event announced it failing or paused (a recovery to announce)
UPDATE destinations SET failure_streak = 0, failing_since = NULL
WHERE id = :destination_id
    AND (failure_streak <> 0 OR failing_since IS NOT NULL OR notified_state <> 'ok')
RETURNING id, tenant_id, name, paused, notified_state, event_types

-- auto_pause: the circuit breaker (or a 410 Gone) pauses a destination with a reason
UPDATE destinations SET paused = true, paused_reason = :reason
WHERE id = :destination_id AND NOT paused

-- pause_unreadable: pause a destination whose own stored value no request can be made of
-- (a claim met it), returning what its pause announcement is decided on
UPDATE destinations SET paused = true, paused_reason = :reason
WHERE id = :destination_id AND NOT paused
RETURNING id, tenant_id, name, url, paused, failure_streak, failing_since,
    notified_state, event_types

-- rotate_secret: new secret now, previous one still signed with for :overlap_s seconds
UPDATE destinations SET previous_secret = secret,
    previous_secret_until = hookline_now(:test_now_s) + :overlap_s, secret = :secret
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL
RETURNING *

-- insert_source: register an inbound source
INSERT INTO sources (name, scheme, secret, created_at)
VALUES (:name, :scheme, :secret, hookline_now(:test_now_s))
RETURNING *

-- remove_source: soft delete; the name is freed (renamed name~removed-ID) for reuse
UPDATE sources SET deleted_at = hookline_now(:test_now_s), name = name || '~removed-' || id
WHERE name = :name AND deleted_at IS NULL
RETURNING id

-- destination_summaries: per live destination, its state and jobs in flight, pending and dead
SELECT d.id, d.tenant_id, d.name, d.paused, d.paused_reason, d.failure_streak, d.failing_since,
    d.max_in_flight,
    (SELECT count(*) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'running'
        AND j.lease_until > hookline_now(:test_now_s)) AS in_flight,
    (SELECT count(*) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'pending')
        AS pending,
    (SELECT count(*) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'dead') AS dead,
    (SELECT min(j.run_at) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'pending'
        AND j.run_at <= hookline_now(:test_now_s)) AS oldest_pending_at
FROM destinations d WHERE d.deleted_at IS NULL AND (:tenant::text IS NULL OR d.tenant_id = :tenant)
ORDER BY d.id

-- destination_latency: nearest-rank p50/p99 of completed attempt durations per destination, over the newest :scan_limit attempts started since :since
WITH recent AS (
    SELECT j.destination_id, a.duration_s,
        CASE WHEN a.status_code BETWEEN 200 AND 299 THEN 1 ELSE 0 END AS delivered
    FROM attempts a JOIN jobs j ON j.id = a.job_id
    WHERE a.id > (SELECT COALESCE(max(id), 0) FROM attempts) - :scan_limit::bigint
        AND a.started_at >= :since::double precision AND a.duration_s IS NOT NULL
        AND NOT (a.error IS NOT NULL AND (a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%'))
), ranked AS (
    SELECT destination_id, duration_s, delivered,
        row_number() OVER (PARTITION BY destination_id ORDER BY duration_s) AS rn,
        count(*) OVER (PARTITION BY destination_id) AS n
    FROM recent
)
SELECT destination_id, n AS samples, sum(delivered) AS delivered_samples,
    max(CASE WHEN rn = (n * 50 + 99) / 100 THEN duration_s END) AS p50_s,
    max(CASE WHEN rn = (n * 99 + 99) / 100 THEN duration_s END) AS p99_s
FROM ranked GROUP BY destination_id, n

-- events_per_bucket: events received per time bucket (number = floor(received_at / :bucket_s)) since :since
SELECT floor(received_at / :bucket_s::double precision)::bigint AS bucket, count(*) AS n
FROM events WHERE received_at >= :since::double precision GROUP BY 1

-- finished_per_bucket: done and dead jobs per time bucket (number = floor(finished_at / :bucket_s)) since :since
SELECT floor(finished_at / :bucket_s::double precision)::bigint AS bucket, status,
    count(*) AS n
FROM jobs WHERE status IN ('done', 'dead') AND finished_at >= :since::double precision
GROUP BY 1, 2

-- failed_attempts_per_bucket: attempts that did not deliver (an HTTP status other than 2xx, or a transport error; a lost worker or a hand-back is no delivery failure) per time bucket of their start (number = floor(started_at / :bucket_s)), among attempts after id :after_id started since :since
SELECT floor(started_at / :bucket_s::double precision)::bigint AS bucket, count(*) AS n
FROM attempts
WHERE id > :after_id::bigint AND started_at >= :since::double precision
    AND duration_s IS NOT NULL
    AND (status_code IS NULL OR status_code NOT BETWEEN 200 AND 299)
    AND COALESCE(error, '') NOT LIKE 'lease expired%'
    AND COALESCE(error, '') NOT LIKE 'worker lost%'
    AND COALESCE(error, '') NOT LIKE 'handed back%'
GROUP BY 1

-- event_body_of_job: the first :max_bytes bytes of a job's event body, its size and purge time
-- (of :tenant's jobs only, when given)
SELECT e.id AS event_id, e.type, substring(e.body FROM 1 FOR :max_bytes::integer) AS head,
    length(e.body) AS size_bytes, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id
WHERE j.id = :job_id::bigint AND (:tenant::text IS NULL OR e.tenant_id = :tenant)

-- list_events: events newest first, filtered by type, received time, a job's destination
-- and/or status; keyset paging by id (:before)
SELECT e.id, e.message_id, e.tenant_id, e.source, e.source_event_id, e.type,
    e.schema_problem, e.received_at, length(e.body) AS body_bytes, e.body_purged_at
FROM events e
WHERE (:type::text IS NULL OR e.type = :type)
    AND (:since::double precision IS NULL OR e.received_at >= :since)
    AND (:until::double precision IS NULL OR e.received_at < :until)
    AND (:before::bigint IS NULL OR e.id < :before)
    AND (:tenant::text IS NULL OR e.tenant_id = :tenant)
    AND ((:destination::text IS NULL AND :status::text IS NULL) OR EXISTS (
        SELECT 1 FROM jobs j JOIN destinations d ON d.id = j.destination_id
        WHERE j.event_id = e.id AND (:destination::text IS NULL OR d.name = :destination)
            AND (:tenant::text IS NULL OR d.tenant_id = :tenant)
            AND (:status::text IS NULL OR j.status = :status)))
ORDER BY e.id DESC LIMIT :limit

-- jobs_of_events: the jobs of several events (a batch of ids), by id
SELECT j.id, j.event_id, d.name AS destination, j.status, j.attempts, j.run_at, j.last_error,
    j.created_at, j.finished_at, j.replays
FROM jobs j JOIN destinations d ON d.id = j.destination_id
WHERE j.event_id = ANY(:event_ids::bigint[]) ORDER BY j.id

-- resend_candidates: done or dead jobs a resend would take (live destination, body stored),
-- oldest first; since/until bound the job's creation (its event's receipt); their
-- destinations locked FOR KEY SHARE, as replay_candidates does (a removal in progress)
SELECT j.id, j.status, j.destination_id FROM jobs j JOIN events e ON e.id = j.event_id
    JOIN destinations d ON d.id = j.destination_id
WHERE j.status IN ('done', 'dead') AND d.deleted_at IS NULL AND e.body_purged_at IS NULL
    AND (:status::text IS NULL OR j.status = :status)
    AND (:job_id::bigint IS NULL OR j.id = :job_id)
    AND (:destination::text IS NULL OR d.name = :destination)
    AND (:tenant::text IS NULL OR d.tenant_id = :tenant)
    AND (:since::double precision IS NULL OR j.created_at >= :since)
    AND (:until::double precision IS NULL OR j.created_at < :until)
ORDER BY j.id LIMIT :limit
FOR UPDATE OF j FOR KEY SHARE OF d

-- resend_jobs: done/dead -> pending, fresh attempt budget, due now (batch of ids; the event
-- row is untouched, so the same webhook-id and body bytes go out; history stays)
UPDATE jobs SET status = 'pending', attempts = 0, run_at = hookline_now(:test_now_s),
    last_error = NULL, finished_at = NULL, replays = replays + 1,
    updated_at = hookline_now(:test_now_s),
    -- unfinished again: its destination's `ordered` now (jobs_ordered, schema 26)
    ordered = (SELECT d.ordered FROM destinations d WHERE d.id = jobs.destination_id)
WHERE id = ANY(:job_ids::bigint[]) AND status IN ('done', 'dead')
RETURNING id

-- retry_now_candidates: pending jobs not yet due a retry now would take, oldest first
SELECT j.id, j.status, j.destination_id FROM jobs j
    JOIN destinations d ON d.id = j.destination_id
WHERE j.status = 'pending' AND j.run_at > hookline_now(:test_now_s)
    AND (:job_id::bigint IS NULL OR j.id = :job_id)
    AND (:destination::text IS NULL OR d.name = :destination)
    AND (:tenant::text IS NULL OR d.tenant_id = :tenant)
    AND (:since::double precision IS NULL OR j.created_at >= :since)
    AND (:until::double precision IS NULL OR j.created_at < :until)
ORDER BY j.id LIMIT :limit

-- retry_now_jobs: pending jobs due now (batch of ids; attempts unchanged)
UPDATE jobs SET run_at = hookline_now(:test_now_s), updated_at = hookline_now(:test_now_s)
WHERE id = ANY(:job_ids::bigint[]) AND status = 'pending'
    AND run_at > hookline_now(:test_now_s)
RETURNING id

-- add_metric_deltas: append one transaction's changes to the figures (arrays, one element
-- per change; shared/store/metric_deltas.py): appended, never updated, so hosts writing at
-- once never wait on a counter row; fold_metric_deltas moves them into metric_counts
INSERT INTO metric_count_deltas (family, destination_id, label, n, total_s)
SELECT * FROM unnest(:families::text[], :destination_ids::bigint[], :labels::text[],
                     :ns::bigint[], :totals_s::float8[])

-- fold_metric_deltas: move the appended changes into metric_counts (two folds at once each
-- move a delta row once: the DELETE locks it; counter rows are upserted in key order); an
-- `oldest` row or a change of a destination's pending count (schema 23) reads its oldest
-- pending run_at anew (one jobs_due probe)
WITH moved AS (
    DELETE FROM metric_count_deltas
    RETURNING family, destination_id, label, n, total_s
), summed AS (
    INSERT INTO metric_counts (family, destination_id, label, n, total_s)
    SELECT family, destination_id, label, sum(n), sum(total_s) FROM moved
    WHERE family <> 'oldest' GROUP BY family, destination_id, label
    ORDER BY family, destination_id, label
    ON CONFLICT (family, destination_id, label) DO UPDATE SET
        n = metric_counts.n + excluded.n,
        total_s = coalesce(metric_counts.total_s, 0) + coalesce(excluded.total_s, 0)
    RETURNING 1
), oldest AS (
    INSERT INTO metric_counts (family, destination_id, label, n, total_s)
    SELECT 'oldest', x.destination_id, '', 0,
        (SELECT min(run_at) FROM jobs j
         WHERE j.destination_id = x.destination_id AND j.status = 'pending')
    FROM (SELECT DISTINCT destination_id FROM moved
          WHERE family = 'oldest' OR (family = 'jobs' AND label = 'pending'
                                      AND destination_id <> 0)) x
    ORDER BY x.destination_id
    ON CONFLICT (family, destination_id, label) DO UPDATE SET total_s = excluded.total_s
    RETURNING 1
)
-- (data-modifying CTEs run whether read or not)
SELECT count(*) AS folded FROM moved

-- metric_counts_of: the maintained figures of some destinations (0: the totals); every
-- family named, so the primary key (family, destination_id, label) finds each destination's
-- rows instead of scanning the table
SELECT family, destination_id, label, n, total_s FROM metric_counts
WHERE family IN ('jobs', 'attempts', 'latency', 'oldest', 'events', 'filtered', 'notifications')
    AND destination_id = ANY(:destination_ids::bigint[])

-- unfinished_jobs_of_destination: the jobs kill_jobs_of_destination is about to end, with
-- their status, locked so that no finish changes one in between. NOWAIT: the removal holds
-- the destination, which a finish holding one of these jobs (or a claim that ended it lost
-- at its cap) wants next; waiting for that job would close a lock cycle, so one held fails
-- the removal at once (LockUnavailable; it is tried again: ops.retried_giving_way)
SELECT id, status FROM jobs
WHERE destination_id = :destination_id AND status IN ('pending', 'running')
FOR UPDATE NOWAIT

-- (tenant-api: the tenant API's reads and actions)

-- tenant_list_jobs: one tenant's jobs newest first, optionally of one destination and/or status; keyset paging by id (:before)
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at
FROM jobs j JOIN destinations d ON d.id = j.destination_id JOIN events e ON e.id = j.event_id
WHERE d.tenant_id = :tenant
    AND (:destination::text IS NULL OR d.name = :destination)
    AND (:status::text IS NULL OR j.status = :status)
    AND (:before::bigint IS NULL OR j.id < :before)
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
          CASE WHEN o.total_s <= hookline_now(:test_now_s) THEN o.total_s END AS due,
          d.id = ANY(:shown_ids::bigint[]) AS shown
      FROM destinations d
      LEFT JOIN metric_counts o ON o.family = 'oldest' AND o.destination_id = d.id
          AND o.label = ''
      WHERE d.deleted_at IS NULL) AS r

-- ---- payload filters (shared/store/filter_tx.py) ----

-- tenant_metadata: the metadata of each tenant of :id
SELECT id, metadata FROM tenants WHERE id = ANY(:id::text[])

-- operational events (shared/store/notify_tx.py) ------------------------------------------

-- pause_running: an operator's pause of a running destination (a row only for the transaction
-- that paused it, which announces it)
UPDATE destinations SET paused = true, paused_reason = :reason
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL AND NOT paused
RETURNING id, tenant_id, name, paused_reason, failure_streak, failing_since, notified_state,
    event_types

-- forget_previous_secrets: forget every previous secret whose overlap has ended (it signs no
-- more), so the retention round keeps none in the database or its backups past its use. The
-- rows are locked in id order first, as claims and finishes lock destinations: a plain
-- UPDATE locks them in the order of its scan, and met a finish holding one of them while
-- it wanted another (a lock cycle)
UPDATE destinations SET previous_secret = NULL, previous_secret_until = NULL
WHERE id = ANY(ARRAY(
    SELECT id FROM destinations
    WHERE previous_secret IS NOT NULL AND previous_secret_until <= :now
    ORDER BY id FOR UPDATE))
    AND previous_secret IS NOT NULL AND previous_secret_until <= :now

-- remove_tenant_destinations: soft delete every live destination of a tenant (names freed),
-- locked in id order first (as forget_previous_secrets)
UPDATE destinations SET deleted_at = :now, name = name || '~removed-' || id
WHERE id = ANY(ARRAY(
    SELECT id FROM destinations WHERE tenant_id = :tenant AND deleted_at IS NULL
    ORDER BY id FOR UPDATE))
    AND tenant_id = :tenant AND deleted_at IS NULL
RETURNING id

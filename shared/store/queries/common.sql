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

-- mark_attempt_handed_back: the attempt row of a handed-back claim (:reason begins "handed
-- back": shared/record_models.py)
UPDATE attempts SET error = :reason WHERE lease_token = :lease_token AND duration_s IS NULL

-- mark_ordered_jobs: a destination turning ordered marks its unfinished jobs (jobs.ordered: an
-- ordered destination's head is the first entry of jobs_ordered). One statement for both
-- pending and running jobs, as on PostgreSQL a job that moves between the two while the
-- marking runs (a retry, a hand-back, a claim) is read again at its newest version and
-- still matches, where two statements, each with its own snapshot, could both miss it. The
-- OR (not IN) lets SQLite read each status through its own partial index (jobs_due,
-- jobs_leased). Turning unordered unmarks nothing: only an ordered destination's head is
-- read, so a mark left on an unordered one's job is one index entry.
UPDATE jobs SET ordered = 1
WHERE destination_id = :destination_id AND ordered = 0
    AND (status = 'pending' OR status = 'running')

-- dead_letter_position: where a dead job stands in list_dead's order (the page cursor); no row
-- when it is not dead (replayed, purged, or never was)
SELECT finished_at, id FROM jobs WHERE id = :job_id AND status = 'dead'

-- get_destination: one live destination by name
SELECT * FROM destinations WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL

-- expire_previous_secret: forget the secret before the last rotation (it signs no more)
UPDATE destinations SET previous_secret = NULL, previous_secret_until = NULL
WHERE tenant_id = :tenant AND name = :name AND deleted_at IS NULL
RETURNING *

-- count_attempts: number of recorded attempts
SELECT count(*) AS n FROM attempts

-- replay_job_state: why one job can or cannot be replayed
SELECT j.id, j.status, d.deleted_at, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.id = :job_id

-- purge_attempts: attempt rows of done jobs that ended before :before and of dead jobs that
-- died before :dead_before. (The purges name jobs_finished's own term, status IN ('done',
-- 'dead'), in each branch: SQLite's planner takes a partial index only then, and without it
-- scans jobs.)
DELETE FROM attempts WHERE job_id IN (
    SELECT id FROM jobs
    WHERE (status IN ('done', 'dead') AND status = 'done' AND finished_at < :before)
        OR (status IN ('done', 'dead') AND status = 'dead' AND finished_at < :dead_before))

-- purge_jobs: done jobs that ended before :before, dead jobs that died before :dead_before
DELETE FROM jobs
WHERE (status IN ('done', 'dead') AND status = 'done' AND finished_at < :before)
    OR (status IN ('done', 'dead') AND status = 'dead' AND finished_at < :dead_before)

-- purge_events: events (dedupe keys) older than the cutoff that have no job left
DELETE FROM events WHERE received_at < :before
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_id = events.id)

-- get_job: one job with its event and destination
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
    j.attempts, j.run_at, j.lease_owner, j.lease_until, j.last_error, j.created_at,
    j.updated_at, j.finished_at, j.replays, e.source, e.source_event_id, e.received_at,
    length(e.body) AS body_bytes, e.body_purged_at
FROM jobs j JOIN events e ON e.id = j.event_id JOIN destinations d ON d.id = j.destination_id
WHERE j.id = :job_id

-- advance_next_send: rate limit bookkeeping inside the claim transaction (GCRA arrival time)
UPDATE destinations SET next_send_at = :next_send_at WHERE id = :destination_id

-- get_source: one live source by name
SELECT * FROM sources WHERE name = :name AND deleted_at IS NULL

-- live_sources: live sources in creation order
SELECT * FROM sources WHERE deleted_at IS NULL ORDER BY id

-- find_event_by_id: one event's facts by its internal id (the lookup shows no body)
SELECT id, message_id, tenant_id, source, source_event_id, type, schema_problem,
    received_at, length(body) AS body_bytes, body_purged_at
FROM events WHERE id = :event_id

-- find_event_by_message_id: one event's facts by its webhook-id
SELECT id, message_id, tenant_id, source, source_event_id, type, schema_problem,
    received_at, length(body) AS body_bytes, body_purged_at
FROM events WHERE message_id = :message_id

-- find_event_by_source_id: one event's facts by the sender's id within its tenant and source
SELECT id, message_id, tenant_id, source, source_event_id, type, schema_problem,
    received_at, length(body) AS body_bytes, body_purged_at
FROM events
WHERE tenant_id = :tenant AND source = :source AND source_event_id = :source_event_id

-- tenants_with_source_id: the tenants other than :tenant with an event of this sender's id and
-- source (the first :limit in id order), each row with how many there are in all; read
-- through the idempotency key's index, which leads with source and sender's id
SELECT tenant_id, count(*) OVER () AS total FROM events
WHERE source = :source AND source_event_id = :source_event_id AND tenant_id <> :tenant
ORDER BY tenant_id LIMIT :limit

-- event_jobs: an event's jobs with their destination's name, by id
SELECT j.id, j.event_id, d.name AS destination, j.status, j.attempts, j.run_at, j.last_error,
    j.created_at, j.finished_at, j.replays
FROM jobs j JOIN destinations d ON d.id = j.destination_id
WHERE j.event_id = :event_id ORDER BY j.id

-- attempt_id_range: the smallest and the largest attempt id (both NULL when there is none)
SELECT (SELECT MIN(id) FROM attempts) AS bottom, (SELECT MAX(id) FROM attempts) AS top

-- first_attempt_after: the first attempt row after id :after_id (its start time)
SELECT id, started_at FROM attempts WHERE id > :after_id ORDER BY id LIMIT 1

-- jobs_to_purge: what purge_jobs is about to delete, per destination and status (for the
-- maintained figures)
SELECT destination_id, status, count(*) AS n FROM jobs
WHERE (status IN ('done', 'dead') AND status = 'done' AND finished_at < :before)
    OR (status IN ('done', 'dead') AND status = 'dead' AND finished_at < :dead_before)
GROUP BY destination_id, status

-- open_attempts_to_purge: attempts still in flight among those purge_attempts is about to
-- delete (of jobs that died while one was open: a removed destination's), per destination
SELECT j.destination_id, count(*) AS n FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE ((j.status IN ('done', 'dead') AND j.status = 'done' AND j.finished_at < :before)
       OR (j.status IN ('done', 'dead') AND j.status = 'dead' AND j.finished_at < :dead_before))
    AND a.duration_s IS NULL AND a.error IS NULL
GROUP BY j.destination_id

-- destination_ranking: the :limit live destinations /metrics shows series of their own, in
-- rank order (paused first, then the longest failure run, then the longest-waiting due job,
-- then the largest backlog, then the name), with what they are ranked
-- by (from metric_counts: no job row is read; the order and the limit are the database's, so
-- a scrape reads :limit rows, not one per destination)
SELECT d.id, d.tenant_id, d.name, d.paused, d.paused_reason, d.failure_streak,
    o.total_s AS oldest, coalesce(p.n, 0) AS pending
FROM destinations d
LEFT JOIN metric_counts o ON o.family = 'oldest' AND o.destination_id = d.id AND o.label = ''
LEFT JOIN metric_counts p ON p.family = 'jobs' AND p.destination_id = d.id
    AND p.label = 'pending'
WHERE d.deleted_at IS NULL
ORDER BY d.paused DESC, d.failure_streak DESC,
    CASE WHEN o.total_s <= :now THEN o.total_s END ASC NULLS LAST,
    coalesce(p.n, 0) DESC, d.name
LIMIT :limit

-- destination_page: live destinations after id :after_id, by id, at most :limit (keyset
-- paging of GET /v1/admin/metrics/destinations)
SELECT d.id, d.tenant_id, d.name, d.paused, d.paused_reason, d.failure_streak,
    o.total_s AS oldest
FROM destinations d
LEFT JOIN metric_counts o ON o.family = 'oldest' AND o.destination_id = d.id AND o.label = ''
WHERE d.deleted_at IS NULL AND d.id > :after_id ORDER BY d.id LIMIT :limit

-- recount_metric_gauges: the repair path: jobs by status, attempts in flight, the oldest
-- pending job and events stored counted again from the rows (finished attempts and
-- latency are counters that include what retention purged: kept as they are)
DELETE FROM metric_counts WHERE family IN ('jobs', 'oldest', 'events')
    OR (family = 'attempts' AND label = 'in_flight')

-- metric_gauges: the maintained gauges as they stand (the repair path compares them before
-- and after it counts them again); destination NULL: the totals (id 0)
SELECT m.family, m.destination_id, d.name AS destination, m.label, m.n, m.total_s
FROM metric_counts m LEFT JOIN destinations d ON d.id = m.destination_id
WHERE m.family IN ('jobs', 'oldest', 'events') OR (m.family = 'attempts' AND m.label = 'in_flight')

-- recount_jobs: jobs by destination and status from the rows, and their totals (pending
-- ones through jobs_due, the others through jobs_status, which on SQLite holds no pending job)
INSERT INTO metric_counts (family, destination_id, label, n)
SELECT 'jobs', destination_id, 'pending', count(*) FROM jobs WHERE status = 'pending'
GROUP BY destination_id
UNION ALL
SELECT 'jobs', destination_id, status, count(*) FROM jobs WHERE status <> 'pending'
GROUP BY destination_id, status
UNION ALL
SELECT 'jobs', 0, 'pending', count(*) FROM jobs WHERE status = 'pending' GROUP BY status
UNION ALL
SELECT 'jobs', 0, status, count(*) FROM jobs WHERE status <> 'pending' GROUP BY status
ON CONFLICT (family, destination_id, label) DO UPDATE SET n = excluded.n, total_s = excluded.total_s

-- recount_in_flight: attempts not finished yet per destination from the rows, and the total
INSERT INTO metric_counts (family, destination_id, label, n)
SELECT 'attempts', j.destination_id, 'in_flight', count(*)
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.duration_s IS NULL AND a.error IS NULL GROUP BY j.destination_id
UNION ALL
SELECT 'attempts', 0, 'in_flight', count(*) FROM attempts
WHERE duration_s IS NULL AND error IS NULL
ON CONFLICT (family, destination_id, label) DO UPDATE SET n = excluded.n, total_s = excluded.total_s

-- recount_oldest: each destination's oldest pending job from the rows (one jobs_due probe each)
INSERT INTO metric_counts (family, destination_id, label, n, total_s)
SELECT 'oldest', d.id, '', 0,
    (SELECT min(run_at) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'pending')
FROM destinations d WHERE true
ON CONFLICT (family, destination_id, label) DO UPDATE SET n = excluded.n, total_s = excluded.total_s

-- recount_events: events stored, from the rows
INSERT INTO metric_counts (family, destination_id, label, n)
SELECT 'events', 0, '', count(*) FROM events WHERE true
ON CONFLICT (family, destination_id, label) DO UPDATE SET n = excluded.n, total_s = excluded.total_s

-- count_paused_destinations: live destinations that are paused, of every tenant
SELECT count(*) AS n FROM destinations WHERE paused AND deleted_at IS NULL

-- jobs_counts_by_destination: the maintained job counts per destination of :tenant (removed
-- ones too, named name~removed-ID), for the operator's stats
SELECT d.name AS destination, m.label AS status, m.n FROM metric_counts m
JOIN destinations d ON d.id = m.destination_id
WHERE m.family = 'jobs' AND m.n <> 0 AND d.tenant_id = :tenant

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
    disabled = COALESCE(:disabled, tenants.disabled),
    -- disabling revokes every token (a new random epoch): enabling again must not bring a
    -- leaked portal link back
    token_epoch = CASE WHEN :disabled AND NOT tenants.disabled THEN :epoch
                       ELSE tenants.token_epoch END,
    updated_at = :now
RETURNING *

-- tenant_history: whether events of a tenant id are stored (a deleted tenant's stay until
-- retention purges them; their jobs and attempts go with them)
SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = :id) AS kept

-- list_tenants: tenants after :after in id order (keyset paging), optionally those whose id
-- starts with :prefix
SELECT * FROM tenants
WHERE id > COALESCE(:after, '')
    AND (CAST(:prefix AS text) IS NULL OR substr(id, 1, length(:prefix)) = :prefix)
ORDER BY id LIMIT :limit

-- tenant_destination_count: live destinations of a tenant
SELECT COUNT(*) AS n FROM destinations WHERE tenant_id = :tenant AND deleted_at IS NULL

-- tenant_unfinished_jobs: pending and running jobs of a tenant's live destinations (counted
-- from its destinations, pending ones through jobs_due and running ones through jobs_leased)
SELECT (SELECT COUNT(*) FROM destinations d JOIN jobs j ON j.destination_id = d.id
        WHERE d.tenant_id = :tenant AND d.deleted_at IS NULL AND j.status = 'pending')
    + (SELECT COUNT(*) FROM destinations d JOIN jobs j ON j.destination_id = d.id
        WHERE d.tenant_id = :tenant AND d.deleted_at IS NULL AND j.status = 'running') AS n

-- delete_tenant: forget a tenant (its removed destinations and stored events stay for
-- their history, until retention)
DELETE FROM tenants WHERE id = :id AND id <> '_default'

-- revoke_tenant_tokens: give a tenant a new (random) token epoch: every token minted before
-- stops working
UPDATE tenants SET token_epoch = :epoch WHERE id = :id
RETURNING *

-- tenant-ops: the operator's side of tenants
-- (tenant-api: tenant tokens and the tenant API's reads and actions)

-- signing_key: the key of one purpose (`tenant_tokens`), once made
SELECT key FROM signing_keys WHERE purpose = :purpose

-- insert_signing_key: make a purpose's key unless another process made it first
INSERT INTO signing_keys (purpose, key, created_at) VALUES (:purpose, :key, :now)
ON CONFLICT (purpose) DO NOTHING

-- tenant_token_state: the store's clock and one tenant's token state (NULLs when it does not exist): the one read of every tenant API request
SELECT :now AS now, t.id, t.disabled, t.token_epoch
FROM (SELECT 1 AS one) AS clock LEFT JOIN tenants t ON t.id = :tenant

-- tenant_has_destination: whether a tenant has a destination named :name (a live one, or a
-- removed one by the name it keeps, name~removed-ID): its (tenant_id, name) key, one row
SELECT 1 AS found FROM destinations WHERE tenant_id = :tenant AND name = :name

-- live_destinations_of_tenant: one tenant's live destinations (paused ones too)
SELECT * FROM destinations WHERE tenant_id = :tenant AND deleted_at IS NULL ORDER BY id

-- tenant_destination_counts: live destinations per tenant, for the tenants from :first to
-- :last in id order (one page of list_tenants)
SELECT tenant_id, COUNT(*) AS n FROM destinations
WHERE deleted_at IS NULL AND tenant_id >= :first AND tenant_id <= :last
GROUP BY tenant_id

-- destination_tenants: the tenants with a destination named :name (removed ones too: a removed
-- one is named name~removed-ID, so a plain name finds live ones only), :first first when it is
-- one of them, then in id order; n: how many tenants in all. It reads every tenant's
-- destinations (no index leads with the name): for an operator's lookup, not a hot path
SELECT tenant_id, count(*) OVER () AS n FROM destinations WHERE name = :name
ORDER BY CASE WHEN tenant_id = :first THEN 0 ELSE 1 END, tenant_id LIMIT :limit

-- removed_destination_names: the names a tenant's removed destinations once named NAME keep
-- (:prefix is NAME~removed-), newest first; n: how many in all. PostgreSQL reads every
-- destination (its index by tenant holds live ones only): for an operator's lookup of a name
-- not found, not a hot path
SELECT name, count(*) OVER () AS n FROM destinations
WHERE tenant_id = :tenant AND deleted_at IS NOT NULL AND substr(name, 1, length(:prefix)) = :prefix
ORDER BY id DESC LIMIT :limit

-- tenant_get_job: one job of a tenant's destinations with its event (the columns of get_job)
SELECT j.id, j.event_id, e.message_id, e.type AS event_type, d.name AS destination,
    d.tenant_id AS tenant, j.status,
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
SELECT id, message_id, tenant_id, source, source_event_id, type, schema_problem,
    received_at, length(body) AS body_bytes, body_purged_at
FROM events WHERE id = :event_id AND tenant_id = :tenant

-- tenant_find_event_by_message_id: one event of a tenant by its webhook-id
SELECT id, message_id, tenant_id, source, source_event_id, type, schema_problem,
    received_at, length(body) AS body_bytes, body_purged_at
FROM events WHERE message_id = :message_id AND tenant_id = :tenant

-- tenant_event_types: the distinct types of a tenant's newest :limit events
SELECT DISTINCT type FROM (
    SELECT type FROM events WHERE tenant_id = :tenant ORDER BY id DESC LIMIT :limit) AS recent
ORDER BY type

-- tenant_subscription_patterns: the subscription patterns of a tenant's live destinations
SELECT DISTINCT pattern FROM destination_subscriptions WHERE tenant_id = :tenant
ORDER BY pattern

-- destination_job_counts: one destination's jobs in flight, pending and dead, and the oldest due pending job's run_at
-- (status <> 'pending' is jobs_status's own term: SQLite's planner takes that partial index
-- only when the query names it)
SELECT
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = :destination_id
        AND j.status = 'running' AND j.lease_until > :now) AS in_flight,
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = :destination_id
        AND j.status = 'pending') AS pending,
    (SELECT COUNT(*) FROM jobs j WHERE j.destination_id = :destination_id
        AND j.status = 'dead' AND j.status <> 'pending') AS dead,
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

-- ---- payload filters (shared/store/filter_tx.py) ----

-- tenant_metadata_one: one tenant's metadata (no row: no such tenant)
SELECT metadata FROM tenants WHERE id = :tenant

-- filter_test_events: a tenant's newest :limit events, newest first, with their bodies
SELECT id, message_id, type, source, body, forwarded_headers, received_at, body_purged_at
FROM events WHERE tenant_id = :tenant ORDER BY id DESC LIMIT :limit

-- operational events (shared/store/notify_tx.py) ------------------------------------------

-- set_notified_state: record what subscribers were told about a destination, if it still is
-- :expected (0 rows: another transaction announced the change first)
UPDATE destinations SET notified_state = :state
WHERE id = :destination_id AND notified_state = :expected

-- dead_letters_noticed: a hookline.dead_letters.growing covers the destination's :unnoticed
-- new dead letters (0 rows: another transaction noticed them first)
UPDATE destinations SET dead_letters_unnoticed = 0, dead_letters_noticed_at = :now
WHERE id = :destination_id AND dead_letters_unnoticed = :unnoticed

-- (catalogue: the event-type catalogue, migration 015)

-- catalogue_revision: the catalogue's change counter (one row)
SELECT revision FROM catalogue_state WHERE id = 1

-- bump_catalogue_revision: count one change of the catalogue
UPDATE catalogue_state SET revision = revision + 1 WHERE id = 1 RETURNING revision

-- list_event_types: every catalogue type, by name
SELECT * FROM event_types ORDER BY name

-- list_event_type_schemas: every schema version of every type, by type and version
SELECT * FROM event_type_schemas ORDER BY event_type, version

-- get_event_type: one catalogue type by name
SELECT * FROM event_types WHERE name = :name

-- get_event_type_schemas: one type's schema versions, in version order
SELECT * FROM event_type_schemas WHERE event_type = :name ORDER BY version

-- put_event_type: create a catalogue type or replace its fields (created_at kept)
INSERT INTO event_types (name, description, validation, deprecated, archived, created_at,
    updated_at)
VALUES (:name, :description, :validation, :deprecated, :archived, :now, :now)
ON CONFLICT (name) DO UPDATE SET description = excluded.description,
    validation = excluded.validation, deprecated = excluded.deprecated,
    archived = excluded.archived, updated_at = excluded.updated_at
RETURNING *

-- delete_event_type_schemas: forget one type's schema versions (before writing them anew)
DELETE FROM event_type_schemas WHERE event_type = :name

-- insert_event_type_schema: one schema version of a type
INSERT INTO event_type_schemas (event_type, version, schema, example)
VALUES (:name, :version, :schema, :example)

-- archive_event_type: set or clear a type's archived flag
UPDATE event_types SET archived = :archived, updated_at = :now WHERE name = :name RETURNING *

-- delete_event_type: remove a type and (by cascade) its schemas
DELETE FROM event_types WHERE name = :name

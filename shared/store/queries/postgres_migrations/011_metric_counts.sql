-- hookline schema, version 11: the figures /metrics shows, kept by the transactions that change
-- the rows (shared/store/metric_deltas.py), so a scrape reads this small table instead of
-- every job, attempt and event. Filled here once from the rows and the purged_* totals
-- (which it replaces); `hookline maintenance recount-metrics` fills the gauges again from the rows.
--
-- metric_counts(family, destination_id, label):
--   jobs      per destination and status (a gauge)
--   attempts  per destination and outcome class; finished ones only grow (retention deletes
--             rows, not their counts); in_flight is a gauge
--   latency   accept -> delivered seconds each time a job became done: n and the sum (total_s)
--             per bucket (label: its upper bound; not cumulative)
--   oldest    run_at of the destination's oldest pending job (total_s; NULL when none)
--   events    events stored (destination_id 0)
-- Destination id 0 holds the totals of jobs, attempts and latency over every destination.
CREATE TABLE metric_counts (
    family          text NOT NULL,
    destination_id  bigint NOT NULL,
    label           text NOT NULL,
    n               bigint NOT NULL DEFAULT 0,
    total_s         double precision,
    PRIMARY KEY (family, destination_id, label)
);

-- What each write transaction changed, appended (never updated: hosts writing at once wait on
-- no counter row); fold_metric_deltas moves them into metric_counts. A family `oldest` row
-- asks for its destination's oldest pending job to be read again.
CREATE TABLE metric_count_deltas (
    family          text NOT NULL,
    destination_id  bigint NOT NULL,
    label           text NOT NULL,
    n               bigint NOT NULL,
    total_s         double precision
);

INSERT INTO metric_counts (family, destination_id, label, n)
SELECT 'jobs', destination_id, status, count(*) FROM jobs GROUP BY destination_id, status;

INSERT INTO metric_counts (family, destination_id, label, n)
SELECT 'events', 0, '', count(*) FROM events;

INSERT INTO metric_counts (family, destination_id, label, n, total_s)
SELECT 'oldest', d.id, '', 0,
    (SELECT min(run_at) FROM jobs j WHERE j.destination_id = d.id AND j.status = 'pending')
FROM destinations d;

INSERT INTO metric_counts (family, destination_id, label, n)
SELECT 'attempts', destination_id, outcome, sum(n) FROM (
    SELECT j.destination_id, CASE
            WHEN a.error LIKE 'lease expired%' OR a.error LIKE 'worker lost%' THEN 'worker_lost'
            WHEN a.status_code BETWEEN 200 AND 299 THEN 'delivered'
            WHEN a.status_code IS NOT NULL THEN 'http_' || (a.status_code / 100)::text || 'xx'
            WHEN a.error LIKE 'handed back%' THEN 'handed_back'
            WHEN a.error IS NOT NULL THEN 'transport_error'
            ELSE 'in_flight'
        END AS outcome, 1 AS n
    FROM attempts a JOIN jobs j ON j.id = a.job_id
    UNION ALL
    SELECT destination_id, outcome, n FROM purged_attempts WHERE outcome <> 'in_flight'
) AS t GROUP BY destination_id, outcome;

INSERT INTO metric_counts (family, destination_id, label, n, total_s)
SELECT 'latency', destination_id, label, sum(n), sum(total_s) FROM (
    SELECT destination_id, CASE WHEN lat <= 0.05 THEN '0.05' WHEN lat <= 0.1 THEN '0.1' WHEN lat <= 0.25 THEN '0.25' WHEN lat <= 0.5 THEN '0.5' WHEN lat <= 1 THEN '1' WHEN lat <= 2.5 THEN '2.5' WHEN lat <= 5 THEN '5' WHEN lat <= 10 THEN '10' WHEN lat <= 30 THEN '30' WHEN lat <= 60 THEN '60' WHEN lat <= 300 THEN '300' WHEN lat <= 900 THEN '900' WHEN lat <= 3600 THEN '3600' WHEN lat <= 21600 THEN '21600' WHEN lat <= 86400 THEN '86400' ELSE '+Inf' END AS label, 1 AS n, lat AS total_s
    FROM (SELECT j.destination_id, j.finished_at - e.received_at AS lat
          FROM jobs j JOIN events e ON e.id = j.event_id WHERE j.status = 'done') AS done_jobs
    UNION ALL
    SELECT destination_id, '0.05', le_0_05, total FROM purged_latency
    UNION ALL
    SELECT destination_id, '0.1', le_0_1 - le_0_05, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '0.25', le_0_25 - le_0_1, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '0.5', le_0_5 - le_0_25, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '1', le_1 - le_0_5, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '2.5', le_2_5 - le_1, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '5', le_5 - le_2_5, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '10', le_10 - le_5, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '30', le_30 - le_10, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '60', le_60 - le_30, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '300', le_300 - le_60, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '900', le_900 - le_300, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '3600', le_3600 - le_900, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '21600', le_21600 - le_3600, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '86400', le_86400 - le_21600, 0 FROM purged_latency
    UNION ALL
    SELECT destination_id, '+Inf', n - le_86400, 0 FROM purged_latency
) AS t GROUP BY destination_id, label;

INSERT INTO metric_counts (family, destination_id, label, n, total_s)
SELECT family, 0, label, sum(n), sum(total_s) FROM metric_counts
WHERE family IN ('jobs', 'attempts', 'latency') GROUP BY family, label;

DROP TABLE purged_attempts;
DROP TABLE purged_latency;

-- hookline schema, version 21: SQLite's writers append their metric deltas, as PostgreSQL's
-- have since schema 11, and a fold adds them into metric_counts once per 1,024 rows.
--
-- Why: each write transaction used to add its deltas into metric_counts at once. With
-- thousands of destinations every event then dirtied a counter row on a leaf page of its
-- own (its destination's pending count, and its oldest pending job when that changed),
-- written to the WAL and fsynced with the commit: measured through HTTP with 10,000 paused
-- destinations, ingest reached 0.72 of its 10-destination events/s with those writes and
-- 1.04 without them. Appended rows go to the end of one table; a fold touches each counter
-- row once for thousands of deltas.
--
-- When a fold runs (the trigger below, in the writing transaction, so the figures stay
-- exact): when the log reaches 1,024 rows (its rowids restart at 1 after each fold), and
-- whenever a `fold` row is appended: `fold_metric_deltas` (before every read of the figures:
-- /metrics, stats, destination figures, the repair path, migrate-store, and ingest's
-- maintenance round). A fold's cost follows the distinct counter rows it touches: 4,096
-- rows took 3.5 ms over 10 destinations and 40 to 70 ms over 1,000 to 10,000 (a loaded
-- 2-core machine), so the log folds at 1,024, about 10 to 20 ms of the write lock at worst.
CREATE TABLE metric_count_deltas (
    id              INTEGER PRIMARY KEY,
    family          TEXT NOT NULL,
    destination_id  INTEGER NOT NULL,
    label           TEXT NOT NULL,
    n               INTEGER NOT NULL,
    total_s         REAL
);

CREATE TRIGGER metric_count_deltas_fold AFTER INSERT ON metric_count_deltas
WHEN NEW.family = 'fold' OR NEW.id % 1024 = 0
BEGIN
    -- counters and gauges: summed per row, added in key order
    INSERT INTO metric_counts (family, destination_id, label, n, total_s)
    SELECT family, destination_id, label, sum(n), sum(total_s) FROM metric_count_deltas
    WHERE family NOT IN ('oldest', 'fold')
    GROUP BY family, destination_id, label
    ORDER BY family, destination_id, label
    ON CONFLICT (family, destination_id, label) DO UPDATE SET
        n = n + excluded.n,
        total_s = coalesce(total_s, 0) + coalesce(excluded.total_s, 0);
    -- each destination whose pending jobs changed: its oldest pending run_at read anew (one
    -- jobs_due probe), the row left alone when that did not change
    INSERT INTO metric_counts (family, destination_id, label, n, total_s)
    SELECT 'oldest', x.destination_id, '', 0,
        (SELECT min(run_at) FROM jobs j
         WHERE j.destination_id = x.destination_id AND j.status = 'pending')
    FROM (SELECT DISTINCT destination_id FROM metric_count_deltas WHERE family = 'oldest') x
    ORDER BY x.destination_id
    ON CONFLICT (family, destination_id, label) DO UPDATE SET total_s = excluded.total_s
    WHERE total_s IS NOT excluded.total_s;
    DELETE FROM metric_count_deltas;
END;

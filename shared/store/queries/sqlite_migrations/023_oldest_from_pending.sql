-- hookline schema, version 23: a fold reads the oldest pending job anew for every destination
-- whose pending count changed, not only for those with an `oldest` row, so a writer leaves
-- that row out beside a `pending` count row (shared/store/metric_deltas.py, MetricDeltas.rows).
--
-- Why: with thousands of destinations each event's job was two log rows (its destination's
-- pending count and the request to read its oldest pending job again); now one. The fold
-- reads the same destinations as before. Rows written by earlier versions (with both) fold
-- the same way.
DROP TRIGGER metric_count_deltas_fold;

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
    -- each destination whose pending jobs changed (an `oldest` row, or its pending count: a
    -- `jobs` `pending` row; 0 is the totals): its oldest pending run_at read anew (one
    -- jobs_due probe), the row left alone when that did not change
    INSERT INTO metric_counts (family, destination_id, label, n, total_s)
    SELECT 'oldest', x.destination_id, '', 0,
        (SELECT min(run_at) FROM jobs j
         WHERE j.destination_id = x.destination_id AND j.status = 'pending')
    FROM (SELECT DISTINCT destination_id FROM metric_count_deltas
          WHERE family = 'oldest' OR (family = 'jobs' AND label = 'pending'
                                      AND destination_id <> 0)) x
    ORDER BY x.destination_id
    ON CONFLICT (family, destination_id, label) DO UPDATE SET total_s = excluded.total_s
    WHERE total_s IS NOT excluded.total_s;
    DELETE FROM metric_count_deltas;
END;

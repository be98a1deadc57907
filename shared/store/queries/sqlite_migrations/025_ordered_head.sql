-- hookline schema, version 25: an ordered destination's oldest unfinished job is the first
-- entry of an index of its own (jobs_ordered), so a claim reads one entry for it.
--
-- Why: since version 20, jobs_status holds no pending job (one index entry fewer for every
-- job ingest writes), and ordered_head read every pending job of the destination through
-- jobs_due and sorted them: 78 ms per claim with 333,333 pending (docs/benchmarks.md, the
-- backlog scenario), inside the claim's write transaction, so every writer waited while an
-- ordered destination held a backlog. jobs_ordered holds only the unfinished jobs of ordered
-- destinations: ingest writes no entry for the jobs of the others.
--
-- Each job carries its destination's `ordered` (jobs.ordered): set by a trigger when the job
-- is inserted (a lookup of the destination by id; about 0.7 µs per job in a throwaway
-- measurement), and for every unfinished job of a destination when its `ordered` changes, in
-- the same transaction. SQLite has one writer, so no job is inserted between the two. A
-- finished job keeps the mark it had (done and dead jobs are not in the index); the
-- statements that make one unfinished again (replay_job, resend_jobs) set it anew, rather
-- than a trigger on every change of status (measured in a throwaway script: 1.7 µs more
-- per job for its claim and finish, on the workers' path, for a rare operator action).
ALTER TABLE jobs ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET ordered = 1
WHERE status IN ('pending', 'running')
  AND destination_id IN (SELECT id FROM destinations WHERE ordered);
-- Entries are (destination_id, rowid): a destination's first is its lowest job id.
CREATE INDEX jobs_ordered ON jobs (destination_id)
WHERE ordered = 1 AND status IN ('pending', 'running');

-- (An INSERT's RETURNING shows the row before this trigger ran: insert_jobs returns no
-- `ordered`, and shared/store/sqlite_rows.py's ids from last_insert_rowid hold, as a trigger
-- that inserts nothing leaves it alone.)
CREATE TRIGGER jobs_ordered_insert AFTER INSERT ON jobs
WHEN (SELECT ordered FROM destinations WHERE id = NEW.destination_id)
BEGIN UPDATE jobs SET ordered = 1 WHERE id = NEW.id; END;

-- Two statements, so that each reads its own partial index (jobs_due, jobs_leased).
CREATE TRIGGER jobs_ordered_changed AFTER UPDATE OF ordered ON destinations
WHEN OLD.ordered IS NOT NEW.ordered
BEGIN
    UPDATE jobs SET ordered = CASE WHEN NEW.ordered THEN 1 ELSE 0 END
    WHERE destination_id = NEW.id AND status = 'pending';
    UPDATE jobs SET ordered = CASE WHEN NEW.ordered THEN 1 ELSE 0 END
    WHERE destination_id = NEW.id AND status = 'running';
END;

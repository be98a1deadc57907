-- hookline schema, version 26: PostgreSQL too finds an ordered destination's oldest unfinished
-- job in one index entry (jobs_ordered), as SQLite has since version 25.
--
-- Why: ordered_head read every pending job of the destination and sorted them on every claim
-- that considered it: 73-81 ms with 100,000 pending against 14-16 ms for a claim of an
-- unordered destination (docs/benchmarks.md), paid by every worker of every host reaching
-- it, while the claim held its window's destination locks.
--
-- Each job carries its destination's `ordered` (jobs.ordered): insert_jobs reads it from the
-- destination; a destination turning ordered marks its unfinished jobs in the same
-- transaction (mark_ordered_jobs; turning unordered leaves them, as only an ordered
-- destination's claim reads them); replay_job and resend_jobs set it anew. READ COMMITTED
-- would let a job written while `ordered` changes miss both its new value and the marking:
-- the two are kept apart by an advisory lock that writers of jobs take shared and the change
-- takes alone (shared/store/ops.py, OrderedMarks). A job of an
-- unordered destination writes no entry into jobs_ordered, so ingest and the workers pay
-- nothing for it there (an index of every unfinished job, tried, cost 20-30 % of the
-- deliveries per second: docs/benchmarks.md).
--
-- A new column with a constant default rewrites nothing, but its CHECK, the marking and the
-- index each read the jobs table, with writes to it held meanwhile (about 1.2 s for 300,000
-- jobs on the 2-core test machine).
ALTER TABLE jobs ADD COLUMN ordered integer NOT NULL DEFAULT 0 CHECK (ordered IN (0, 1));
UPDATE jobs SET ordered = 1
WHERE status IN ('pending', 'running')
  AND destination_id IN (SELECT id FROM destinations WHERE ordered = 1);
CREATE INDEX jobs_ordered ON jobs (destination_id, id)
WHERE ordered = 1 AND status IN ('pending', 'running');

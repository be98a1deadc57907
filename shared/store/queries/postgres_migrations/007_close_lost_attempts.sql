-- hookline schema, version 7: close the attempt rows older versions left in flight forever
-- (a job made dead "worker lost" at the attempt cap kept its last attempt open). An open
-- attempt whose job no longer holds its lease token was lost; it gets the job's error and
-- the time from its start to the job's end (or last change).
UPDATE attempts SET error = 'worker lost (lease expired on the final attempt)',
    duration_s = GREATEST(coalesce(j.finished_at, j.updated_at) - attempts.started_at, 0)
FROM jobs AS j
WHERE j.id = attempts.job_id AND attempts.duration_s IS NULL AND attempts.error IS NULL
    AND (j.lease_token IS NULL OR j.lease_token <> attempts.lease_token);

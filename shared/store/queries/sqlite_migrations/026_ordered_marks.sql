-- hookline schema, version 26: a destination turning ordered marks its unfinished jobs by a
-- statement of the change's own transaction (mark_ordered_jobs, the same on both backends
-- since PostgreSQL's version 26 gave it jobs_ordered too), no longer by this trigger of
-- version 25. Turning unordered now unmarks nothing, so it changes the destination's row
-- only, whatever the backlog: only an ordered destination's claim reads the marks, and one
-- turning ordered again marks only its jobs still unmarked.
DROP TRIGGER jobs_ordered_changed;

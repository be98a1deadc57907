-- hookline schema, version 10: what retention purged, per destination, so the attempt counts
-- and the latency histogram in /metrics never go down when old rows are deleted. The purge
-- adds to these in the same transaction that deletes the rows.
CREATE TABLE purged_attempts (
    destination_id bigint NOT NULL,
    outcome        text NOT NULL,
    n              bigint NOT NULL,
    PRIMARY KEY (destination_id, outcome)
);

CREATE TABLE purged_latency (
    destination_id bigint NOT NULL PRIMARY KEY,
    n         bigint NOT NULL,
    total     double precision NOT NULL,
    le_0_05   bigint NOT NULL,
    le_0_1    bigint NOT NULL,
    le_0_25   bigint NOT NULL,
    le_0_5    bigint NOT NULL,
    le_1      bigint NOT NULL,
    le_2_5    bigint NOT NULL,
    le_5      bigint NOT NULL,
    le_10     bigint NOT NULL,
    le_30     bigint NOT NULL,
    le_60     bigint NOT NULL,
    le_300    bigint NOT NULL,
    le_900    bigint NOT NULL,
    le_3600   bigint NOT NULL,
    le_21600  bigint NOT NULL,
    le_86400  bigint NOT NULL
);

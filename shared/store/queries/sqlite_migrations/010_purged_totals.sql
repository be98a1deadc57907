-- hookline schema, version 10: what retention purged, per destination, so the attempt counts
-- and the latency histogram in /metrics never go down when old rows are deleted. The purge
-- adds to these in the same transaction that deletes the rows.
CREATE TABLE purged_attempts (
    destination_id INTEGER NOT NULL,
    outcome        TEXT NOT NULL,
    n              INTEGER NOT NULL,
    PRIMARY KEY (destination_id, outcome)
);

CREATE TABLE purged_latency (
    destination_id INTEGER NOT NULL PRIMARY KEY,
    n         INTEGER NOT NULL,
    total     REAL NOT NULL,
    le_0_05   INTEGER NOT NULL,
    le_0_1    INTEGER NOT NULL,
    le_0_25   INTEGER NOT NULL,
    le_0_5    INTEGER NOT NULL,
    le_1      INTEGER NOT NULL,
    le_2_5    INTEGER NOT NULL,
    le_5      INTEGER NOT NULL,
    le_10     INTEGER NOT NULL,
    le_30     INTEGER NOT NULL,
    le_60     INTEGER NOT NULL,
    le_300    INTEGER NOT NULL,
    le_900    INTEGER NOT NULL,
    le_3600   INTEGER NOT NULL,
    le_21600  INTEGER NOT NULL,
    le_86400  INTEGER NOT NULL
);

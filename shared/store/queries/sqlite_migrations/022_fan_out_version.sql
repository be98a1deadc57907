-- hookline schema, version 22: a version of everything ingest's fan-out reads, so ingest can
-- remember it between transactions (shared/store/fan_out_view.py).
--
-- Why: fan-out read the subscription index, each reached destination's payload filter and
-- the publishing tenants' states with one statement per batch. With 10,000 destinations that
-- statement alone cost ingest's database thread about 24 µs of CPU per event (8 µs with 10
-- destinations), because the keys it looks up lie on pages that the jobs and events written
-- in between push out of the cache. Now each transaction reads this one row, and the index
-- only for what the process has not seen at that version.
--
-- Every change that can alter what a process remembers sets `version` to a new random value,
-- inside the changing transaction: a subscription added or removed (destination created,
-- edited, removed; destination_subscriptions is kept in step by triggers of its own), a
-- filter changed, a tenant removed, disabled or enabled. Not a tenant's creation: a process
-- remembers only tenants that exist, so ingest creating tenants on first use never writes
-- this row. Random rather than counted, so a database restored or copied under a running
-- process never repeats a version that process remembers with other contents.
CREATE TABLE fan_out_version (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    version  INTEGER NOT NULL
);
INSERT INTO fan_out_version (id, version) VALUES (1, random());

CREATE TRIGGER fan_out_version_subscription_added AFTER INSERT ON destination_subscriptions
BEGIN UPDATE fan_out_version SET version = random(); END;
CREATE TRIGGER fan_out_version_subscription_removed AFTER DELETE ON destination_subscriptions
BEGIN UPDATE fan_out_version SET version = random(); END;
CREATE TRIGGER fan_out_version_subscription_changed AFTER UPDATE ON destination_subscriptions
BEGIN UPDATE fan_out_version SET version = random(); END;
CREATE TRIGGER fan_out_version_filter AFTER UPDATE OF filter ON destinations
WHEN OLD.filter IS NOT NEW.filter
BEGIN UPDATE fan_out_version SET version = random(); END;
CREATE TRIGGER fan_out_version_tenant_removed AFTER DELETE ON tenants
BEGIN UPDATE fan_out_version SET version = random(); END;
CREATE TRIGGER fan_out_version_tenant_state AFTER UPDATE OF disabled ON tenants
WHEN OLD.disabled IS NOT NEW.disabled
BEGIN UPDATE fan_out_version SET version = random(); END;

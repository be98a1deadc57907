-- hookline schema, version 22: a version of everything ingest's fan-out reads, so ingest can
-- remember it between transactions (shared/store/fan_out_view.py; the SQLite migration of the
-- same number says why). Every change that can alter what a process remembers sets `version`
-- to a new random value inside the changing transaction: a subscription added or removed, a
-- filter changed, a tenant removed, disabled or enabled (not a tenant's creation: only
-- tenants that exist are remembered, so ingest creating tenants never waits on this row).
-- Ingest reads the row in its own transaction, so a change committed before it is honoured
-- on every host.
CREATE TABLE fan_out_version (
    id       integer PRIMARY KEY CHECK (id = 1),
    version  bigint NOT NULL
);

CREATE FUNCTION hookline_fan_out_version() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT (random() * 9.2e18 - 4.6e18)::bigint
$$;
INSERT INTO fan_out_version (id, version) VALUES (1, hookline_fan_out_version());

CREATE FUNCTION hookline_bump_fan_out_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fan_out_version SET version = hookline_fan_out_version();
    RETURN NULL;
END $$;

-- Row triggers (a statement trigger would also fire for statements that change no row), and
-- one per statement for TRUNCATE.
CREATE TRIGGER fan_out_version_subscriptions
AFTER INSERT OR UPDATE OR DELETE ON destination_subscriptions
FOR EACH ROW EXECUTE FUNCTION hookline_bump_fan_out_version();
CREATE TRIGGER fan_out_version_subscriptions_truncated
AFTER TRUNCATE ON destination_subscriptions
FOR EACH STATEMENT EXECUTE FUNCTION hookline_bump_fan_out_version();
CREATE TRIGGER fan_out_version_filter AFTER UPDATE OF filter ON destinations
FOR EACH ROW WHEN (OLD.filter IS DISTINCT FROM NEW.filter)
EXECUTE FUNCTION hookline_bump_fan_out_version();
CREATE TRIGGER fan_out_version_tenants AFTER DELETE ON tenants
FOR EACH ROW EXECUTE FUNCTION hookline_bump_fan_out_version();
CREATE TRIGGER fan_out_version_tenant_state AFTER UPDATE OF disabled ON tenants
FOR EACH ROW WHEN (OLD.disabled IS DISTINCT FROM NEW.disabled)
EXECUTE FUNCTION hookline_bump_fan_out_version();
CREATE TRIGGER fan_out_version_tenants_truncated AFTER TRUNCATE ON tenants
FOR EACH STATEMENT EXECUTE FUNCTION hookline_bump_fan_out_version();

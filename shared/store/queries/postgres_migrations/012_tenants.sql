-- Tenants (mirrors sqlite_migrations/012_tenants.sql): every destination belongs to one, an
-- event is published for one and its idempotency key becomes (tenant, source, source event
-- id). Databases made before tenants keep working unchanged in the reserved tenant `_default`.
CREATE TABLE tenants (
    id                text PRIMARY KEY,
    name              text NOT NULL DEFAULT '',
    metadata          text NOT NULL DEFAULT '{}',
    max_destinations  integer CHECK (max_destinations IS NULL OR max_destinations >= 0),
    disabled          boolean NOT NULL DEFAULT false,
    token_epoch       bigint NOT NULL DEFAULT 0,  -- random; a new value revokes every token
    created_at        double precision NOT NULL,
    updated_at        double precision NOT NULL
);
INSERT INTO tenants (id, name, created_at, updated_at)
VALUES ('_default', 'default', extract(epoch FROM clock_timestamp()),
        extract(epoch FROM clock_timestamp()));

-- no foreign key: deleting a tenant keeps its removed destinations for their jobs' history
ALTER TABLE destinations ADD COLUMN tenant_id text NOT NULL DEFAULT '_default';
ALTER TABLE destinations DROP CONSTRAINT destinations_name_key;
ALTER TABLE destinations ADD CONSTRAINT destinations_tenant_name_key UNIQUE (tenant_id, name);
CREATE INDEX destinations_tenant ON destinations (tenant_id, id) WHERE deleted_at IS NULL;

ALTER TABLE events ADD COLUMN tenant_id text NOT NULL DEFAULT '_default';
ALTER TABLE events ADD CONSTRAINT events_tenant_source_event_key
    UNIQUE (tenant_id, source, source_event_id);
ALTER TABLE events DROP CONSTRAINT events_source_source_event_id_key;
CREATE INDEX events_tenant ON events (tenant_id, id);

-- The subscription index (see the SQLite migration): kept in step by a trigger.
CREATE TABLE destination_subscriptions (
    tenant_id       text NOT NULL,
    pattern         text NOT NULL,
    destination_id  bigint NOT NULL,
    PRIMARY KEY (tenant_id, pattern, destination_id)
);
INSERT INTO destination_subscriptions (tenant_id, pattern, destination_id)
SELECT DISTINCT d.tenant_id, p.pattern, d.id
FROM destinations d, json_array_elements_text(d.event_types::json) AS p (pattern)
WHERE d.deleted_at IS NULL;

CREATE FUNCTION hookline_sync_subscriptions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM destination_subscriptions
        WHERE tenant_id = OLD.tenant_id AND destination_id = OLD.id
          AND pattern IN (SELECT json_array_elements_text(OLD.event_types::json));
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.deleted_at IS NULL THEN
        INSERT INTO destination_subscriptions (tenant_id, pattern, destination_id)
        SELECT DISTINCT NEW.tenant_id, p.pattern, NEW.id
        FROM json_array_elements_text(NEW.event_types::json) AS p (pattern)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER destination_subscriptions_sync
AFTER INSERT OR DELETE OR UPDATE OF event_types, deleted_at, tenant_id ON destinations
FOR EACH ROW EXECUTE FUNCTION hookline_sync_subscriptions();

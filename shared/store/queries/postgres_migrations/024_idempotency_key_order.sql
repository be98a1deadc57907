-- hookline schema, version 24: the idempotency key's index in the order (source, source event
-- id, tenant) instead of (tenant, source, source event id); same key, same meaning (ON
-- CONFLICT names the columns, in any order). With events for many tenants, the tenant first
-- put each event's entry on a leaf page of its own; event ids that follow time now land side
-- by side whatever the tenant (the SQLite migration of the same number has the figures).
ALTER TABLE events ADD CONSTRAINT events_source_event_tenant_key
    UNIQUE (source, source_event_id, tenant_id);
ALTER TABLE events DROP CONSTRAINT events_tenant_source_event_key;

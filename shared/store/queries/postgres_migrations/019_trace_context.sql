-- hookline schema, version 19: tracing (OPERATIONS.md, "Tracing"). events.trace_context: the
-- W3C trace context of the ingest request's span (its `traceparent`, then a newline and the
-- `tracestate` when there is one), so every delivery attempt, in any worker and however much
-- later, is a span of the same trace; NULL for events stored while tracing was off.
-- destinations.propagate_trace: send the attempt span's `traceparent` with each request.
-- Mirrors sqlite_migrations/019_trace_context.sql.
ALTER TABLE events ADD COLUMN trace_context text;
ALTER TABLE destinations ADD COLUMN propagate_trace integer NOT NULL DEFAULT 0
    CHECK (propagate_trace IN (0, 1));

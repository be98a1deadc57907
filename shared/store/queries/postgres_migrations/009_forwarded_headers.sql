-- hookline schema, version 9: the headers a source event carries onward to every destination
-- (its origin and the provider's identifying headers, see ingest/source_verify.py
-- FORWARDED_HEADERS), a JSON object of name -> value, at most about 1 KiB; NULL for events
-- posted to /v1/events.
ALTER TABLE events ADD COLUMN forwarded_headers text;

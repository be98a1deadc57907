"""The ingest process: `POST /v1/events` over aiohttp, validated, group-committed to the store."""

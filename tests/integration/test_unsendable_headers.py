"""A stored header value (CR/LF) or URL (a port past 65535) that cannot be sent fails its job
permanently on the first attempt, with an error naming what is wrong, through the real worker
loop and a real database (each backend in turn). The admin API refuses such values, so the
tests write one directly into the database, as an older database could hold it."""

from __future__ import annotations

import json
import sqlite3

from hookline.rehearsal.receiver import Endpoint, Receiver
from hookline.shared.policy.delivery import unsendable_header
from hookline.shared.signing import generate_secret
from tests.conftest import is_postgres, new_event, query_db
from tests.integration.test_worker import running_worker, settle

BAD_HEADERS = {"X-Tenant": "acme\r\nX-Injected: yes"}


async def _write_headers(url: str, name: str, headers: dict[str, str]) -> None:
    """Set a destination's stored headers behind the store's back (no validation)."""
    if is_postgres(url):
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            await conn.execute("UPDATE destinations SET headers = $1 WHERE name = $2",
                               json.dumps(headers), name)
        finally:
            await conn.close()
        return
    with sqlite3.connect(url) as db:
        db.execute("UPDATE destinations SET headers = ? WHERE name = ?",
                   (json.dumps(headers), name))


async def test_header_with_cr_lf_fails_the_job_permanently(real_store, store_url):
    """The job is dead after ONE attempt (not retried to the cap), its error names the
    header, and nothing reached the receiver. Before, the send raised a bare ValueError that
    was retried max_attempts times."""
    secret = generate_secret()
    async with Receiver([Endpoint("ep", secret)]) as receiver:
        await real_store.add_destination(name="ep", url=receiver.url("ep"), secret=secret,
                                         event_types=["*"], max_in_flight=10,
                                         headers={"X-Tenant": "acme"})
        await _write_headers(store_url, "ep", BAD_HEADERS)
        async with running_worker(real_store):
            await real_store.add_events([new_event("e1")])
            counts = await settle(real_store)
        assert counts["dead"] == 1
        [job] = await real_store.list_jobs()
        assert job.attempts == 1
        assert "X-Tenant" in job.last_error and "CR" in job.last_error
        assert "(permanent)" in job.last_error
        assert receiver.requests == []
        [attempt] = await query_db(store_url, "SELECT error FROM attempts")
        assert attempt["error"].startswith("UnsendableHeader: header 'X-Tenant'")


def test_unsendable_header_names_the_header():
    """Pure check: CR, LF, other controls and bad names are named; tab and printable pass."""
    assert unsendable_header([("X-A", "ok\tvalue"), ("X-B", "printable !~")]) is None
    assert "'X-A'" in (unsendable_header([("X-A", "a\rb")]) or "")
    assert "LF" in (unsendable_header([("X-A", "a\nb")]) or "")
    assert "control character" in (unsendable_header([("X-A", "a\x00b")]) or "")
    assert "not a valid HTTP header name" in (unsendable_header([("X A", "v")]) or "")


async def _write_url(url: str, name: str, destination_url: str) -> None:
    """Set a destination's stored URL behind the store's back (no validation)."""
    if is_postgres(url):
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            await conn.execute("UPDATE destinations SET url = $1 WHERE name = $2",
                               destination_url, name)
        finally:
            await conn.close()
        return
    with sqlite3.connect(url) as db:
        db.execute("UPDATE destinations SET url = ? WHERE name = ?", (destination_url, name))


async def test_a_stored_url_that_can_never_be_sent_fails_the_job_permanently(
        real_store, store_url):
    """A URL stored before the URL rule (a port past 65535 here) fails its job on the first
    attempt, the error naming the port, instead of being retried for days."""
    secret = generate_secret()
    async with Receiver([Endpoint("ep", secret)]) as receiver:
        await real_store.add_destination(name="ep", url=receiver.url("ep"), secret=secret,
                                         event_types=["*"], max_in_flight=10)
        await _write_url(store_url, "ep", "http://127.0.0.1:99999/ep")
        async with running_worker(real_store):
            await real_store.add_events([new_event("e1")])
            counts = await settle(real_store)
        assert counts["dead"] == 1
        [job] = await real_store.list_jobs()
        assert job.attempts == 1 and "(permanent)" in job.last_error
        [attempt] = await query_db(store_url, "SELECT error FROM attempts")
        assert attempt["error"].startswith("UnsendableUrl: url port must be a number")
        assert receiver.requests == []


async def test_a_stored_url_holding_a_space_is_still_delivered(real_store, store_url):
    """A space is refused in new URLs, but one stored before the rule is sendable (the
    client percent-encodes it): its job is delivered, not failed as unsendable."""
    secret = generate_secret()
    async with Receiver([Endpoint("ep", secret)]) as receiver:
        await real_store.add_destination(name="ep", url=receiver.url("ep"), secret=secret,
                                         event_types=["*"], max_in_flight=10)
        await _write_url(store_url, "ep", receiver.url("ep") + "?team=a b")
        async with running_worker(real_store):
            await real_store.add_events([new_event("e1")])
            counts = await settle(real_store)
        assert counts["done"] == 1, counts
        assert len(receiver.requests) == 1

"""A whole-table read (/metrics, stats) runs on its own connection: while it is busy, events
are still accepted and committed (SQLite; the real ingest app on 127.0.0.1, a real file)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import opened_store

ADMIN, INGEST = "admin-t0ken-for-tests", "ingest-t0ken-for-tests"


async def test_events_are_accepted_while_a_metrics_scrape_is_reading(tmp_path: Path) -> None:
    """The reading connection's thread is held (as by a long scan of a big database) while a
    scrape waits on it: an event posted meanwhile is answered 202 before the scrape ends, so
    the scrape's reads never queue ahead of the group commit. With one connection for both,
    the event would wait behind the scrape."""
    db = str(tmp_path / "hookline.db")
    release = threading.Event()
    async with opened_store(db) as store, opened_store(db) as reader:
        assert isinstance(reader, SqliteStore)
        config = Config(db=db, admin_token=ADMIN, ingest_token=INGEST)
        app = build_app(store, config, read_store=reader)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            held = asyncio.create_task(reader._run(lambda _db: release.wait(30)))
            scrape = asyncio.create_task(client.get(
                "/metrics", headers={"Authorization": f"Bearer {ADMIN}"}))
            await asyncio.sleep(0.2)  # the scrape is now queued behind the held thread
            body = json.dumps({"id": "evt_1", "type": "t.x", "data": {}})
            async with client.post("/v1/events", data=body, headers={
                    "Authorization": f"Bearer {INGEST}",
                    "Content-Type": "application/json"}) as answer:
                assert answer.status == 202, await answer.text()
            assert not scrape.done(), "the scrape should still be waiting on the reader"
            release.set()
            assert await held
            response = await scrape
            assert response.status == 200
            assert "hookline_events_stored 1.0" in await response.text()

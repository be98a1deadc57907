"""Both POST routes (`/v1/events` and `/v1/sources/{name}`) end in the same accept step: the
same 202 / 200-duplicate answers, and the same 503 `store_busy` with Retry-After while the
database's write lock is held elsewhere. Real SQLite file, real sockets on 127.0.0.1."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore

INGEST_TOKEN = "ingest-token-for-tests"
SOURCE_TOKEN = "source-token-for-tests-0123456789"
CONFIG = Config(ingest_token=INGEST_TOKEN)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[tuple[str, SqliteStore]]:
    path = str(tmp_path / "hookline.db")
    store = SqliteStore(path, busy_timeout_s=0.2)  # a held lock is StoreBusy within 0.2 s
    await store.open()
    await store.add_destination(name="app", url="http://127.0.0.1:9/app",
                                secret=generate_secret(), event_types=["*"], max_in_flight=4)
    await store.add_source(name="shop", scheme="token", secret=SOURCE_TOKEN)
    yield path, store
    await store.close()


@pytest.fixture
async def client(db: tuple[str, SqliteStore]) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(build_app(db[1], CONFIG), host="127.0.0.1")) as c:
        yield c


@contextmanager
def write_lock_held(path: str) -> Iterator[None]:
    """Another connection holds the SQLite write lock for the block (as a long transaction
    of another process would)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


async def post_both(client: TestClient[Any, Any], event_id: str) -> list[tuple[int, Any, Any]]:
    """The same event through each route: (status, JSON body, Retry-After) per route."""
    body = json.dumps({"id": event_id, "type": "order.paid", "data": {}}).encode()
    answers = []
    for path, token in (("/v1/events", INGEST_TOKEN), ("/v1/sources/shop", SOURCE_TOKEN)):
        response = await client.post(path, data=body, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        answers.append((response.status, await response.json(),
                        response.headers.get("Retry-After")))
    return answers


async def test_both_routes_answer_alike_busy_accepted_and_duplicate(
        client: TestClient[Any, Any], db: tuple[str, SqliteStore]) -> None:
    with write_lock_held(db[0]):
        busy = await post_both(client, "e1")
    for status, body, retry_after in busy:
        assert (status, body["error"], retry_after) == (503, "store_busy", "1")
        assert body["detail"] == "the database is busy; retry shortly"

    accepted = await post_both(client, "e1")
    assert [(status, set(body), body["jobs"]) for status, body, _ in accepted] == [
        (202, {"event_id", "message_id", "jobs"}, 1)] * 2

    repeated = await post_both(client, "e1")
    for (status, body, _), (_, first, _) in zip(repeated, accepted, strict=True):
        assert status == 200
        assert body == {"event_id": first["event_id"], "message_id": first["message_id"],
                        "jobs": 0, "duplicate": True}

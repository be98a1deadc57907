"""Signals that must not lie, through the real ingest app on 127.0.0.1 and a real database:
attempts in flight are a gauge beside a counter that only grows, and a SQLite WAL kept from
being reset by another process's read transaction shows in /metrics and makes /healthz say
degraded, naming the processes that hold the database, until the reader ends."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from hookline.ingest.app import build_app
from hookline.ingest.maintenance import run_maintenance
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Done
from hookline.shared.signing import generate_secret
from hookline.shared.store import SqliteOptions, Store, open_store
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import is_postgres, new_event

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMIT_BYTES = 2 * 1024 * 1024  # small, so the test reaches it in a second or two
READER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN")
db.execute("SELECT count(*) FROM events").fetchone()  # the snapshot is held from here
print("reading", flush=True)
sys.stdin.readline()  # until the test closes stdin
db.execute("COMMIT")
"""


async def scrape(client: TestClient[Any, Any]) -> dict[str, Any]:
    """{metric name: (type, {labels tuple: value})} of one /metrics answer."""
    async with client.get("/metrics", headers=AUTH) as resp:
        assert resp.status == 200
        text = await resp.text()
    return {f.name: (f.type, {tuple(sorted(s.labels.items())): s.value for s in f.samples})
            for f in text_string_to_metric_families(text)}


async def test_in_flight_attempts_are_a_gauge_and_the_counter_only_counts_finished(
        real_store: Store, store_url: str) -> None:
    """Two claimed attempts: the in-flight gauge says 2 and the counter has no in_flight
    sample; one finishes: gauge 1, counter delivered 1. The WAL gauge exists on SQLite only."""
    await real_store.add_destination(name="d", url="http://127.0.0.1:9/h",
                                     secret=generate_secret(), event_types=("*",),
                                     max_in_flight=5)
    await real_store.add_events([new_event("e1"), new_event("e2")])
    claims = await real_store.claim("w1", 2, lease_s=30, max_attempts=5)
    app = build_app(real_store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        metrics = await scrape(client)
        assert metrics["hookline_attempts_in_flight"] == ("gauge", {(): 2.0})
        type_, samples = metrics["hookline_attempts"]
        assert type_ == "counter" and set(samples.values()) == {0.0}
        assert not [labels for labels in samples if ("outcome", "in_flight") in labels]
        await real_store.finish([(claims[0], Done(), AttemptResult(
            started_at=time.time(), duration_s=0.01, status_code=200))])
        metrics = await scrape(client)
        assert metrics["hookline_attempts_in_flight"] == ("gauge", {(): 1.0})
        type_, samples = metrics["hookline_attempts"]
        assert type_ == "counter"
        assert {labels: n for labels, n in samples.items() if n} \
            == {(("destination", "d"), ("outcome", "delivered")): 1.0}
        assert not [labels for labels in samples if ("outcome", "in_flight") in labels]
        if is_postgres(store_url):
            assert "hookline_sqlite_wal_bytes" not in metrics
        else:
            assert metrics["hookline_sqlite_wal_bytes"][0] == "gauge"


@pytest.fixture
async def sqlite_store(store_url: str) -> AsyncIterator[SqliteStore]:
    """The SQLite store of `store_url`, its health degraded past LIMIT_BYTES of WAL."""
    store = open_store(store_url, SqliteOptions(wal_degraded_bytes=LIMIT_BYTES))
    assert isinstance(store, SqliteStore)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def healthz(client: TestClient[Any, Any]) -> dict[str, Any]:
    async with client.get("/healthz") as resp:
        assert resp.status == 200  # degraded or not, the process is up
        body: dict[str, Any] = await resp.json()
        return body


async def wait_for_status(client: TestClient[Any, Any], status: str,
                          timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        body = await healthz(client)
        if body["status"] == status or time.monotonic() > deadline:
            return body
        await asyncio.sleep(0.05)


@pytest.mark.sqlite_only
async def test_a_held_read_degrades_healthz_naming_the_reader_until_it_ends(
        sqlite_store: SqliteStore) -> None:
    """Another process holds a read transaction while events go in through the store: the
    WAL passes the limit, /metrics shows its size, /healthz says degraded (still 200) with a
    busy checkpoint and the reader's pid and command line among the holders, and the warning
    is logged. Once the reader ends, a checkpoint empties the file and /healthz is ok."""
    config = Config(admin_token=TOKEN, allow_networks="127.0.0.0/8",
                    wal_degraded_bytes=LIMIT_BYTES, maintenance_interval_s=2.0)
    real_store = sqlite_store
    await real_store.add_destination(name="d", url="http://127.0.0.1:9/h",
                                      secret=generate_secret(), event_types=("*",),
                                      max_in_flight=10)
    reader = await asyncio.create_subprocess_exec(
        sys.executable, "-c", READER, real_store.path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    stop = asyncio.Event()
    app = build_app(real_store, config)
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert (await asyncio.wait_for(reader.stdout.readline(), 30)).strip() == b"reading"
        with capture_logs() as logs:
            housekeeping = asyncio.create_task(
                run_maintenance(real_store, config.maintenance_interval_s, stop))
            async with TestClient(TestServer(app, host="127.0.0.1")) as client:
                assert (await healthz(client))["status"] == "ok"
                body = b'{"pad": "%s"}' % (b"x" * 2000)
                n = 0
                while ((await real_store.health()).wal_bytes or 0) <= LIMIT_BYTES:
                    await real_store.add_events([new_event(f"e{n + i}", body=body)
                                                 for i in range(50)])
                    n += 50
                passed_at = time.monotonic()
                degraded = await wait_for_status(client, "degraded", 60)
                seconds_to_degraded = time.monotonic() - passed_at
                metrics = await scrape(client)

                assert degraded["status"] == "degraded", degraded
                check = degraded["checks"]["wal"]
                assert check["wal_bytes"] > LIMIT_BYTES and check["limit_bytes"] == LIMIT_BYTES
                assert check["checkpoint"]["busy"] is True
                assert check["checkpoint"]["frames_not_checkpointed"] > 0
                holders = {h["pid"]: h for h in check["holders"]}
                assert reader.pid in holders, check["holders"]
                assert "SELECT count(*) FROM events" in holders[reader.pid]["cmdline"]
                assert real_store.path + "-wal" in holders[reader.pid]["files"]
                assert "wal_degraded_bytes" in degraded["detail"]
                [(type_, samples)] = [metrics["hookline_sqlite_wal_bytes"]]
                assert type_ == "gauge" and samples[()] > LIMIT_BYTES
                print(f"\nWAL {check['wal_bytes_at_check']} bytes at check after {n} events; "
                      f"degraded {seconds_to_degraded:.2f} s after passing the limit")

                reader.stdin.close()
                assert await asyncio.wait_for(reader.wait(), 30) == 0
                healthy = await wait_for_status(client, "ok", 60)
                assert healthy["status"] == "ok", healthy
                assert healthy["checks"]["wal"]["wal_bytes"] == 0
                assert (await scrape(client))["hookline_sqlite_wal_bytes"][1][()] == 0
        warnings = [e for e in logs if e["event"] == "wal_over_limit"]
        assert warnings and any(h["pid"] == reader.pid for h in warnings[0]["holders"])
        assert any(e["event"] == "wal_back_under_limit" for e in logs)
    finally:
        stop.set()
        if reader.returncode is None:
            reader.kill()
            await reader.wait()
    await housekeeping

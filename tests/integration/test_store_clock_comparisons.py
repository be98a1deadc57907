"""Every comparison with a stored instant counts from the store's clock, not the wall clock:
retention, purge, dead-letter listings and `since`/`until` filters, through the ingest's
retention loop, the admin API (real ingest app on 127.0.0.1) and the CLI, on a real database.

The store's clock here is an hour behind the wall clock, as it is after the wall clock was
stepped +1 h while `hookline serve` runs (shared/store/clock.py): rows written a minute ago
by the store are a minute old, although the wall clock calls them an hour old. Retention ages
of 30 min and a `since` of 10 min must then keep and list them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.ingest.maintenance import run_retention
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead, Done
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store, resolve_instants
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.timeparse import parse_instant_spec
from hookline.supervisor.cli.main import main as hookline_main
from tests.conftest import FakeClock, new_event

HOUR_S = 3600.0
HALF_HOUR_S = 1800.0
TOKEN = "t0ken-for-clock-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def clock() -> FakeClock:
    """The store's clock (the `store` fixture reads it): one hour behind the wall clock."""
    return FakeClock(time.time() - HOUR_S)


async def _one_done_one_dead(store: Store, clock: FakeClock) -> None:
    """Destination `d`, two events; one job delivered, the other dead; a minute passes."""
    await store.add_destination(name="d", url="http://127.0.0.1:9/d", secret=generate_secret(),
                                event_types=["*"], max_in_flight=5)
    await store.add_events([new_event("delivered"), new_event("refused")])
    claims = await store.claim("w", 2, lease_s=30, max_attempts=3)
    ok = AttemptResult(started_at=time.time(), duration_s=0.01, status_code=200)
    gone = AttemptResult(started_at=time.time(), duration_s=0.01, status_code=410)
    done, dead = sorted(claims, key=lambda c: c.event_id)
    await store.finish([(done, Done(), ok), (dead, Dead(error="HTTP 410"), gone)])
    clock.advance(60)


async def _retention_round(store: Store) -> None:
    """Run the ingest's retention loop (30 min ages) for a few rounds."""
    config = Config(retention_interval_s=0.05, retention_bodies_s=HALF_HOUR_S,
                    retention_metadata_s=HALF_HOUR_S, retention_dedupe_s=HALF_HOUR_S)
    stop = asyncio.Event()
    task = asyncio.create_task(run_retention(store, config, stop))
    await asyncio.sleep(0.3)
    stop.set()
    await task


async def test_retention_counts_ages_from_the_store_clock(store: Store, clock: FakeClock) -> None:
    """Rows a minute old on the store's clock outlive 30 min retention ages however far the
    wall clock is ahead; once the store's own time passes the ages, the same loop purges."""
    await _one_done_one_dead(store, clock)
    await _retention_round(store)
    stats = await store.stats()
    assert stats.events == 2
    assert (stats.jobs_by_status["done"], stats.jobs_by_status["dead"]) == (1, 1)
    stories = [await store.get_job(j.id) for j in await store.list_jobs()]
    assert [s.body_purged_at for s in stories] == [None, None]
    clock.advance(HALF_HOUR_S)
    await _retention_round(store)
    stats = await store.stats()
    assert stats.events == 0 and sum(stats.jobs_by_status.values()) == 0


async def test_now_and_relative_times_are_the_store_clock(store: Store, clock: FakeClock) -> None:
    """`now_s` is the store's clock; an age resolves against it and an absolute time is kept
    as given, so `10m` lists a job that died a minute ago."""
    await _one_done_one_dead(store, clock)
    assert await store.now_s() == clock()
    since, at = await resolve_instants(store, parse_instant_spec("10m"),
                                       parse_instant_spec("1700000000"))
    assert (since, at) == (clock() - 600, 1_700_000_000.0)
    assert len(await store.list_dead(since_s=since)) == 1


@pytest.fixture
async def client(store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def _call(client: TestClient[Any, Any], method: str, path: str,
                **kwargs: Any) -> Any:
    async with client.request(method, path, headers=AUTH, **kwargs) as resp:
        assert resp.status == 200, (path, await resp.text())
        return await resp.json()


async def test_admin_api_counts_back_from_the_store_clock(store: Store, clock: FakeClock,
                                                          client: TestClient[Any, Any]) -> None:
    """`since=10m` on dead letters, events, replay and resend finds what happened a minute
    ago on the store's clock, and a purge with 30 min ages removes none of it."""
    await _one_done_one_dead(store, clock)
    assert len(await _call(client, "GET", "/v1/admin/dead?since=10m")) == 1
    page = await _call(client, "GET", "/v1/admin/events?since=10m&until=0s")
    assert len(page["events"]) == 2
    replay = await _call(client, "POST", "/v1/admin/replay",
                         json={"all_dead": True, "since": "10m", "dry_run": True})
    assert replay["count"] == 1
    resend = await _call(client, "POST", "/v1/admin/resend",
                         json={"destination": "d", "since": "10m", "dry_run": True})
    assert resend["count"] == 2
    purged = await _call(client, "POST", "/v1/admin/purge", json={
        "bodies_older_than": "30m", "metadata_older_than": "30m", "dedupe_keep": "30m"})
    assert set(purged.values()) == {0}, purged


def _cli(db: Path, *args: str) -> Any:
    """`hookline --db DB ARGS --json` in this process: its JSON output (exit code 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = hookline_main(["--db", str(db), *args, "--json"])
    assert code == 0, (args, out.getvalue())
    return json.loads(out.getvalue())


def test_cli_counts_back_from_the_store_clock(tmp_path: Path) -> None:
    """The CLI opens the database with its production clock (the anchor stored in it, here an
    hour behind the wall clock): `dead --since 10m`, `events --since 10m`, `resend --since`
    and `purge` with 30 min ages count from it."""
    db = tmp_path / "hookline.db"

    async def prepare() -> None:
        async with SqliteStore(str(db)):
            pass  # takes the anchor
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as raw:
            raw.execute(f"UPDATE store_clock SET anchor_s = anchor_s - {HOUR_S}")
        store = SqliteStore(str(db))
        async with store:
            assert store.clock() == pytest.approx(time.time() - HOUR_S, abs=5)
            await _one_done_one_dead(store, FakeClock())  # written on the store's own clock

    asyncio.run(prepare())
    assert len(_cli(db, "dead", "--since", "10m")) == 1
    assert len(_cli(db, "events", "--since", "10m")["events"]) == 2
    assert _cli(db, "resend", "--destination", "d", "--since", "10m", "--dry-run")["count"] == 2
    purged = _cli(db, "purge", "--bodies-older-than", "30m", "--metadata-older-than", "30m",
                  "--dedupe-keep", "30m")
    assert set(purged.values()) == {0}, purged

"""The periodic retention purge that ingest runs (ingest/maintenance.py), on a real database
(each backend in turn: a SQLite file, then PostgreSQL)."""

from __future__ import annotations

import asyncio
import time

import pytest

from hookline.ingest import maintenance
from hookline.ingest.maintenance import run_retention
from hookline.shared.config import Config
from hookline.shared.errors import ConfigError
from hookline.shared.models import AttemptResult, Done
from hookline.shared.signing import generate_secret
from tests.conftest import new_event


async def test_retention_purges_finished_history_and_keeps_pending(real_store):
    """With every age at 0, one round deletes the done job, its attempt and its event
    (dedupe key), and leaves the pending job and its event alone."""
    await real_store.add_destination(name="a", url="http://127.0.0.1:9/a",
                                     secret=generate_secret(), event_types=["*"],
                                     max_in_flight=1)
    await real_store.add_events([new_event("done"), new_event("waiting")])
    [claim] = await real_store.claim("w", 1, lease_s=30, max_attempts=3)
    ok = AttemptResult(started_at=time.time(), duration_s=0.01, status_code=200)
    await real_store.finish([(claim, Done(), ok)])
    await asyncio.sleep(0.05)  # finished strictly before the purge's cutoff
    config = Config(retention_interval_s=0.05, retention_bodies_s=0,
                    retention_metadata_s=0, retention_dedupe_s=0)
    stop = asyncio.Event()
    task = asyncio.create_task(run_retention(real_store, config, stop))
    await asyncio.sleep(0.3)
    stop.set()
    await task
    stats = await real_store.stats()
    assert stats.events == 1
    assert stats.jobs_by_status["done"] == 0 and stats.jobs_by_status["pending"] == 1
    assert await real_store.list_attempts() == []


async def test_the_first_round_runs_soon_after_start_not_a_whole_interval_later(
        real_store, monkeypatch):
    """An ingest restarted more often than the interval (an hour by default) must still
    purge: the first round comes RETENTION_FIRST_ROUND_S after the start, then one per
    interval."""
    monkeypatch.setattr(maintenance, "RETENTION_FIRST_ROUND_S", 0.1)
    await real_store.add_destination(name="a", url="http://127.0.0.1:9/a",
                                     secret=generate_secret(), event_types=["*"],
                                     max_in_flight=1)
    await real_store.add_events([new_event("done")])
    [claim] = await real_store.claim("w", 1, lease_s=30, max_attempts=3)
    await real_store.finish([(claim, Done(), AttemptResult(
        started_at=time.time(), duration_s=0.01, status_code=200))])
    await asyncio.sleep(0.05)  # finished strictly before the purge's cutoff
    config = Config(retention_interval_s=3600, retention_bodies_s=0,
                    retention_metadata_s=0, retention_dedupe_s=0)
    stop = asyncio.Event()
    task = asyncio.create_task(run_retention(real_store, config, stop))
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            if (await real_store.stats()).events == 0:
                break
        assert (await real_store.stats()).events == 0
        await real_store.add_events([new_event("later")])  # the next round is an hour away
        await asyncio.sleep(0.3)
        assert (await real_store.stats()).events == 1
    finally:
        stop.set()
        await task


def test_retention_ages_must_be_ordered():
    """Bodies must go no later than metadata, metadata no later than dedupe keys."""
    with pytest.raises(ConfigError, match="retention"):
        Config(retention_bodies_s=100, retention_metadata_s=10)

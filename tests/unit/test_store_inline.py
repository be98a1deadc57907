"""A SQLite store whose transactions run inline, on the event loop's thread (the workers'
store; shared/store/sqlite.py `inline`): it waits for the cross-process write lock without
blocking the loop, gives up with StoreBusy after busy_timeout_s, and keeps two of its own
transactions apart; it commits with `worker_synchronous`. Real SQLite files; the lock is held
through another open file of the lock (what another process holds)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookline.shared.config import Config
from hookline.shared.errors import StoreBusy
from hookline.shared.store import store_for
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.store.write_lock import WriteLock
from tests.conftest import new_event

HELD_S = 0.3


@pytest.fixture
async def inline_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "inline.db"), busy_timeout_s=2.0, inline=True)
    await store.open()
    await store.add_destination(name="d", url="http://127.0.0.1:9/", secret="whsec_" + "A" * 32,
                                event_types=["*"], max_in_flight=10)
    yield store
    await store.close()


async def _ticks_while(work: asyncio.Future[object]) -> int:
    """How many 10 ms ticks the event loop ran while `work` was under way."""
    ticks = 0
    while not work.done():
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


async def test_a_write_waits_for_the_lock_without_blocking_the_loop(
        inline_store: SqliteStore) -> None:
    """While another process holds the write lock, an inline write waits and the loop goes
    on (its ticks keep coming); once the lock is released the write commits."""
    other = WriteLock(inline_store.path + "-lock", timeout_s=1.0)
    try:
        other.acquire()
        started = time.monotonic()
        write = asyncio.ensure_future(inline_store.add_events([new_event("e1")]))
        asyncio.get_running_loop().call_later(HELD_S, other.release)
        ticks = await _ticks_while(write)
        [result] = write.result()
        waited_s = time.monotonic() - started
    finally:
        other.close()
    assert waited_s >= HELD_S * 0.9, waited_s
    # A loop blocked in the wait would have run no tick until the write was done.
    assert ticks >= HELD_S / 0.01 / 3, ticks
    assert [j.status for j in await inline_store.list_jobs()] == ["pending"], result


async def test_a_lock_held_past_the_busy_timeout_is_store_busy_and_writes_nothing(
        tmp_path: Path) -> None:
    """Held longer than busy_timeout_s: the write raises StoreBusy (retried by its callers),
    the loop ran meanwhile, and nothing of the write is stored."""
    store = SqliteStore(str(tmp_path / "busy.db"), busy_timeout_s=0.2, inline=True)
    await store.open()
    other = WriteLock(store.path + "-lock", timeout_s=1.0)
    try:
        other.acquire()
        write = asyncio.ensure_future(store.add_events([new_event("e1")]))
        ticks = await _ticks_while(write)
        with pytest.raises(StoreBusy):
            write.result()
        other.release()
        assert ticks >= 5, ticks
        assert await store.list_jobs() == [] and await store.stats() is not None
        await store.check_writable()  # the lock is free again, and the probe takes it inline
    finally:
        other.close()
        await store.close()


async def test_two_writes_of_one_process_waiting_for_the_lock_both_commit(
        inline_store: SqliteStore) -> None:
    """Two inline writes queued behind another process's lock run one after the other once
    it is released (no transaction inside another), and both are stored."""
    other = WriteLock(inline_store.path + "-lock", timeout_s=1.0)
    try:
        other.acquire()
        writes = [asyncio.ensure_future(inline_store.add_events([new_event(f"e{i}")]))
                  for i in range(2)]
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in writes)
        other.release()
        await asyncio.gather(*writes)
    finally:
        other.close()
    assert len(await inline_store.list_jobs()) == 2
    claims = await inline_store.claim("w1", 10, lease_s=30, max_attempts=5)
    assert len(claims) == 2 and inline_store.write_lock_stats() is not None


async def _synchronous_of(store: SqliteStore) -> int:
    return int(await store._run(lambda db: db.execute("PRAGMA synchronous").fetchone()[0]))


@pytest.mark.parametrize(("settings", "worker", "service"), [
    ({}, 1, 2),  # defaults: the workers' commits NORMAL (1), every other FULL (2)
    ({"worker_synchronous": "FULL"}, 2, 2),
    ({"synchronous": "NORMAL"}, 1, 1),
])
async def test_the_workers_store_commits_with_worker_synchronous_and_only_it(
        tmp_path: Path, settings: dict[str, str], worker: int, service: int) -> None:
    """An event's commit answers a 202 and keeps `synchronous`; a worker's claims and
    finishes have no caller waiting on them, and a power loss that undoes them only sends again."""
    config = Config(db=str(tmp_path / "sync.db"), **settings)
    for is_worker, expected in ((False, service), (True, worker)):
        store = store_for(config, worker=is_worker)
        assert isinstance(store, SqliteStore)
        await store.open()
        try:
            assert await _synchronous_of(store) == expected, (settings, is_worker)
        finally:
            await store.close()

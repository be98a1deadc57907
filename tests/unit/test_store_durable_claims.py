"""A worker's SQLite commits are not synced one by one (`worker_synchronous = NORMAL`): a power
loss may undo the last ones and send their jobs again. A claim that holds an ordered
destination's job or an operational event is synced (the WAL fdatasync'd) before it is
returned, so those are never sent from a commit a power loss could undo; a sync that fails is
a permanent fault, and the claim is not returned. Real SQLite files; the sync is observed by
wrapping os.fdatasync (the OS call), naming the file it synced."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from hookline.shared.errors import StoreError, StoreUnavailable
from hookline.shared.models import AttemptResult, Done, Retry
from hookline.shared.policy.delivery import BreakerPolicy
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.store import sqlite as sqlite_module
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

SECRET = "whsec_" + "A" * 32
URL = "http://127.0.0.1:9/x"


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files os.fdatasync is called on from the SQLite store, in order (real paths)."""
    files: list[str] = []
    real: Callable[[int], None] = os.fdatasync

    def spy(fd: int) -> None:
        files.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(sqlite_module.os, "fdatasync", spy)
    return files


def _wal_of(store: SqliteStore) -> str:
    return str(Path(store.path).resolve()) + "-wal"


async def _store(path: Path, synchronous: str) -> SqliteStore:
    store = SqliteStore(str(path), synchronous=synchronous, inline=True)
    await store.open()
    for name, ordered in (("plain", False), ("fifo", True)):
        await store.add_destination(name=name, url=URL, secret=SECRET, event_types=[name],
                                    max_in_flight=10, ordered=ordered)
    return store


@pytest.fixture
async def worker_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = await _store(tmp_path / "worker.db", "NORMAL")
    yield store
    await store.close()


async def test_a_plain_claim_is_not_synced_an_ordered_one_is(
        worker_store: SqliteStore, synced: list[str]) -> None:
    await worker_store.add_event(new_event("e1", type_="plain"))
    claims = await worker_store.claim("w", 10, lease_s=30, max_attempts=5)
    assert [c.destination_name for c in claims] == ["plain"] and synced == []
    await worker_store.add_event(new_event("e2", type_="fifo"))
    claims = await worker_store.claim("w", 10, lease_s=30, max_attempts=5)
    assert [c.destination_name for c in claims] == ["fifo"]
    assert synced == [_wal_of(worker_store)]


async def test_an_operational_event_is_synced_before_it_is_sent(
        worker_store: SqliteStore, synced: list[str]) -> None:
    worker_store.notify = NotifyPolicy(failing_streak=1, failing_after_s=0.0,
                                       dead_letters_step=100, dead_letters_interval_s=0.0)
    await worker_store.add_destination(name="ops", url=URL, secret=SECRET,
                                       event_types=["hookline.*"], max_in_flight=10)
    await worker_store.add_event(new_event("e1", type_="plain"))
    [claim] = await worker_store.claim("w", 10, lease_s=30, max_attempts=5)
    failed = AttemptResult(started_at=0.0, duration_s=0.01, status_code=500)
    # The failure makes `hookline.destination.failing` in this commit, not synced; the claim
    # that takes the announcement is.
    await worker_store.finish([(claim, Retry(delay_s=3600.0, error="HTTP 500"), failed)],
                              breaker=BreakerPolicy(failures=100, min_span_s=0.0,
                                                    window_s=0.0))
    assert synced == []
    claims = await worker_store.claim("w", 10, lease_s=30, max_attempts=5)
    assert [c.event_type for c in claims] == ["hookline.destination.failing"]
    assert synced == [_wal_of(worker_store)]
    done = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
    await worker_store.finish([(claims[0], Done(), done)])
    assert len(synced) == 1  # a finish is not synced


async def test_a_store_that_syncs_every_commit_syncs_no_more(
        tmp_path: Path, synced: list[str]) -> None:
    store = await _store(tmp_path / "full.db", "FULL")
    try:
        await store.add_event(new_event("e1", type_="fifo"))
        assert len(await store.claim("w", 10, lease_s=30, max_attempts=5)) == 1
    finally:
        await store.close()
    assert synced == []


async def test_a_symlinked_database_syncs_the_wal_beside_its_real_file(
        tmp_path: Path, synced: list[str]) -> None:
    # SQLite follows the link and keeps the WAL beside the real file: the sync must too.
    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "real.db"
    link = tmp_path / "hookline.db"
    link.symlink_to(real)
    store = await _store(link, "NORMAL")
    try:
        await store.add_event(new_event("e1", type_="fifo"))
        assert len(await store.claim("w", 10, lease_s=30, max_attempts=5)) == 1
        wals = sorted(f"{folder}/{name}" for folder in (".", "data")
                      for name in os.listdir(tmp_path / folder) if name.endswith("-wal"))
    finally:
        await store.close()
    assert wals == ["data/real.db-wal"]  # none beside the link
    assert synced == [str(real) + "-wal"]


async def test_a_failed_sync_is_a_permanent_fault_and_the_claim_is_not_returned(
        worker_store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # After a failed fsync the kernel may drop the unwritten pages and report the next sync
    # as a success: retrying would send claims a power loss can undo. The worker stops.
    def disk_error(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(sqlite_module.os, "fdatasync", disk_error)
    await worker_store.add_event(new_event("e1", type_="fifo"))
    with pytest.raises(StoreError, match=r"cannot sync the WAL.*Input/output error") as raised:
        await worker_store.claim("w", 10, lease_s=30, max_attempts=5)
    assert not isinstance(raised.value, StoreUnavailable)
    # Committed but never handed to a sender: its lease expires and it is taken over.
    [job] = await worker_store.list_jobs()
    assert (job.status, job.attempts) == ("running", 1)

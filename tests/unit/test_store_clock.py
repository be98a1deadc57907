"""The SQLite store's clock on real files: one anchor shared by every connection, and the
clamp when it is re-taken after the wall clock went back (shared/store/clock.py)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookline.shared.models import AttemptResult, Retry
from hookline.shared.signing import generate_secret
from hookline.shared.store.clock import StoreClock, boot_id, reanchor_file
from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event

FAILED = AttemptResult(started_at=0.0, duration_s=0.01, status_code=503)
HOUR_S = 3600.0
LEASE_BOUND_S = 0.5
DELAY_BOUND_S = 1.0


@contextlib.asynccontextmanager
async def opened(path: Path) -> AsyncIterator[SqliteStore]:
    """A store on `path` with its production clock, as a new process would open it."""
    store = SqliteStore(str(path))
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def raw(path: Path, sql: str) -> list[sqlite3.Row]:
    """Run one statement on its own connection (autocommit) and return its rows."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.row_factory = sqlite3.Row
        return db.execute(sql).fetchall()


async def test_every_connection_reads_one_anchored_clock(tmp_path: Path) -> None:
    """Two stores on one file (two processes) share the anchor stored with this boot's id,
    and with no wall step since it was taken the store's time is the wall time."""
    path = tmp_path / "hookline.db"
    async with opened(path) as first, opened(path) as second:
        assert isinstance(first.clock, StoreClock) and isinstance(second.clock, StoreClock)
        assert first.clock.anchor_s == second.clock.anchor_s
        assert abs(first.clock() - time.time()) < 0.5
    [row] = raw(path, "SELECT boot_id, anchor_s FROM store_clock")
    assert row["boot_id"] == boot_id() and row["anchor_s"] == first.clock.anchor_s


async def _jobs_written_an_hour_ahead(path: Path) -> float:
    """Leave a leased job and a retry scheduled on a store time one hour ahead of the wall
    clock (as if the wall clock had been an hour fast and was then stepped back), with the
    destination's failure run and rate-limit slot on that time too. Returns the old anchor."""
    async with opened(path):
        pass
    raw(path, f"UPDATE store_clock SET anchor_s = anchor_s + {HOUR_S}")
    async with opened(path) as ahead:
        assert ahead.clock() - time.time() == pytest.approx(HOUR_S, abs=1)
        await ahead.add_destination(name="d", url="http://127.0.0.1:9/x", secret=generate_secret(),
                                    event_types=("*",), max_in_flight=10)
        await ahead.update_destination("d", rate_limit_per_s=100.0)
        await ahead.add_events([new_event("leased"), new_event("retried")])
        claims = await ahead.claim("w-old", limit=2, lease_s=30.0, max_attempts=5)
        assert len(claims) == 2
        retried = next(c for c in claims if c.event_id == 2)
        await ahead.finish([(retried, Retry(delay_s=60, error="HTTP 503"),
                             FAILED)])
        return ahead.clock.anchor_s  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["serve_start", "reboot"])
async def test_reanchor_back_clamps_what_lies_too_far_ahead(tmp_path: Path, how: str) -> None:
    """After the store's time moves back by an hour (re-anchored at `hookline serve` start, or
    at open after a reboot with the bounds the last serve recorded), a lease outlives it by
    at most the lease bound and a retry waits at most the delay bound, instead of an hour:
    both jobs are claimable again once the bounds have passed."""
    path = tmp_path / "hookline.db"
    old_anchor = await _jobs_written_an_hour_ahead(path)
    if how == "serve_start":
        reanchor_file(str(path), lease_bound_s=LEASE_BOUND_S, delay_bound_s=DELAY_BOUND_S)
    else:
        raw(path, f"UPDATE store_clock SET boot_id = 'a previous boot', "
                  f"lease_bound_s = {LEASE_BOUND_S}, delay_bound_s = {DELAY_BOUND_S}")
    async with opened(path) as store:
        now = store.clock()
        assert store.clock.anchor_s == pytest.approx(old_anchor - HOUR_S, abs=1)  # type: ignore[attr-defined]
        [leased] = raw(path, "SELECT lease_until FROM jobs WHERE status = 'running'")
        [pending] = raw(path, "SELECT run_at FROM jobs WHERE status = 'pending'")
        [dest] = raw(path, "SELECT failing_since, next_send_at FROM destinations")
        assert leased["lease_until"] <= now + LEASE_BOUND_S
        assert pending["run_at"] <= now + DELAY_BOUND_S
        assert dest["failing_since"] <= now
        assert dest["next_send_at"] <= now + 1.0
        await asyncio.sleep(DELAY_BOUND_S + 0.1)
        # The job whose lease lapsed is taken over, so it is claimed alone (quarantine).
        first = await store.claim("w-new", limit=2, lease_s=30.0, max_attempts=5)
        second = await store.claim("w-new", limit=2, lease_s=30.0, max_attempts=5)
        assert [c.taken_over for c in first] == [True]
        assert sorted(c.event_id for c in first + second) == [1, 2]
    [row] = raw(path, "SELECT boot_id FROM store_clock")
    assert row["boot_id"] == boot_id()


async def test_reanchor_keeps_what_is_within_the_bounds(tmp_path: Path) -> None:
    """Re-anchoring with no wall step in between moves nothing: a lease and a retry within
    the bounds keep their instants."""
    path = tmp_path / "hookline.db"
    async with opened(path) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/x", secret=generate_secret(),
                                    event_types=("*",), max_in_flight=10)
        await store.add_events([new_event("leased")])
        await store.claim("w", limit=1, lease_s=30.0, max_attempts=5)
    before = raw(path, "SELECT lease_until FROM jobs")[0]["lease_until"]
    reanchor_file(str(path), lease_bound_s=30.0, delay_bound_s=60.0)
    assert raw(path, "SELECT lease_until FROM jobs")[0]["lease_until"] == before


@pytest.mark.parametrize("moved_s", [-HOUR_S, HOUR_S])
async def test_reanchor_on_the_same_boot_keeps_every_schedule(tmp_path: Path,
                                                              moved_s: float) -> None:
    """A `hookline serve` start after the wall clock was stepped (back or forward) on the same
    boot shifts what is scheduled by the step: a retry due in 60 s, a lease with 30 s left, a
    rotation overlap and a failure run keep their distance from the store's new time, well
    inside bounds that would allow an hour (so no clamp hides a missing shift)."""
    path = tmp_path / "hookline.db"
    async with opened(path):
        pass
    # The rows are written on a store time `moved_s` behind the wall clock's next reading, as
    # if the wall clock had been stepped by `moved_s` after the anchor was taken.
    raw(path, f"UPDATE store_clock SET anchor_s = anchor_s - {moved_s}")
    async with opened(path) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/x", secret=generate_secret(),
                                    event_types=("*",), max_in_flight=10)
        await store.rotate_secret("d", generate_secret(), overlap_s=600.0)
        await store.add_events([new_event("leased"), new_event("retried")])
        claims = await store.claim("w-old", limit=2, lease_s=30.0, max_attempts=5)
        retried = next(c for c in claims if c.event_id == 2)
        await store.finish([(retried, Retry(delay_s=60, error="HTTP 503"),
                             FAILED)])
        before = _schedule(path, store.clock())
    assert before["failing_for"] >= 0
    reanchor_file(str(path), lease_bound_s=2 * HOUR_S, delay_bound_s=2 * HOUR_S)
    async with opened(path) as store:
        assert store.clock() == pytest.approx(time.time(), abs=1.0)
        after = _schedule(path, store.clock())
    for name, left_s in before.items():  # seconds elapsed meanwhile: well under 1 s each
        assert after[name] == pytest.approx(left_s, abs=1.0), (name, before, after)


def _schedule(path: Path, now_s: float) -> dict[str, float]:
    """How far the scheduled instants lie from `now_s`, seconds (a failure run: its age)."""
    [leased] = raw(path, "SELECT lease_until FROM jobs WHERE status = 'running'")
    [pending] = raw(path, "SELECT run_at FROM jobs WHERE status = 'pending'")
    [dest] = raw(path, "SELECT failing_since, previous_secret_until FROM destinations")
    return {"lease_left": leased["lease_until"] - now_s, "retry_in": pending["run_at"] - now_s,
            "overlap_left": dest["previous_secret_until"] - now_s,
            "failing_for": now_s - dest["failing_since"]}

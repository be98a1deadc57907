"""Periodic store housekeeping in the ingest process: WAL hygiene and the retention purge.

WAL hygiene: SQLite's automatic checkpoints copy pages back into the database but never
shrink the `-wal` file, and cannot reset it while any reader holds an old snapshot. Every
`maintenance_interval_s` this task calls :meth:`hookline.shared.store.Store.maintenance` (a TRUNCATE
checkpoint on SQLite, a no-op on PostgreSQL), so once long readers are gone the file goes
back to zero bytes. Every ingest process runs it (each answers `/healthz` from its own
round's judgement, and a checkpoint with nothing to copy costs little); the retention purge
runs in the first ingest process only (ingest/main.py).

WAL size: the store judges each round's result against `wal_degraded_bytes` (degraded, and
why, for `/healthz`: :meth:`hookline.shared.store.Store.health`), and between rounds this task looks
at the store's health every second (a stat): once the file passes the limit a round runs at once
instead of at the next interval, so a fast-growing WAL is checkpointed, or reported, within
about a second. A store without such a file (PostgreSQL) is not watched.
"""

from __future__ import annotations

import asyncio
import time

from hookline.shared.config import Config
from hookline.shared.errors import StoreError
from hookline.shared.logs import get_logger
from hookline.shared.policy.rules import RetentionAges
from hookline.shared.process.lifecycle import stopped_within
from hookline.shared.store import Store

RETENTION_FIRST_ROUND_S = 60.0
"""Seconds from ingest's start to its first retention round (the interval, if shorter). Not a
whole interval: an ingest restarted more often than `retention_interval_s` (deploys, a crash
loop while another ingest process keeps serving) would otherwise never purge, and the
database would grow without a word. Not at once: a restart's recovery comes first."""

WAL_WATCH_INTERVAL_S = 1.0
"""How often the `-wal` file's size is looked at between rounds, seconds (one stat)."""


async def run_maintenance(store: Store, interval_s: float, stop: asyncio.Event) -> None:
    """Call `store.fold_metric_deltas()` and `store.maintenance()` every `interval_s` seconds
    until `stop` is set.

    A failed round is logged (`store_maintenance_failed`) and retried next interval; it never
    ends the task. Each round logs `wal_checkpoint` (debug, or warning when readers kept the
    checkpoint from finishing) with the result. A round runs early once the store's WAL
    passes its limit while its health is not already degraded (module docstring).

    Args:
        store: an open store.
        interval_s: seconds between two rounds (> 0).
        stop: ends the task when set.
    """
    log = get_logger()
    watch = (await store.health()).wal_check is not None
    while not stop.is_set():
        if await _wait_for_round(store, interval_s, stop, watch):
            return
        try:
            await store.fold_metric_deltas()  # PostgreSQL: the appended deltas stay few
            result = await store.maintenance()
        except StoreError as exc:
            log.warning("store_maintenance_failed", reason=str(exc))
            continue
        if result:
            (log.warning if result.get("busy") else log.debug)("wal_checkpoint", **result)


async def _wait_for_round(store: Store, interval_s: float, stop: asyncio.Event,
                          watch: bool) -> bool:
    """Wait `interval_s`, or less when the WAL passes its limit; True once `stop` is set."""
    deadline = time.monotonic() + interval_s
    while (left := deadline - time.monotonic()) > 0:
        step = min(left, WAL_WATCH_INTERVAL_S) if watch else left
        if await stopped_within(stop, step):
            return True
        if watch:
            found = await store.health()
            if found.wal_over_limit and not found.degraded:
                break
    return stop.is_set()


async def run_retention(store: Store, config: Config, stop: asyncio.Event) -> None:
    """Every `retention_interval_s`, purge by age (see :meth:`hookline.shared.store.Store.purge`):
    bodies of finished events older than `retention_bodies_s`, finished jobs and attempts
    older than `retention_metadata_s` (dead ones: `retention_dead_letters_s`, unset = the
    same), dedupe keys older than `retention_dedupe_s`. The first round runs
    RETENTION_FIRST_ROUND_S after the start (or the interval, if shorter).

    Logs `retention_purged` with the counts; a failed round is logged and retried next
    interval. Returns at once when `retention_interval_s` is 0 (off).
    """
    if config.retention_interval_s <= 0:
        return
    log = get_logger()
    ages = RetentionAges(config.retention_bodies_s, config.retention_metadata_s,
                         config.retention_dedupe_s,  # ordered: Config checked them
                         config.retention_dead_letters_s)
    wait_s = min(RETENTION_FIRST_ROUND_S, config.retention_interval_s)
    while not stop.is_set():
        if await stopped_within(stop, wait_s):
            return
        wait_s = config.retention_interval_s
        try:
            # Ages count back from the store's time, which the rows were written with: a
            # wall-clock step must not make an event look an hour older than it is.
            result = await store.purge(**ages.cutoffs(await store.now_s()))
        except StoreError as exc:
            log.warning("retention_failed", reason=str(exc))
            continue
        log.info("retention_purged", **{k: getattr(result, k) for k in result.__slots__})

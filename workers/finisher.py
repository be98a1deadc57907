"""Batched, fenced completions: many finished attempts share one store transaction.

Each delivery hands its (claim, outcome, result) to :meth:`Finisher.finish` and waits; one
background task takes everything queued and calls `store.finish` once for the lot, the way
ingest's group commit does for events. Under load a worker then writes once per batch, not
once per attempt, so it holds SQLite's write lock less often and other processes wait less.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from shared.errors import StoreBusy
from shared.logs import get_logger
from shared.models import AttemptResult, Claim, Outcome
from shared.store import Store

Item = tuple[Claim, Outcome, AttemptResult]
_BUSY_RETRY_DELAYS_S = (0.05, 0.2, 1.0)


class Finisher:
    """Queues finished attempts and writes them in batches of at most `max_batch`.

    Args:
        store: an open store.
        breaker: passed through to `store.finish` (the circuit-breaker settings).
        max_batch: most attempts in one transaction.
    """

    def __init__(self, store: Store, *, breaker: Any = None, max_batch: int = 256) -> None:
        self.store = store
        self.breaker = breaker
        self.max_batch = max_batch
        self.batches = 0
        self._queue: collections.deque[tuple[Item, asyncio.Future[bool]]] = collections.deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._writing = False

    def start(self) -> None:
        """Start the background writer (needs a running loop)."""
        self._task = asyncio.create_task(self._run(), name="finisher")

    async def stop(self) -> None:
        """Write what is queued, then end the background writer."""
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def settle(self) -> None:
        """Wait until everything queued so far is written (used before a hand-back, so a
        completed attempt is recorded as such rather than handed back)."""
        while self._queue or self._writing:
            await asyncio.sleep(0.005)

    async def finish(self, claim: Claim, outcome: Outcome, result: AttemptResult) -> bool:
        """Queue one completion and wait for its batch. Returns False when the lease was lost
        (the fenced update changed nothing). Raises StoreBusy after the busy retries."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queue.append(((claim, outcome, result), future))
        self._wakeup.set()
        return await future

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._stopping:
                    return
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            batch = [self._queue.popleft()
                     for _ in range(min(self.max_batch, len(self._queue)))]
            self._writing = True
            try:
                await self._write(batch)
            finally:
                self._writing = False

    async def _write(self, batch: list[tuple[Item, asyncio.Future[bool]]]) -> None:
        self.batches += 1
        items = [item for item, _ in batch]
        for delay_s in (*_BUSY_RETRY_DELAYS_S, None):
            try:
                kept = await self.store.finish(items, breaker=self.breaker)
                break
            except StoreBusy as exc:
                if delay_s is None:
                    _fail(batch, exc)
                    return
                get_logger().warning("finish_busy", attempts=len(items), retry_in_s=delay_s)
                await asyncio.sleep(delay_s)
            except Exception as exc:  # noqa: BLE001  (every waiter must learn of a failure)
                _fail(batch, exc)
                return
        for (_, future), ok in zip(batch, kept, strict=True):
            if not future.done():
                future.set_result(ok)


def _fail(batch: list[tuple[Item, asyncio.Future[bool]]], exc: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(exc)

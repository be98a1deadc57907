"""Batched, fenced completions: many finished attempts share one store transaction.

Each delivery hands its (claim, outcome, result) to :meth:`Finisher.finish` and waits; the
batcher (shared/batcher.py) calls `store.finish` once for everything queued, the way ingest's
group commit does for events. Under load a worker then writes once per batch, not once per
attempt, so it holds SQLite's write lock less often and other processes wait less. A busy
store is retried a few times before the waiters learn of it.

With a :class:`Refill` (the worker loop), each batch also claims new jobs for the slots it
frees, in the same transaction (`store.finish_and_claim`): a busy worker then turns the write
lock, and pays for the commit, once per batch rather than once to finish and once to claim.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from shared.batcher import Batcher
from shared.errors import StoreBusy
from shared.logs import get_logger
from shared.models import AttemptResult, Claim, ClaimRequest, Outcome
from shared.store import Store

Item = tuple[Claim, Outcome, AttemptResult]
_BUSY_RETRY_DELAYS_S = (0.05, 0.2, 1.0)


class Refill(Protocol):
    """What a batch of finishes claims for the slots it frees (implemented by the worker)."""

    def claim_request(self, finishing: list[Item]) -> ClaimRequest | None:
        """The claim to make once `finishing` is recorded (their slots count as free), or
        None for none (stopping, quarantine)."""

    def claimed(self, claims: list[Claim], request: ClaimRequest) -> None:
        """Start the claims that `request` returned (called before the waiters are answered)."""


class Finisher(Batcher[Item, bool]):
    """Queues finished attempts and writes them in batches of at most `max_batch`.

    Args:
        store: an open store.
        breaker: passed through to `store.finish` (the circuit-breaker settings).
        max_batch: most attempts in one transaction.
        min_interval_s: least time between two finishing transactions while attempts keep
            ending, seconds (Config.batch_interval_s; see shared/batcher.py).
        refill: when given, each batch also claims what `refill.claim_request` asks for.
    """

    def __init__(self, store: Store, *, breaker: Any = None, max_batch: int = 256,
                 min_interval_s: float = 0.0, refill: Refill | None = None) -> None:
        super().__init__(self._finish_batch, max_batch=max_batch, name="finisher",
                         min_interval_s=min_interval_s)
        self.store = store
        self.breaker = breaker
        self.refill = refill

    async def finish(self, claim: Claim, outcome: Outcome, result: AttemptResult) -> bool:
        """Queue one completion and wait for its batch. Returns False when the lease was lost
        (the fenced update changed nothing). Raises StoreBusy after the busy retries, and
        BatcherStopped once the finisher is stopped."""
        return await self.submit((claim, outcome, result))

    async def _finish_batch(self, items: list[Item]) -> list[bool]:
        for delay_s in _BUSY_RETRY_DELAYS_S:
            try:
                return await self._write_once(items)
            except StoreBusy:
                get_logger().warning("finish_busy", attempts=len(items), retry_in_s=delay_s)
                await asyncio.sleep(delay_s)
        return await self._write_once(items)

    async def _write_once(self, items: list[Item]) -> list[bool]:
        request = self.refill.claim_request(items) if self.refill is not None else None
        if request is None or request.limit <= 0:
            return await self.store.finish(items, breaker=self.breaker)
        kept, claims = await self.store.finish_and_claim(items, self.breaker, request)
        assert self.refill is not None
        self.refill.claimed(claims, request)
        return kept

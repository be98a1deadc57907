"""A worker's writes, batched: fenced completions and claims share one store transaction.

Each delivery hands its (claim, outcome, result) to :meth:`Finisher.finish` and waits; the
claim loop asks for new jobs with :meth:`Finisher.claim`. The batcher (shared/batcher.py)
makes ONE `store.finish_and_claim` call for everything queued: every completion, then one
claim sized by the :class:`Refill` (the worker loop) to the slots free once those
completions are recorded. A busy worker thus takes SQLite's single write lock, and pays for
the commit's fsync, once per batch (at most once per `min_interval_s` under steady load)
instead of once per attempt and once more per claim, so the other processes wait less.

A database that is busy or away (StoreUnavailable) never drops a completion: a batch that
records completions is retried with capped backoff (0.1 s doubling to 5 s) until it is
written; the lease token fences it, so a late write of a lease that expired meanwhile
changes nothing. A batch that only claims is retried a few times for StoreBusy, then its
waiter (the claim loop) learns of the fault and backs off itself, so a stop is never held
up by a claim.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, Protocol

from shared.batcher import Batcher
from shared.errors import StoreBusy, StoreUnavailable
from shared.faults import CappedBackoff, StoreOutage
from shared.logs import get_logger
from shared.models import AttemptResult, Claim, ClaimRequest, Outcome
from shared.store import Store

Item = tuple[Claim, Outcome, AttemptResult]
_BUSY_RETRY_DELAYS_S = (0.05, 0.2, 1.0)


class _ClaimTick:
    """The claim loop's place in a batch: "claim for my free slots in this transaction"."""


CLAIM: Final = _ClaimTick()


class Refill(Protocol):
    """Sizes each batch's claim and starts what it returns (implemented by the worker)."""

    def claim_request(self, finishing: list[Item]) -> ClaimRequest | None:
        """The claim to make once `finishing` is recorded (their slots count as free), or
        None for none (stopping, quarantine, no free slot)."""

    def claimed(self, claims: list[Claim], request: ClaimRequest, *,
                after_completions: bool) -> None:
        """Start the claims that `request` returned (called before the waiters are answered,
        and with [] when the write failed: every request gets exactly one call).
        `after_completions`: the batch also recorded completions (it freed slots)."""


class Finisher(Batcher[Item | _ClaimTick, bool]):
    """Queues finished attempts and claim requests and writes them in batches.

    Args:
        store: an open store.
        breaker: passed through to the store's finish (the circuit-breaker settings).
        max_batch: most queued items (completions and claim requests) in one transaction.
        min_interval_s: least time between two of this worker's transactions while work
            keeps coming, seconds (Config.batch_interval_s; see shared/batcher.py).
        refill: sizes each batch's claim (None: completions only, as in tests).
    """

    def __init__(self, store: Store, *, breaker: Any = None, max_batch: int = 256,
                 min_interval_s: float = 0.0, refill: Refill | None = None,
                 outage: StoreOutage | None = None) -> None:
        super().__init__(self._write_batch_with_retries, max_batch=max_batch, name="finisher",
                         min_interval_s=min_interval_s)
        self.store = store
        self.breaker = breaker
        self.refill = refill
        self.outage = outage if outage is not None else StoreOutage()

    async def finish(self, claim: Claim, outcome: Outcome, result: AttemptResult) -> bool:
        """Queue one completion and wait for its batch. Returns False when the lease was lost
        (the fenced update changed nothing). A busy or unavailable store is retried until
        the write succeeds (module docstring). Raises BatcherStopped once the finisher is
        stopped."""
        return await self.submit((claim, outcome, result))

    async def claim(self) -> bool:
        """Have the next batch claim for the free slots, and wait for it. Returns True when
        the claim took all it asked for (more may be due now), False when it came back short
        or asked for nothing. Raises StoreUnavailable (StoreBusy after the busy retries) when
        the batch held no completion, BatcherStopped once stopped."""
        return await self.submit(CLAIM)

    async def _write_batch_with_retries(self, items: list[Item | _ClaimTick]) -> list[bool]:
        busy_delays = iter(_BUSY_RETRY_DELAYS_S)
        backoff = CappedBackoff()
        completions = any(not isinstance(item, _ClaimTick) for item in items)
        while True:
            try:
                results = await self._write_once(items)
            except StoreBusy as exc:
                delay_s = next(busy_delays, None)
                if delay_s is None:
                    if not completions:
                        raise
                    self.outage.failed(exc, during="finish")
                    delay_s = backoff.next_delay_s()
                get_logger().warning("finish_busy", attempts=len(items), retry_in_s=delay_s)
                await asyncio.sleep(delay_s)
                continue
            except StoreUnavailable as exc:
                self.outage.failed(exc, during="finish" if completions else "claim")
                if not completions:
                    raise
                await asyncio.sleep(backoff.next_delay_s())
                continue
            self.outage.succeeded()
            return results

    async def _write_once(self, items: list[Item | _ClaimTick]) -> list[bool]:
        finishing = [item for item in items if not isinstance(item, _ClaimTick)]
        request = self.refill.claim_request(finishing) if self.refill is not None else None
        if request is None or request.limit <= 0:
            kept = await self.store.finish(finishing, breaker=self.breaker) if finishing else []
            full = False
        else:
            claims: list[Claim] = []
            try:
                kept, claims = await self.store.finish_and_claim(finishing, self.breaker,
                                                                 request)
            finally:
                assert self.refill is not None
                self.refill.claimed(claims, request,  # [] when the write failed
                                    after_completions=bool(finishing))
            full = len(claims) == request.limit
        results = iter(kept)
        return [full if isinstance(item, _ClaimTick) else next(results) for item in items]

"""The worker loop: claim -> send (outside any transaction) -> finish, fenced by lease token.

One :class:`Worker` per process. It keeps up to `worker_concurrency` attempts in flight,
claims only as many jobs as it has free slots, extends all of its leases with one store call
per interval while requests are in flight, and finishes attempts in batches; each batch of
finishes claims the next jobs for the slots it frees in the same transaction
(workers/finisher.py), so a busy worker writes once per batch. When idle it
sleeps on the store's wake-up (ingest pokes it after each commit) with a poll as fallback.

Reserved capacity: late retries (jobs that already made `late_retry_after_attempts`
attempts) may hold at most `late_retry_share` of the slots, and each claim prefers fresh
work, so a failing destination's backlog cannot starve healthy destinations. Fair share:
one destination holds at most `destination_slot_share` of the slots (rounded up, at least
1), whatever its max_in_flight, so a hanging destination cannot take every slot. Each finish
passes the circuit-breaker policy to the store (auto-pause on a failure run or a 410).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import Callable

from shared.config import Config
from shared.delivery_policy import BreakerPolicy, destination_slots, effective_timeout_s, late_slots
from shared.errors import StoreUnavailable
from shared.faults import CappedBackoff, StoreOutage
from shared.logs import get_logger
from shared.models import AttemptResult, Claim, ClaimRequest, Dead, Done, Outcome, Retry
from shared.retry import Backoff, next_attempt
from shared.store import Store
from workers.finisher import Finisher, Item
from workers.sender import Sender

log = get_logger()


class Worker:
    """Delivers jobs until `stop` is set, then hands back what it could not finish.

    Args:
        store: an open store.
        config: settings (lease_s, attempt_timeout_s, worker_concurrency, claim_batch, ...).
        worker_id: this process's lease identity, e.g. `worker-2@host:4242`.
        sender: an entered :class:`Sender`.
        clock: unix-seconds clock used for retry scheduling; None: the store's own clock
            (SQLite's `store.clock`, which never moves with a wall-clock step), else the
            host's wall clock (PostgreSQL turns it into a delay on the server's clock).
    """

    def __init__(self, store: Store, config: Config, worker_id: str, sender: Sender,
                 clock: Callable[[], float] | None = None) -> None:
        self.store = store
        self.config = config
        self.worker_id = worker_id
        self.sender = sender
        self.clock: Callable[[], float] = clock or (lambda: getattr(store, "clock", time.time)())
        self.backoff = Backoff(base_s=config.retry_base_s, cap_s=config.retry_cap_s,
                               max_attempts=config.max_attempts)
        self.permanent_statuses = config.permanent_status_set
        self.breaker = BreakerPolicy(failures=config.breaker_failures,
                                     window_s=config.breaker_window_s,
                                     min_span_s=config.breaker_min_span_s)
        # Reserved capacity: late retries may hold at most this many of our slots.
        self.late_slots = late_slots(config.worker_concurrency, config.late_retry_share)
        # Fair share: most of our slots one destination may hold.
        self.destination_slots = destination_slots(config.worker_concurrency,
                                                   config.destination_slot_share)
        self._in_flight: dict[str, tuple[Claim, asyncio.Task[None]]] = {}
        # Set when the claim loop should look again: a slot freed, the store's wake-up, the poll
        # interval, stop.
        self._wake = asyncio.Event()
        # Quarantine: a job whose previous worker died with it may be what killed that
        # worker (a poison job). It is sent alone, so a crash takes no other job with it.
        self._suspects: set[str] = set()
        self._suspect_lock = asyncio.Lock()
        # One record of "the database is away" for the whole process: one store_unavailable
        # / store_recovered pair per outage, whoever meets it (claims, finishes, extends).
        self.outage = StoreOutage()
        self.finisher = Finisher(store, breaker=self.breaker,
                                 min_interval_s=config.batch_interval_s, refill=self,
                                 outage=self.outage)
        self._stopping = False
        # Slots promised to the claim of the batch being written (claim_request .. claimed):
        # a completion landing meanwhile must not count them as free.
        self._claiming = 0
        # Lease tokens of claims whose completion is queued or being written.
        self._finishing: set[str] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and deliver until `stop` is set; then drain within graceful_timeout_s."""
        self._stopping = False
        helpers = [asyncio.create_task(self._extend_leases(stop)),
                   asyncio.create_task(self._listen_for_jobs()),
                   asyncio.create_task(self._wake_on(stop))]
        self.finisher.start()
        try:
            await self._claim_loop(stop)
        finally:
            self._stopping = True
            await self._drain()
            await self.finisher.stop()
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _claim_loop(self, stop: asyncio.Event) -> None:
        backoff = CappedBackoff()
        while not stop.is_set():
            free = self._free_slots()
            if free > 0 and self._suspects:
                free = 0  # claim nothing while a quarantined job waits or is in flight
            if free > 0:
                # Cleared before (not after) the claim: a wake-up meanwhile re-wakes us.
                self._wake.clear()
                try:
                    # Rides the next batch of completions: one transaction for both.
                    took_all = await self.finisher.claim()
                    backoff.reset()
                except StoreUnavailable as exc:
                    # Busy or away: never a reason to exit. Wait (stop cuts it short), then
                    # claim again; the outage is logged once (shared/faults.py). Never
                    # slower than an idle worker's poll, so work resumes within about
                    # poll_interval_s of the database's return.
                    self.outage.failed(exc, during="claim")
                    await _wait_or_stop(stop, min(backoff.next_delay_s(),
                                                  self.config.poll_interval_s))
                    continue
                if took_all:
                    continue  # more may be due right now
            # Until a slot frees up, the store says new work may be due, the poll interval
            # passes (_listen_for_jobs), or stop: then look again.
            await self._wake.wait()
            self._wake.clear()

    def _free_slots(self) -> int:
        """Slots neither in flight nor promised to a claim under way."""
        return self.config.worker_concurrency - len(self._in_flight) - self._claiming

    def claim_request(self, finishing: list[Item]) -> ClaimRequest | None:
        """:class:`workers.finisher.Refill`: what a batch claims for the slots free once its
        completions are recorded (their claims are still counted in flight until then): at
        most claim_batch, with the late-retry reservation and the per-destination fair share
        (the finishing claims no longer count toward either). Its slots stay promised until
        :meth:`claimed`."""
        if self._stopping or self._suspects:
            return None
        free = self._free_slots() + len(finishing)
        if free <= 0:
            return None
        cfg = self.config
        late_held = self._late_in_flight() - sum(
            1 for claim, _, _ in finishing if claim.attempt > cfg.late_retry_after_attempts)
        held = Counter(claim.destination_id for claim, _ in self._in_flight.values())
        held.subtract(claim.destination_id for claim, _, _ in finishing)
        request = ClaimRequest(worker=self.worker_id, limit=min(free, cfg.claim_batch),
                               lease_s=cfg.lease_s, max_attempts=cfg.max_attempts,
                               late_after=cfg.late_retry_after_attempts,
                               max_late=max(0, self.late_slots - late_held),
                               per_destination=self.destination_slots, held=held)
        self._claiming += request.limit
        return request

    def claimed(self, claims: list[Claim], request: ClaimRequest, *,
                after_completions: bool) -> None:
        """:class:`workers.finisher.Refill`: start `claims` (none when the write failed) and
        release the request's promised slots. When completions freed slots that this claim
        left empty, wake the claim loop so it listens for new work for them (a claim the loop
        asked for alone does not: that would spin)."""
        self._claiming -= request.limit
        for claim in claims:
            self._start(claim)
        if after_completions and len(claims) < request.limit:
            self._wake.set()

    async def _listen_for_jobs(self) -> None:
        """Wake the claim loop on every wake-up from the store (a commit with new or replayed
        jobs) and at least every poll_interval_s (work that comes due by time: retries,
        expired leases). Ends at stop: cancelling alone is not enough, since Python 3.11's
        asyncio.wait_for may swallow a cancel that races a wake-up."""
        while not self._stopping:
            try:
                await self.store.wait_for_jobs(self.config.poll_interval_s)
            except Exception as exc:  # noqa: BLE001  (this task must outlive a bad wake-up)
                log.warning("wake_up_failed", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(self.config.poll_interval_s)
            self._wake.set()

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()

    def _start(self, claim: Claim) -> None:
        log.info("job_claimed", job_id=claim.job_id, event_id=claim.event_id,
                 worker=self.worker_id,
                 destination=claim.destination_name, attempt=claim.attempt,
                 lease_token=claim.lease_token, lease_until=claim.lease_until)
        if claim.taken_over:
            log.info("job_taken_over", job_id=claim.job_id, event_id=claim.event_id,
                     worker=self.worker_id, lease_token=claim.lease_token,
                     attempt=claim.attempt)
        if claim.taken_over:
            self._suspects.add(claim.lease_token)
            task = asyncio.create_task(self._deliver_alone(claim))
        else:
            task = asyncio.create_task(self._deliver(claim))
        self._in_flight[claim.lease_token] = (claim, task)

    async def _deliver_alone(self, claim: Claim) -> None:
        """Send a quarantined claim once no other attempt is in flight in this process
        (its lease is extended meanwhile like any other in-flight claim)."""
        try:
            async with self._suspect_lock:
                others = [task for token, (_, task) in self._in_flight.items()
                          if token not in self._suspects]
                if others:
                    await asyncio.wait(others)
                await self._deliver(claim)
        finally:
            self._suspects.discard(claim.lease_token)
            self._wake.set()

    async def _deliver(self, claim: Claim) -> None:
        log.debug("attempt_started", job_id=claim.job_id, attempt=claim.attempt,
                  destination=claim.destination_name, lease_token=claim.lease_token)
        timeout_s = effective_timeout_s(claim.timeout_s, self.config.attempt_timeout_s,
                                        self.config.lease_s)
        if claim.event_type == self.config.test_crash_event_type:
            log.warning("test_crash", job_id=claim.job_id, event_type=claim.event_type)
            os.kill(os.getpid(), signal.SIGKILL)  # the rehearsal's poison job
        result = await self.sender.send(claim, timeout_s=timeout_s)
        outcome = next_attempt(claim.attempt, result, self.clock(), self.backoff,
                               permanent_statuses=self.permanent_statuses)
        # The bookkeeping write must survive a cancel of this task (graceful stop).
        await asyncio.shield(self._finish(claim, outcome, result))

    async def _finish(self, claim: Claim, outcome: Outcome, result: AttemptResult) -> None:
        self._finishing.add(claim.lease_token)
        try:
            kept = await self.finisher.finish(claim, outcome, result)
            _log_outcome(claim, outcome, result, kept, self.clock())
        finally:
            self._finishing.discard(claim.lease_token)
            self._in_flight.pop(claim.lease_token, None)
            # Under load the finish batch already claimed into this slot; wake the claim
            # loop only for a slot left free (it would otherwise spin once per delivery).
            if self._free_slots() > 0 or self._stopping:
                self._wake.set()

    def _late_in_flight(self) -> int:
        """In-flight claims that are late retries (their job had made late_retry_after_attempts
        attempts before this claim)."""
        threshold = self.config.late_retry_after_attempts
        return sum(1 for claim, _ in self._in_flight.values() if claim.attempt > threshold)

    async def _extend_leases(self, stop: asyncio.Event) -> None:
        """Every lease_s / 3, extend every in-flight lease in one store call."""
        interval_s = self.config.lease_s / 3
        while True:
            await asyncio.sleep(interval_s)
            claims = [claim for claim, _ in self._in_flight.values()]
            if not claims:
                continue
            try:
                lost = await self.store.extend(claims, self.config.lease_s)
            except StoreUnavailable as exc:
                # Tried again next interval; a lease that expires meanwhile is fenced.
                self.outage.failed(exc, during="extend")
                log.debug("lease_extend_failed", error=str(exc), leases=len(claims))
                continue
            self.outage.succeeded()
            log.debug("lease_extended", leases=len(claims) - len(lost))
            # A claim whose completion was written meanwhile (or queued: the finisher's write
            # may land before this one) no longer holds a lease to lose.
            for claim in lost:
                token = claim.lease_token
                if token not in self._in_flight or token in self._finishing:
                    continue
                log.warning("lease_lost", job_id=claim.job_id, event_id=claim.event_id,
                            lease_token=claim.lease_token, during="extend")

    async def _drain(self) -> None:
        """Let in-flight attempts finish within graceful_timeout_s, then hand the rest back."""
        tasks = [task for _, task in self._in_flight.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=self.config.graceful_timeout_s)
        leftover = list(self._in_flight.values())
        for _, task in leftover:
            task.cancel()
        await asyncio.gather(*(task for _, task in leftover), return_exceptions=True)
        # A cancelled delivery whose response had arrived is still being finished (the
        # finish is shielded): record it first, then hand back only what never finished.
        await asyncio.sleep(0)
        await self.finisher.settle()
        claims = [claim for claim, _ in leftover if claim.lease_token in self._in_flight]
        if claims:
            handed = await self.store.hand_back(claims)
            for claim in claims:
                log.info("job_handed_back", job_id=claim.job_id, event_id=claim.event_id,
                         lease_token=claim.lease_token)
            log.info("worker_drained", handed_back=handed)
        self._in_flight.clear()


async def _wait_or_stop(stop: asyncio.Event, delay_s: float) -> None:
    """Sleep `delay_s` seconds, or less if `stop` is set meanwhile."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=delay_s)
    except TimeoutError:
        pass


def _log_outcome(claim: Claim, outcome: Outcome, result: AttemptResult, kept: bool,
                 now_s: float) -> None:
    ids = {"job_id": claim.job_id, "event_id": claim.event_id,
           "destination": claim.destination_name, "attempt": claim.attempt,
           "lease_token": claim.lease_token, "duration_s": round(result.duration_s, 4),
           "status": result.status_code}
    if not isinstance(outcome, Done):
        log.info("attempt_failed", error=result.error, **ids)
    if not kept:
        log.warning("lease_lost", during="finish", **ids)
    elif isinstance(outcome, Done):
        log.info("job_done", **ids)
    elif isinstance(outcome, Retry):
        log.info("job_retry_scheduled", run_at=outcome.run_at, reason=outcome.error,
                 retry_in_s=round(outcome.run_at - now_s, 3), **ids)
    elif isinstance(outcome, Dead):
        log.warning("job_dead", reason=outcome.error, **ids)

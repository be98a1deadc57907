"""The worker loop: claim -> send (outside any transaction) -> finish, fenced by lease token.

One :class:`Worker` per process. It keeps up to `worker_concurrency` attempts in flight.
Its :class:`~hookline.workers.writer.Writer` owns the slots and the one write loop: each transaction
records the finished attempts and claims jobs for the slots they free (workers/writer.py),
with the late-retry reservation and the per-destination fair share, and extends the leases
it holds between its writes. The worker sends each claimed job (the :meth:`Worker.send` the
writer starts per claim) and tells the writer when work may be due: the store's wake-up
(ingest pokes a worker after each commit; one whose slots are half full or more passes it
on), with a poll as fallback. Each finish passes the
circuit-breaker policy to the store (auto-pause on a failure run or a 410). With tracing on,
each attempt is a `hookline.attempt` span in its event's trace (hookline.shared.otel).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hookline.shared.config import Config
from hookline.shared.faults import StoreOutage
from hookline.shared.logs import get_logger, logs_debug
from hookline.shared.models import AttemptResult, Claim, Outcome
from hookline.shared.policy.delivery import BreakerPolicy, effective_timeout_s
from hookline.shared.policy.retry import Backoff, next_attempt
from hookline.shared.store import Store
from hookline.workers.sender import SendsAttempts
from hookline.workers.writer import Writer

if TYPE_CHECKING:
    from hookline.shared.otel import Tracing

log = get_logger()


class Worker:
    """Delivers jobs until `stop` is set, then hands back what it could not finish.

    Args:
        store: an open store.
        config: settings (lease_s, attempt_timeout_s, worker_concurrency, claim_batch, ...).
        worker_id: this process's lease identity, e.g. `worker-2@host:4242`.
        sender: what makes each attempt: an entered :class:`~hookline.workers.sender.Sender`.
        clock: unix-seconds wall clock, for an HTTP-date `Retry-After` and the logs (a
            retry's delay is added to the store's own clock when its finish is written);
            None: the host's.
        tracing: the process's tracing (a span per attempt); None: off.
    """

    def __init__(self, store: Store, config: Config, worker_id: str, sender: SendsAttempts,
                 clock: Callable[[], float] | None = None,
                 tracing: Tracing | None = None) -> None:
        self.store = store
        self.tracing = tracing
        self.config = config
        self.worker_id = worker_id
        self.sender = sender
        self.clock: Callable[[], float] = clock or time.time
        self.backoff = Backoff(base_s=config.retry_base_s, cap_s=config.retry_cap_s,
                               max_attempts=config.max_attempts)
        self.permanent_statuses = config.permanent_status_set
        # One record of "the database is away" for the whole process: one store_unavailable
        # / store_recovered pair per outage, whoever meets it (claims, finishes, extends).
        self.outage = StoreOutage()
        breaker = BreakerPolicy(failures=config.breaker_failures,
                                window_s=config.breaker_window_s,
                                min_span_s=config.breaker_min_span_s)
        self.writer = Writer(store, config, worker_id, self.send, breaker=breaker,
                             outage=self.outage, clock=self.clock)
        self._stopping = False

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and deliver until `stop` is set; then drain within graceful_timeout_s
        (:meth:`hookline.workers.writer.Writer.stop`)."""
        self._stopping = False
        self.writer.start()
        helpers = [asyncio.create_task(self._listen_for_jobs())]
        stopped = asyncio.ensure_future(stop.wait())
        try:
            # The write loop ends early only by raising (a fault that is not transient);
            # stop() then raises it, after the drain.
            assert self.writer.task is not None
            await asyncio.wait([stopped, self.writer.task], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            self._stopping = True
            try:
                await self.writer.stop()
            finally:
                for helper in helpers:
                    helper.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)

    async def send(self, claim: Claim) -> tuple[Outcome, AttemptResult]:
        """One attempt of `claim` (the writer's :data:`~hookline.workers.writer.Send`): the POST,
        bounded by the destination's timeout, and the outcome it earns."""
        if logs_debug():  # skipped unread: the fields cost microseconds on every delivery
            log.debug("attempt_started", job_id=claim.job_id, attempt=claim.attempt,
                      destination=claim.destination_name, lease_token=claim.lease_token)
        timeout_s = effective_timeout_s(claim.timeout_s, self.config.attempt_timeout_s,
                                        self.config.lease_s)
        if self.tracing is None:
            result = await self.sender.send(claim, timeout_s=timeout_s)
            outcome = next_attempt(claim.attempt, result, self.clock(), self.backoff,
                                   permanent_statuses=self.permanent_statuses)
            return outcome, result
        with self.tracing.attempt(claim) as attempt:
            result = await self.sender.send(attempt.claim, timeout_s=timeout_s)
            outcome = next_attempt(claim.attempt, result, self.clock(), self.backoff,
                                   permanent_statuses=self.permanent_statuses)
            attempt.record(result, outcome)
        return outcome, result

    async def _listen_for_jobs(self) -> None:
        """Tell the writer to look for work on every wake-up from the store (a commit with
        new or replayed jobs) and at least every poll_interval_s (work that comes due by
        time: retries, expired leases). Ends at stop: cancelling alone is not enough, since
        Python 3.11's asyncio.wait_for may swallow a cancel that races a wake-up."""
        while not self._stopping:
            try:
                woken = await self.store.wait_for_jobs(self.config.poll_interval_s)
                if woken and not self.writer.takes_new_work():
                    # On SQLite a commit wakes one worker: let another one take this work.
                    self.store.pass_on_wake_up()
            except Exception as exc:  # noqa: BLE001  (this task must outlive a bad wake-up)
                log.warning("wake_up_failed", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(self.config.poll_interval_s)
            self.writer.look()

"""A worker's slots and its one write loop: finished attempts and claims in one transaction.

One :class:`Writer` per worker process, with one asyncio task. It owns

* the slots: every claim this process holds, each either *sending* (its HTTP attempt runs)
  or *finishing* (its result waits to be written);
* the queue of finished attempts;
* the decision to write: ONE `store.finish_and_claim` call records every queued result and
  claims jobs for the slots free once they are recorded; with no result queued it claims
  alone, when a slot is free and work may be due (the store's wake-up, the poll interval,
  or a claim that came back full). Results queued while no work is known to be due wait up to
  RESULT_LINGER_S for the next wake-up, so that at moderate rates (events up to RESULT_LINGER_S
  apart) the finish and the next claim share one transaction (their sends are already done).
  A job's `finished_at` is still when its answer arrived: each result carries how long it
  waited (AttemptResult.waited_s), and the store subtracts it from the write's instant.

Senders hand a result over with :meth:`Writer.finished` and are answered nothing: the writer
logs the outcome and frees the slot. A busy worker so takes SQLite's single write lock, and
pays for the commit's fsync, once per batch (under a trickle at most once per
`batch_interval_s`, or per GATING_LINGER_S while a queued result gates a destination's next
job; at once when FILLED_ENOUGH results wait) instead of once per attempt and once more per
claim.

Leases are extended by the same loop, so the process has one writer: every `lease_s / 3`
while it holds claims (sending, or results not yet written), ONE `store.extend` call pushes
all of them to now + `lease_s`. Every wait of the loop ends by then, and a write that is
retried while the database is busy or away extends between its tries, so an extension never
waits behind a slow batch past the leases it keeps.

Each claim is sized to the free slots (at most `claim_batch`), keeps the late-retry
reservation (late retries hold at most `late_retry_share` of the slots) and the
per-destination fair share (one destination holds at most `destination_slot_share` of
them); the results being written no longer count toward either.

The quarantine. A job *taken over* (an earlier claim's attempt never finished: its worker
died, maybe killed by this very job, a poison job) may kill this worker too; whatever else
the worker then holds is lost with it: healthy jobs sent but not yet written are sent again
and charged again. So a takeover is sent only when nothing else of this worker is in flight
or unwritten, and it is the claim that guarantees it (shared/store/logic.py, the same on both
backends), not a lock around the send:

* a claim says whether it may take over: only when the worker holds no other claim once the
  results in the same transaction are written (on PostgreSQL the finish commits first:
  either way they are committed before the takeover is sent);
* a claim that may take over and finds a takeover due takes exactly that one (the lowest job
  id) and nothing else; while it is held nothing is claimed, so it is sent alone, and its
  result is written before anything else is claimed (several takeovers go one at a time,
  in job-id order);
* a claim that may not take over skips takeovers but reports one waiting; the worker then
  claims nothing new, sends and writes what it holds (its results are written at once, not
  lingered), and its next claim, in the transaction of its last results, may take over.
  Takeovers so cannot starve under a steady flow. The cost, only while a takeover waits:
  the workers stop claiming fresh work until their attempts in flight end (well under a
  second at normal latencies; at most `attempt_timeout_s` with a hanging destination).

Why not a lock around the send (what this replaced): a claim could mix a takeover with fresh
jobs; the takeover waited for their requests but not for their results, which the writer
batches, and several takeovers in one claim raced for the lock.

A claim that fails as StoreUnavailable may still have committed, leasing jobs this process
never heard of: the writes after it first hand those back (workers/unheard.py).

A database that is busy or away (StoreUnavailable, StoreBusy under it) never drops a result:
a write that records results is retried with capped backoff (0.1 s doubling to 5 s) until it
is written; the lease token fences it, so a late write of a lease that expired meanwhile
changes nothing. A claim alone is retried a few times for StoreBusy, then the next one waits
(capped backoff, never longer than `poll_interval_s`); a result arriving meanwhile is written
at once. One record of the outage is logged per process (shared/faults.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hookline.shared.config import Config
from hookline.shared.errors import StoreBusy, StoreUnavailable
from hookline.shared.faults import CappedBackoff, StoreOutage
from hookline.shared.logs import get_logger, logs_info
from hookline.shared.models import AttemptResult, Claim, ClaimRequest, Dead, Done, Outcome, Retry
from hookline.shared.policy.delivery import destination_slots, late_slots, tenant_slots
from hookline.shared.spacing import FILLED_ENOUGH, wait_out_spacing
from hookline.shared.store import Store
from hookline.workers.unheard import UnheardClaims

log = get_logger()

MAX_BATCH = 256
"""Most results in one transaction."""

RESULT_LINGER_S = 0.05
"""Results queued while no claim is wanted wait up to this long, seconds, for the next
wake-up's claim, so that at moderate rates (events up to 50 ms apart) a finish and the next
claim share one transaction instead of taking the write lock (and an fsync) each: at 50
events/s it halves the workers' transactions and cuts their CPU per delivery by about a
quarter (docs/benchmarks.md, "One transaction per event at everyday rates, again"). Not at all when
`batch_interval_s` is 0 (batching off: every write at once). A result whose destination's next
job waits for it (Claim.gates_next: ordered, at its max_in_flight, at this worker's share of
it or of its tenant, a late retry filling the reservation, or a takeover) waits at most
GATING_LINGER_S instead, or such a destination would get about 20 deliveries a second per
slot."""

GATING_LINGER_S = 0.002
"""How long, seconds, a result with Claim.gates_next waits for others to share its write: a
few results that finish together still share one transaction."""

_BUSY_RETRY_DELAYS_S = (0.05, 0.2, 1.0)

Send = Callable[[Claim], Awaitable[tuple[Outcome, AttemptResult]]]
"""One attempt of a claim: returns its outcome and what happened on the wire."""


class Finished(NamedTuple):
    """One finished attempt, as the store's finish takes it, and when it was queued
    (time.monotonic(), seconds)."""

    claim: Claim
    outcome: Outcome
    result: AttemptResult
    queued_at: float

    def waited(self, now: float) -> tuple[Claim, Outcome, AttemptResult]:
        """The item to write at monotonic `now`: its result carries how long it waited."""
        waited_s = max(0.0, now - self.queued_at)
        return self.claim, self.outcome, dataclasses.replace(self.result, waited_s=waited_s)


class Phase(enum.Enum):
    """Where a held slot is."""

    SENDING = "sending"      # the attempt runs (or waits to run alone)
    FINISHING = "finishing"  # its result is queued or being written


@dataclass(slots=True)
class Slot:
    """One claim this process holds."""

    claim: Claim
    phase: Phase = Phase.SENDING
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """What one transaction did.

    Attributes:
        recorded: each result written, with whether its lease was still held (False: the
            lease was lost, the fenced write changed nothing).
        asked: jobs the claim asked for (0: no claim was made).
        claims: the jobs it claimed.
        takeover_waiting: the claim skipped a job to take over (module docstring).
    """

    recorded: list[tuple[Finished, bool]] = field(default_factory=list)
    asked: int = 0
    claims: list[Claim] = field(default_factory=list)
    takeover_waiting: bool = False

    @property
    def took_all(self) -> bool:
        """The claim took all it asked for: more may be due right now."""
        return self.asked > 0 and len(self.claims) == self.asked


class _ClaimFailed(Exception):
    """A claim alone met a busy or absent database; the writer waits, then claims again."""


class Writer:
    """Owns a worker's slots and writes its results and claims (module docstring).

    Args:
        store: an open store.
        config: worker_concurrency, claim_batch, lease_s, max_attempts,
            late_retry_after_attempts, late_retry_share, destination_slot_share,
            batch_interval_s (least time between two writes while work keeps coming,
            seconds), poll_interval_s, graceful_timeout_s.
        worker_id: the lease identity.
        send: runs one attempt (see :data:`Send`); started once per claim.
        breaker: passed to the store's finish (the circuit-breaker settings).
        outage: the process's record of "the database is away".
        clock: unix seconds, for the retry delay in the job_retry_scheduled log.

    Attributes:
        writes: store transactions attempted so far (finish, claim or both).
    """

    def __init__(self, store: Store, config: Config, worker_id: str, send: Send, *,
                 breaker: Any = None, outage: StoreOutage | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.config = config
        self.worker_id = worker_id
        self._send = send
        self.breaker = breaker
        self.outage = outage if outage is not None else StoreOutage()
        self.clock = clock
        self.late_slots = late_slots(config.worker_concurrency, config.late_retry_share)
        self.destination_slots = destination_slots(config.worker_concurrency,
                                                   config.destination_slot_share)
        self.tenant_slots = tenant_slots(config.worker_concurrency, config.tenant_slot_share)
        self.writes = 0
        self._slots: dict[str, Slot] = {}
        self._finished: collections.deque[Finished] = collections.deque()
        # Set whenever there may be something to do: a result queued, a look asked, stop.
        self._kick = asyncio.Event()
        # Work may be due: claim for free slots (cleared by a claim that comes back short).
        self._look = True
        self._looks = 0  # how many times look() was called: a wake-up during a write
        self._claim_backoff = CappedBackoff()
        self._claim_not_before = 0.0  # monotonic; a failed claim alone waits until then
        self._last_write_at = float("-inf")
        # Results with no claim to share a transaction wait at most this long for one.
        self._linger_s = RESULT_LINGER_S if config.batch_interval_s > 0 else 0.0
        self._linger_until = 0.0  # monotonic; when the oldest queued result stops waiting
        self._stopping = False  # claim nothing more
        self._closing = False   # no attempt runs any more: end once the queue is written
        self._task: asyncio.Task[None] | None = None
        # A claim skipped a takeover: claim nothing until every held claim is written.
        self._takeover_waiting = False
        self._extend_at = 0.0  # monotonic; when the held leases are next extended
        self._spacing = False  # waiting out the spacing (_let_the_batch_fill)
        self.unheard = UnheardClaims(store, worker_id, config.lease_s)

    # -- what others call -------------------------------------------------------------------

    def start(self) -> None:
        """Start the write loop (needs a running event loop)."""
        self._stopping = self._closing = False
        self._task = asyncio.create_task(self._run(), name="writer")

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The write loop's task (None before :meth:`start`). It ends on its own only by
        raising: a store fault that is not transient."""
        return self._task

    def _running_writer(self) -> list[asyncio.Task[None]]:
        return [self._task] if self._task is not None and not self._task.done() else []

    def look(self) -> None:
        """Work may be due (the store's wake-up, the poll interval): claim for free slots."""
        self._look = True
        self._looks += 1
        self._kick.set()

    def takes_new_work(self) -> bool:
        """Whether a wake-up should be taken here rather than passed on to another worker:
        a claim could be made now (not stopping, no takeover to drain for, a free slot) and
        fewer than half the slots are held, so busy workers share new work at higher rates."""
        return (self._claim_request([]) is not None
                and 2 * len(self._slots) < self.config.worker_concurrency)

    def finished(self, claim: Claim, outcome: Outcome, result: AttemptResult) -> None:
        """Queue the result of `claim`'s attempt for the next write. Its slot stays held until
        that write returns."""
        slot = self._slots.get(claim.lease_token)
        if slot is not None:
            slot.phase = Phase.FINISHING
        now = time.monotonic()
        if not self._finished:
            self._linger_until = now + self._linger_s
        if claim.gates_next:
            self._linger_until = min(self._linger_until, now + min(self._linger_s,
                                                                    GATING_LINGER_S))
        self._finished.append(Finished(claim, outcome, result, now))
        # While the writer waits out the spacing, only what ends that wait wakes it.
        if not self._spacing or claim.gates_next or len(self._finished) >= FILLED_ENOUGH:
            self._kick.set()

    def held(self) -> list[Claim]:
        """Every claim this process holds (sending or finishing): the leases to extend."""
        return [slot.claim for slot in self._slots.values()]

    def sending(self, lease_token: str) -> bool:
        """Whether the claim with `lease_token` is held and its result not yet queued."""
        slot = self._slots.get(lease_token)
        return slot is not None and slot.phase is Phase.SENDING

    async def stop(self) -> None:
        """Claim nothing more; let attempts in flight finish within graceful_timeout_s, cancel
        the rest; write every queued result, then hand back (uncharged) the claims whose
        attempt never finished, and those of a claim that may have landed unheard
        (workers/unheard.py) while that is still due.

        Raises:
            StoreUnavailable: the hand-back could not be written (the leases expire instead).
            Exception: what ended the write loop early (a store fault that is not
                transient); nothing is handed back then.
        """
        self._stopping = True
        self._kick.set()
        deadline = time.monotonic() + self.config.graceful_timeout_s
        # Looked at again after each wait: a write under way at stop may still start claims.
        while pending := [slot.task for slot in self._slots.values()
                          if slot.task is not None and not slot.task.done()]:
            writer = self._running_writer()  # none: it failed, nothing would record results
            remaining_s = deadline - time.monotonic()
            if remaining_s > 0 and writer:
                await asyncio.wait([*pending, *writer], timeout=remaining_s,
                                   return_when=asyncio.FIRST_COMPLETED)
                continue
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self._closing = True
        self._kick.set()
        if self._task is not None:
            await self._task  # ends once every queued result is written
            self._task = None
        if self.unheard.in_window():
            with contextlib.suppress(StoreUnavailable, StoreBusy):  # their leases expire
                await self.unheard.hand_back(list(self._slots))
        unsent = [slot.claim for slot in self._slots.values() if slot.phase is Phase.SENDING]
        self._slots.clear()
        if unsent:
            handed = await self.store.hand_back(unsent)
            for claim in unsent:
                log.info("job_handed_back", job_id=claim.job_id, event_id=claim.event_id,
                         destination=claim.destination_name, tenant=claim.tenant_id,
                         lease_token=claim.lease_token, reason="graceful stop")
            log.info("worker_drained", handed_back=handed)

    # -- the write loop ---------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._kick.clear()  # before looking: whatever sets it from now on is seen
            if self._extend_in_s() == 0.0:
                await self._extend()
            claim_wait_s = self._claim_wait_s()
            if (self._finished and not self._look and not self._stopping
                    and len(self._finished) < MAX_BATCH
                    and (linger_s := self._linger_until - time.monotonic()) > 0):
                # Results alone, no work known to be due: wait briefly for the next look (a
                # wake-up) so they share its claim's transaction; the sends are done, only
                # their record waits. With work due, results are written at once: they free
                # the slots the claim needs.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._kick.wait(),
                                           _sooner(linger_s, self._extend_in_s()))
                continue
            if not self._finished and claim_wait_s != 0.0:
                if self._closing:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._kick.wait(),
                                           _sooner(claim_wait_s, self._extend_in_s()))
                continue
            await self._let_the_batch_fill()
            self._last_write_at = time.monotonic()
            batch = [self._finished.popleft()
                     for _ in range(min(MAX_BATCH, len(self._finished)))]
            looks = self._looks
            try:
                written = await self._write(batch)
            except _ClaimFailed:
                continue
            self._apply(written)
            if self._looks != looks:
                # A wake-up came while the write ran: its work may have committed after the
                # claim read, so the claim coming back short says nothing of it. Look again.
                self._look = True

    async def _let_the_batch_fill(self) -> None:
        """Wait until the spacing (:meth:`_spacing_s`) after the last write's start has
        passed; FILLED_ENOUGH results queued, a result that gates a destination's next job
        (2 ms then) or a stop end the wait, also when they arrive during it."""
        self._spacing = True
        try:  # (the write loop looks again at everything once it writes)
            await wait_out_spacing(
                self._kick, lambda: self._last_write_at + self._spacing_s() - time.monotonic(),
                lambda: self._stopping or len(self._finished) >= FILLED_ENOUGH)
        finally:
            self._spacing = False

    def _spacing_s(self) -> float:
        """Least time, seconds, from the last write's start to the next one's: the batch
        interval, or at most GATING_LINGER_S while a queued result gates a destination's
        next job (a one-at-a-time destination must not wait the whole interval per
        delivery)."""
        spacing_s = self.config.batch_interval_s
        if spacing_s > GATING_LINGER_S and any(f.claim.gates_next for f in self._finished):
            return GATING_LINGER_S
        return spacing_s

    def _extend_in_s(self) -> float | None:
        """Seconds until the held leases are due for extension (0: now); None: none held."""
        if not self._slots:
            return None
        return max(0.0, self._extend_at - time.monotonic())

    async def _extend(self) -> None:
        """Extend every held lease in one store call (module docstring). A failure is tried
        again at the next interval; a lease that expires meanwhile is fenced. A lease found
        lost while its attempt is still sending is logged `lease_lost` (a claim whose
        result is queued learns it when the result is written)."""
        claims = self.held()
        self._extend_at = time.monotonic() + self.config.lease_s / 3
        try:
            lost = await self.store.extend(claims, self.config.lease_s)
        except StoreUnavailable as exc:
            self.outage.failed(exc, during="extend")
            log.debug("lease_extend_failed", error=str(exc), leases=len(claims))
            return
        self.outage.succeeded()
        log.debug("lease_extended", leases=len(claims) - len(lost))
        for claim in lost:
            if self.sending(claim.lease_token):
                log.warning("lease_lost", job_id=claim.job_id, event_id=claim.event_id,
                            lease_token=claim.lease_token, during="extend")

    def _claim_wait_s(self) -> float | None:
        """0 when a claim alone is due now; seconds until a failed claim may be retried; None
        when there is nothing to claim until something changes."""
        if not self._look or self._claim_request([]) is None:
            return None
        return max(0.0, self._claim_not_before - time.monotonic())

    async def _write(self, batch: list[Finished]) -> Written:
        """One transaction, retried while the database is busy or away (module docstring).
        Raises _ClaimFailed when a claim alone failed (the next one is delayed)."""
        busy_delays = iter(_BUSY_RETRY_DELAYS_S)
        backoff = CappedBackoff()
        during = "finish" if batch else "claim"
        while True:
            request = self._claim_request(batch)
            if request is None and not batch:
                return Written()  # nothing left to claim for (stop, a take-over) since the look
            self.writes += 1
            now = time.monotonic()
            items = [finished.waited(now) for finished in batch]
            try:
                if self.unheard.due():
                    await self.unheard.hand_back(list(self._slots))
                waiting = False
                if request is None:
                    kept = await self.store.finish(items, breaker=self.breaker)
                    claims: list[Claim] = []
                else:
                    kept, claims, waiting = await self.store.finish_and_claim(
                        items, self.breaker, request)
            except StoreBusy as exc:
                delay_s = next(busy_delays, None)
                if delay_s is None:
                    self.outage.failed(exc, during=during)
                    if not batch:
                        raise self._claim_failed() from exc
                    delay_s = backoff.next_delay_s()
                log.warning("finish_busy", attempts=len(batch), retry_in_s=delay_s)
                await self._sleep_extending(delay_s)
                continue
            except StoreUnavailable as exc:
                if request is not None:  # its commit may have landed unheard
                    self.unheard.claim_failed()
                self.outage.failed(exc, during=during)
                if not batch:
                    raise self._claim_failed() from exc
                await self._sleep_extending(backoff.next_delay_s())
                continue
            self.outage.succeeded()
            self._claim_backoff.reset()
            self._claim_not_before = 0.0
            return Written(recorded=list(zip(batch, kept, strict=True)),
                           asked=request.limit if request is not None else 0, claims=claims,
                           takeover_waiting=waiting)

    async def _sleep_extending(self, delay_s: float) -> None:
        """Sleep `delay_s` before a write's next try, extending the held leases on time."""
        deadline = time.monotonic() + delay_s
        while (left_s := deadline - time.monotonic()) > 0:
            extend_in_s = self._extend_in_s()
            if extend_in_s == 0.0:
                await self._extend()
                continue
            await asyncio.sleep(left_s if extend_in_s is None else min(left_s, extend_in_s))

    def _claim_failed(self) -> _ClaimFailed:
        # Never slower than an idle worker's poll, so work resumes within about
        # poll_interval_s of the database's return.
        delay_s = min(self._claim_backoff.next_delay_s(), self.config.poll_interval_s)
        self._claim_not_before = time.monotonic() + delay_s
        return _ClaimFailed()

    def _claim_request(self, batch: list[Finished]) -> ClaimRequest | None:
        """The claim to make once `batch` is recorded (its slots count as free), or None:
        stopping, a taken-over claim held outside the batch, a takeover waiting while other
        claims are held (the quarantine: module docstring), or no free slot."""
        if self._stopping:
            return None
        leaving = {f.claim.lease_token for f in batch}
        staying = [slot.claim for token, slot in self._slots.items() if token not in leaving]
        if any(claim.taken_over for claim in staying):
            return None  # it is sent alone: nothing is claimed until its result is written
        if staying and self._takeover_waiting:
            return None  # drain first; the claim made once nothing is held may take it over
        free = self.config.worker_concurrency - len(staying)
        if free <= 0:
            return None
        cfg = self.config
        late_after = cfg.late_retry_after_attempts
        late_held = sum(1 for claim in staying if claim.attempt > late_after)
        return ClaimRequest(worker=self.worker_id, limit=min(free, cfg.claim_batch),
                            lease_s=cfg.lease_s, max_attempts=cfg.max_attempts,
                            late_after=late_after, max_late=max(0, self.late_slots - late_held),
                            per_destination=self.destination_slots,
                            held=Counter(claim.destination_id for claim in staying),
                            may_take_over=not staying, per_tenant=self.tenant_slots,
                            held_tenants=Counter(claim.tenant_id for claim in staying),
                            token_tag=self.unheard.tag)

    def _apply(self, written: Written) -> None:
        """Free the slots of the results written, log them, start the claims."""
        now_s = self.clock()
        for finished, kept in written.recorded:
            self._slots.pop(finished.claim.lease_token, None)
            log_outcome(finished, kept, now_s)
        self.unheard.given(written.claims)
        for claim in written.claims:
            self._start(claim)
        if written.asked:
            self._takeover_waiting = written.takeover_waiting
            # Full: more may be due right now. A takeover waiting while claims are held: the
            # drain writes each result at once (no linger), so the takeover is claimed soon.
            self._look = written.took_all or (written.takeover_waiting and bool(self._slots))

    # -- attempts ---------------------------------------------------------------------------

    def _start(self, claim: Claim) -> None:
        if logs_info():  # one per delivery: its fields are not built when nobody reads them
            log.info("job_claimed", job_id=claim.job_id, event_id=claim.event_id,
                     worker=self.worker_id, destination=claim.destination_name,
                     tenant=claim.tenant_id, attempt=claim.attempt,
                     lease_token=claim.lease_token, lease_until=claim.lease_until)
        if claim.taken_over:
            log.info("job_taken_over", job_id=claim.job_id, event_id=claim.event_id,
                     worker=self.worker_id, lease_token=claim.lease_token,
                     attempt=claim.attempt)
        if not self._slots:  # the first lease held: extended lease_s / 3 from now
            self._extend_at = time.monotonic() + self.config.lease_s / 3
        slot = Slot(claim)
        self._slots[claim.lease_token] = slot
        slot.task = asyncio.create_task(self._attempt(slot))

    async def _attempt(self, slot: Slot) -> None:
        """Send `slot`'s claim and queue its result. A cancel (graceful stop) before the
        result arrives leaves the slot sending: it is handed back. A taken-over claim needs
        no care here: the claim gave it to a worker holding nothing else (module docstring)."""
        try:
            outcome, result = await self._send(slot.claim)
        except Exception as exc:  # noqa: BLE001  (a bug in one attempt must not leak its slot)
            # Nothing is written: its lease expires and the job is taken over (quarantined).
            log.error("attempt_crashed", job_id=slot.claim.job_id,
                      lease_token=slot.claim.lease_token,
                      error=f"{type(exc).__name__}: {exc}")
            self._slots.pop(slot.claim.lease_token, None)
            self.unheard.abandoned(slot.claim.lease_token)
            self.look()
            return
        self.finished(slot.claim, outcome, result)


def _sooner(wait_s: float | None, other_s: float | None) -> float | None:
    """The shorter of two waits, seconds (None: no limit)."""
    return wait_s if other_s is None else other_s if wait_s is None else min(wait_s, other_s)


def log_outcome(finished: Finished, kept: bool, now_s: float) -> None:
    """Log what a written result did: job_done, job_retry_scheduled, job_dead (with
    attempt_failed before a failure), or lease_lost when the fenced write changed nothing."""
    claim, outcome, result = finished.claim, finished.outcome, finished.result
    done = isinstance(outcome, Done)
    if kept and done and not logs_info():
        return  # the common case, when info lines are not written: nothing to build
    # The destination's tenant with its name: names are unique only within a tenant.
    ids = {"job_id": claim.job_id, "event_id": claim.event_id,
           "destination": claim.destination_name, "tenant": claim.tenant_id,
           "attempt": claim.attempt,
           "lease_token": claim.lease_token, "duration_s": round(result.duration_s, 4),
           "status": result.status_code}
    if not done:
        log.info("attempt_failed", error=result.error, **ids)
    if not kept:
        log.warning("lease_lost", during="finish", **ids)
    elif done:
        log.info("job_done", **ids)
    elif isinstance(outcome, Retry):
        # run_at as this host's clock puts it; the store counted the delay on its own.
        log.info("job_retry_scheduled", run_at=now_s + outcome.delay_s, reason=outcome.error,
                 retry_in_s=round(outcome.delay_s, 3), **ids)
    elif isinstance(outcome, Dead):
        log.warning("job_dead", reason=outcome.error, **ids)

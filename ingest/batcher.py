"""Write batching: many concurrent callers share one store call.

Each caller hands its item to :meth:`Batcher.submit` and waits. One background task takes
everything queued (up to `max_batch`), passes it to ONE `write` call, and then answers every
waiter of that batch with its own result. While a batch is being written, new items queue for
the next one, so under load batches grow by themselves; a lone item on an idle process is written
at once. With `min_interval_s`, writes that follow one another closely are spaced at least
that far apart (unless FILLED_ENOUGH items wait already): under a steady trickle (500 events/s
arriving one by one) each commit then carries several items instead of one, so the
database's single writer lock is taken less often and its fixed cost is paid less often. It
adds at most `min_interval_s` of latency, only when the previous write started less than
that before and fewer than FILLED_ENOUGH items wait; flat out, where batches fill while the
previous one is written, it adds none, nor to what a batch's limit (below) left queued.

Under load a batch takes at most half of the work outstanding at the recent peak (queued
and being written; never fewer than FILLED_ENOUGH items): the callers then form two groups
that take turns, one being written while the other is being read and answered, instead of
all of them waiting on one write and the write waiting on all of them. Measured with 64
connections and the writer process, it served 15 to 20 % more events per second than
whole-queue batches (docs/benchmarks.md, "Ingest's two halves").

With `timeout_s`, no caller waits longer than that from its submit, however long a write
takes (a database behind a silent network): it gets :class:`WriteTimedOut` (a
StoreUnavailable, so ingest answers 503 with Retry-After), and a write still running past
`timeout_s` is cancelled so the items queued behind it go on to the next one. One timer per
batcher keeps every caller's deadline (the oldest caller's is always the next due): a timer
and a shielded wait per request cost ingest about 4 µs of CPU per event. A timed-out
item's outcome is unknown (its write may have committed): the client retries with the same
id, which dedupe makes safe. :attr:`Batcher.failing_since` says whether the last write
failed, for readiness (ingest/health.py).

Used by ingest's group commit (events + jobs, one transaction per batch). The workers do not
use it: each has one writer task that owns its slots (workers/writer.py).
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from hookline.shared.errors import StoreClosing, StoreUnavailable
from hookline.shared.logs import get_logger
from hookline.shared.spacing import FILLED_ENOUGH, wait_out_spacing

Item = TypeVar("Item")
Result = TypeVar("Result")

_PEAK_DECAY = 0.98
"""The outstanding work's remembered peak shrinks by this factor per batch, so a load that
fell is forgotten within a few hundred batches (a load that rose counts at once)."""


class BatcherStopped(StoreClosing):
    """`submit` was called after `stop()` (or before `start()`): the process is shutting
    down; the caller should retry elsewhere or later."""


class WriteTimedOut(StoreUnavailable):
    """An item's write did not finish within the batcher's `timeout_s`: its outcome is
    unknown (it may yet have been committed)."""


_Waiting = tuple[Item, "asyncio.Future[Result]", float]


class Batcher(Generic[Item, Result]):
    """Queues items and writes them in batches.

    Args:
        write: called with a batch (a non-empty list, in submission order); must return one
            result per item, in the same order. An exception it raises is raised to every
            waiter of that batch.
        max_batch: most items in one call.
        name: the background task's name and the `batch_failed` log field `batcher`.
        min_interval_s: least time between the starts of two writes while items keep
            coming, seconds (0 = write as soon as the previous write ends).
        timeout_s: longest a submit waits, and a write may run, seconds (None = no bound).

    Attributes:
        batches: `write` calls made so far (successful or not).
        written: items in `write` calls that returned.
        failing_since: time.monotonic() of the first failed (or timed-out) write since the
            last one that succeeded; None while writes succeed.
        last_error: what the last failed write raised ("" when none failed).
    """

    def __init__(self, write: Callable[[list[Item]], Awaitable[Sequence[Result]]], *,
                 max_batch: int, name: str, min_interval_s: float = 0.0,
                 timeout_s: float | None = None) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._write = write
        self.max_batch = max_batch
        self.name = name
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self.failing_since: float | None = None
        self.last_error = ""
        self._last_write_at = float("-inf")
        self.batches = 0
        self.written = 0
        # (item, its caller's future, its deadline: the event loop's time, seconds, or inf)
        self._queue: collections.deque[_Waiting[Item, Result]] = collections.deque()
        self._in_flight: list[_Waiting[Item, Result]] = []  # the batch being written
        self._peak = 0.0  # most items outstanding lately (see _take_batch)
        self._split = False  # the last batch left items queued at its limit
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._wakeup = asyncio.Event()
        self._spacing = False  # waiting out min_interval_s (see _let_the_batch_fill)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def writing(self) -> bool:
        """True while a write is in progress."""
        return bool(self._in_flight)

    def recovered(self) -> None:
        """Forget a past failure (a probe on the same store succeeded while no write ran)."""
        self.failing_since = None

    @property
    def running(self) -> bool:
        """True between :meth:`start` and the end of :meth:`stop`."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the background task (idempotent; needs a running event loop)."""
        if self.running:
            return
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Write what is already queued, then end the background task (idempotent)."""
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None
        if self._deadline_timer is not None:  # everything queued has been answered
            self._deadline_timer.cancel()
            self._deadline_timer = None

    async def settle(self) -> None:
        """Wait until everything queued so far has been written."""
        while self._queue or self._in_flight:  # noqa: ASYNC110  (tests and shutdown only)
            await asyncio.sleep(0.005)

    async def submit(self, item: Item) -> Result:
        """Queue `item` for the next batch and wait until that batch is written.

        Returns:
            `write`'s result for this item.

        Raises:
            BatcherStopped: stopping, or never started.
            WriteTimedOut: not written within `timeout_s` (its outcome is unknown).
            Exception: whatever `write` raised for the batch.
        """
        if self._stopping or not self.running:
            raise BatcherStopped(f"{self.name} is not accepting work (shutting down)")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        deadline = math.inf
        if self.timeout_s is not None:
            deadline = loop.time() + self.timeout_s
            if self._deadline_timer is None:
                self._deadline_timer = loop.call_at(deadline, self._expire_overdue)
        self._queue.append((item, future, deadline))
        self._peak = max(self._peak, len(self._queue) + len(self._in_flight))
        if not self._spacing or len(self._queue) >= FILLED_ENOUGH:
            self._wakeup.set()  # while spacing, only a batch filled enough ends the wait
        # If this waiter is cancelled, its future is cancelled too and the batch skips it:
        # nobody was answered, so it need not be written.
        return await future

    def _expire_overdue(self) -> None:
        """The deadline timer: every caller whose deadline has passed gets WriteTimedOut (a
        queued item is then skipped; one being written has an unknown outcome); the timer
        is set again for the oldest caller still waiting, if any. Callers wait in submit
        order, so the in-flight batch's come first and each group's are in order."""
        self._deadline_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        next_deadline = math.inf
        for waiting in (self._in_flight, self._queue):
            for _, future, deadline in waiting:
                if future.done():
                    continue
                if deadline > now:
                    next_deadline = min(next_deadline, deadline)
                    break
                future.set_exception(WriteTimedOut(self._timeout_message()))
                if self.failing_since is None:
                    self.failing_since = time.monotonic()
                self.last_error = f"WriteTimedOut: {self._timeout_message()}"
        if next_deadline < math.inf:
            self._deadline_timer = loop.call_at(next_deadline, self._expire_overdue)

    def _timeout_message(self) -> str:
        return (f"{self.name}: not written within {self.timeout_s:g} s; the outcome is "
                "unknown, send it again (the same id is recognised)")

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._stopping:
                    return
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            if not self._split:  # a split's remainder is load, not a trickle: no spacing
                await self._let_the_batch_fill()
            batch = self._take_batch()
            if batch:
                self._last_write_at = time.monotonic()
                self._in_flight = batch
                try:
                    await self._write_batch(batch)
                finally:
                    self._in_flight = []

    async def _let_the_batch_fill(self) -> None:
        """Wait until `min_interval_s` after the last write's start (module docstring); a
        queue filled enough (FILLED_ENOUGH, or `max_batch`) or a stop ends the wait at once,
        also when it fills during the wait."""
        self._spacing = True
        try:
            await wait_out_spacing(
                self._wakeup,
                lambda: self._last_write_at + self.min_interval_s - time.monotonic(),
                lambda: (self._stopping
                         or len(self._queue) >= min(self.max_batch, FILLED_ENOUGH)))
        finally:
            self._spacing = False

    def _take_batch(self) -> list[_Waiting[Item, Result]]:
        """The next batch: at most half of the recent peak of outstanding items (module
        docstring), at least FILLED_ENOUGH, at most max_batch; items nobody waits for any
        more (cancelled, timed out) are dropped."""
        limit = min(self.max_batch, max(FILLED_ENOUGH, math.ceil(self._peak / 2)))
        self._peak = max(float(len(self._queue)), self._peak * _PEAK_DECAY)
        batch: list[_Waiting[Item, Result]] = []
        while self._queue and len(batch) < limit:
            waiting = self._queue.popleft()
            if not waiting[1].done():
                batch.append(waiting)
        self._split = bool(self._queue)
        return batch

    async def _write_batch(self, batch: list[_Waiting[Item, Result]]) -> None:
        self.batches += 1
        try:
            if self.timeout_s is None:
                results = await self._write([item for item, _, _ in batch])
            else:
                try:
                    results = await asyncio.wait_for(self._write([item for item, _, _ in batch]),
                                                     self.timeout_s)
                except TimeoutError:
                    raise WriteTimedOut(self._timeout_message()) from None
            if len(results) != len(batch):
                raise RuntimeError(f"{self.name} wrote {len(batch)} items but got "
                                   f"{len(results)} results")
        except asyncio.CancelledError:
            # Our task is being cancelled (loop teardown): nobody will answer these waiters.
            for _, future, _ in batch:
                future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001  (every waiter must learn of any failure)
            if self.failing_since is None:
                self.failing_since = time.monotonic()
            self.last_error = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, StoreUnavailable):  # its callers log an outage once
                get_logger().warning("batch_failed", batcher=self.name, items=len(batch),
                                     error=type(exc).__name__)
            for _, future, _ in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self.written += len(batch)
        self.failing_since = None
        for (_, future, _), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

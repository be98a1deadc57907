"""Group commit: many concurrent requests share one store transaction.

Each request hands its event to :meth:`GroupCommitter.submit` and waits. One background task
takes everything queued (up to `max_batch`), stores it with ONE `store.add_events` call, and
then answers every waiter of that batch. While a batch commits, new requests queue up for the
next one, so under load the batch size grows by itself and no timer delay is ever added; an
idle server commits a lone request at once. A request is answered only after the commit that
holds its event (DESIGN.md invariant 1).
"""

from __future__ import annotations

import asyncio
import collections

from shared.errors import StoreBusy
from shared.logs import get_logger
from shared.models import Accepted, Duplicate, NewEvent
from shared.store import Store

DEFAULT_MAX_BATCH = 512


class CommitterStopped(StoreBusy):
    """`submit` was called after `stop()`: the process is shutting down; retry elsewhere."""


class GroupCommitter:
    """Batches concurrent `add_events` calls into one transaction each.

    Args:
        store: an open store.
        max_batch: most events in one transaction.

    Attributes:
        batches: `add_events` calls made so far (successful or not).
        committed: events passed to `add_events` calls that returned (accepted or duplicate).
    """

    def __init__(self, store: Store, *, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.store = store
        self.max_batch = max_batch
        self.batches = 0
        self.committed = 0
        self._queue: collections.deque[tuple[NewEvent, asyncio.Future[Accepted | Duplicate]]] = (
            collections.deque())
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._log = get_logger()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and the end of :meth:`stop`."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the background task (idempotent; needs a running event loop)."""
        if self.running:
            return
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="group-commit")

    async def stop(self) -> None:
        """Commit what is already queued, then end the background task (idempotent)."""
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def submit(self, event: NewEvent) -> Accepted | Duplicate:
        """Queue `event` for the next batch and wait until that batch has committed.

        Returns:
            The store's result for this event.

        Raises:
            CommitterStopped: the committer is stopping or was never started.
            StoreBusy, StoreError, ...: whatever `add_events` raised for the batch.
        """
        if self._stopping or not self.running:
            raise CommitterStopped("ingest is not accepting events (shutting down)")
        future: asyncio.Future[Accepted | Duplicate] = asyncio.get_running_loop().create_future()
        self._queue.append((event, future))
        self._wakeup.set()
        # If this waiter is cancelled (its client went away), the future is cancelled too and
        # the committer skips it: it was never answered, so it need not be stored.
        return await future

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._stopping:
                    return
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            batch = self._take_batch()
            if batch:
                await self._commit(batch)

    def _take_batch(self) -> list[tuple[NewEvent, asyncio.Future[Accepted | Duplicate]]]:
        batch: list[tuple[NewEvent, asyncio.Future[Accepted | Duplicate]]] = []
        while self._queue and len(batch) < self.max_batch:
            event, future = self._queue.popleft()
            if not future.done():  # done here means cancelled: nobody waits for it
                batch.append((event, future))
        return batch

    async def _commit(self, batch: list[tuple[NewEvent, asyncio.Future[Accepted | Duplicate]]]
                      ) -> None:
        self.batches += 1
        try:
            results = await self.store.add_events([event for event, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"add_events returned {len(results)} results "
                                   f"for {len(batch)} events")
        except asyncio.CancelledError:
            # Our task is being cancelled (loop teardown): nobody will answer these waiters.
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001  (every waiter must learn of any failure)
            self._log.warning("batch_failed", events=len(batch), error=type(exc).__name__)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self.committed += len(batch)
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

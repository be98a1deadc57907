"""Group commit: many concurrent requests share one store transaction.

Each request hands its event to :meth:`GroupCommitter.submit` and waits; the batcher
(ingest/batcher.py) stores everything queued with ONE `store.add_events` call and then answers
every waiter of that batch. Under load batches grow by themselves with no timer delay; an idle
server commits a lone request at once. A request is answered only after the commit that holds
its event, so a 2xx answer always means the event and its jobs are durable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from hookline.ingest.batcher import Batcher, BatcherStopped
from hookline.ingest.writer_link import WriterLink
from hookline.shared.metrics_catalog import BATCH_SIZE_BUCKETS
from hookline.shared.models import NewEvent, StoreResult
from hookline.shared.process.metrics_file import Histogram
from hookline.shared.store import Store

if TYPE_CHECKING:
    from hookline.shared.otel import Tracing

DEFAULT_MAX_BATCH = 512

CommitterStopped = BatcherStopped
"""`submit` was called after `stop()`: ingest is shutting down (answered 503, retry)."""


class GroupCommitter(Batcher[NewEvent, StoreResult]):
    """Batches concurrent `add_events` calls into one transaction each.

    Args:
        store: an open store.
        max_batch: most events in one transaction.
        min_interval_s: least time between two commits while events keep arriving, seconds
            (Config.batch_interval_s; see ingest/batcher.py).
        timeout_s: longest an event waits for its commit, seconds (Config.
            ingest_commit_timeout_s); past it submit raises WriteTimedOut (None = no bound).
        create_tenants: an event for an unknown tenant creates it (Config.
            tenants_auto_create) instead of being refused.
        tracing: the process's tracing: each commit is a `hookline.group_commit` span, the
            child of its first traced request and linked to the others
            (hookline.shared.otel); None: off.
        writer: commit through the ingest writer process (ingest/writer_link.py) instead of
            `store` (`ingest_writer = process`); None: `store.add_events`.

    Attributes:
        batches: `add_events` calls made so far (successful or not).
        committed: events passed to `add_events` calls that returned (accepted or duplicate).
        batch_sizes: events per `add_events` call (/metrics: hookline_ingest_batch_size).

    `submit(event)` returns the store's result for the event, or raises CommitterStopped, or
    whatever `add_events` raised for its batch (StoreBusy, StoreError, ...).
    """

    def __init__(self, store: Store, *, max_batch: int = DEFAULT_MAX_BATCH,
                 min_interval_s: float = 0.0, timeout_s: float | None = None,
                 create_tenants: bool = False, tracing: Tracing | None = None,
                 writer: WriterLink | None = None) -> None:
        super().__init__(self._add_events, max_batch=max_batch, name="group-commit",
                         min_interval_s=min_interval_s, timeout_s=timeout_s)
        self.store = store
        self.create_tenants = create_tenants
        self.tracing = tracing
        self.batch_sizes = Histogram(BATCH_SIZE_BUCKETS)
        self.writer = writer
        self._commit_events: Callable[..., Awaitable[Sequence[StoreResult]]] = (
            store.add_events if writer is None else writer.add_events)

    async def _add_events(self, events: list[NewEvent]) -> Sequence[StoreResult]:
        self.batch_sizes.observe(len(events))
        if self.tracing is None:
            return await self._commit_events(events, create_tenants=self.create_tenants)
        with self.tracing.commit([e.trace_context for e in events]):
            return await self._commit_events(events, create_tenants=self.create_tenants)

    @property
    def committed(self) -> int:
        """Events in `add_events` calls that returned."""
        return self.written

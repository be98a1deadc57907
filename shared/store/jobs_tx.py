"""Writing delivery jobs, the one way every transaction does it (ingest, operational events,
a test delivery): each job takes its destination's `ordered` (jobs.ordered, the index of an
ordered destination's head), read under the guard that keeps a change of `ordered` from
crossing the write (:class:`hookline.shared.store.ops.OrderedMarks`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.ops import WRITES_JOBS, Query, Rows, Tx


def insert_jobs_tx(pairs: Sequence[tuple[int, int]], deltas: MetricDeltas) -> Tx[list[Any]]:
    """One pending job, due now, per (event id, destination id) pair, in ONE query (ingest's
    hot path), each counted pending in `deltas` (the figures /metrics reads); returns their
    rows (`id`, `event_id`, `destination_id`) in the pairs' order. A pair whose destination
    was removed since the caller read it live (PostgreSQL: another transaction committed the
    removal meanwhile) gets no job, no row and no count."""
    yield WRITES_JOBS
    found: list[Any] = yield Query("insert_jobs", {"pairs": Rows(("event_ids", "destination_ids"),
                                                                 pairs)}, per_row=True)
    for r in found:
        deltas.jobs(r["destination_id"], None, "pending")
    return found

"""Payload filters at fan-out, inside ingest's transaction (shared/store/ingest_tx.py), and the
dry run that matches a filter against stored events.

After the subscription index has said which destinations an event reaches, one query reads the
filters of those destinations (few: most have none, and then nothing else happens); each is
compiled once per text and kept (:class:`hookline.shared.policy.filters.FilterCache`), so a
batch costs a dictionary lookup per filtered destination, one parse of each event's body that
meets a filter on `data`, and one predicate call per (event, filtered destination). The
tenants' metadata is read (one query) only when a filter names `tenant`. An event a filter
turns away gets no job for that destination and counts in its `filtered` figure
(metric_counts family `filtered`, label ``""``: /metrics `hookline_events_filtered_total`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hookline.shared.endpoint_models import subscribes
from hookline.shared.models import NewEvent
from hookline.shared.policy.filters import (
    MISSING,
    CompiledFilter,
    FilterCache,
    compile_filter,
    event_data,
    event_document,
)
from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.ops import Query, Rows, Tx, one

_COMPILED = FilterCache()
"""Every filter this process has met, compiled (shared by every store of the process: the
key holds the destination id and the filter's text, so two databases cannot mix them up)."""


@dataclass(slots=True)
class FanOutFilters:
    """The filters of the destinations one batch reaches, and what they turned away.

    Attributes:
        compiled: destination id -> its compiled filter (destinations without one absent).
        metadata: tenant id -> its metadata (read only when a filter names `tenant`).
        filtered: destination id -> events turned away in this batch.
    """

    compiled: dict[int, CompiledFilter]
    metadata: dict[str, Any] = field(default_factory=dict)
    filtered: dict[int, int] = field(default_factory=dict)

    def select(self, event: NewEvent, destination_ids: Sequence[int]) -> Sequence[int]:
        """The destinations of `destination_ids` whose filter lets `event` through (the
        document is built, and the body parsed, at most once per event)."""
        doc: dict[str, Any] | None = None
        kept: list[int] | None = None
        for i, destination_id in enumerate(destination_ids):
            compiled = self.compiled.get(destination_id)
            if compiled is None:
                if kept is not None:
                    kept.append(destination_id)
                continue
            if doc is None:
                doc = self._document(event)
            if compiled.predicate(doc):
                if kept is not None:
                    kept.append(destination_id)
                continue
            if kept is None:
                kept = list(destination_ids[:i])
            self.filtered[destination_id] = self.filtered.get(destination_id, 0) + 1
        return destination_ids if kept is None else kept

    def _document(self, event: NewEvent) -> dict[str, Any]:
        return event_document(
            event_type=event.type, source=event.source,
            data=event_data(event.body, bool(event.forwarded_headers)),
            tenant=event.tenant, metadata=self.metadata.get(event.tenant))

    def count(self, deltas: MetricDeltas) -> None:
        """Add what was turned away to the transaction's metric deltas."""
        for destination_id, n in self.filtered.items():
            deltas.filtered(destination_id, n)


def load_filters(texts: Mapping[int, str],
                 tenants: Sequence[str]) -> Tx[FanOutFilters | None]:
    """The compiled filters of the destinations fan-out reached that have one, with the
    batch's tenants' metadata when a filter reads `tenant`; None when there are none (the
    common case: nothing to do, nothing read).

    Args:
        texts: {reached destination id: its filter's JSON text}, as fan-out read them in the
            caller's transaction (destinations without a filter left out).
        tenants: the batch's tenants (their metadata is read when a filter names `tenant`).
    """
    if not texts:
        return None
    compiled = {d: _COMPILED.get(d, text) for d, text in texts.items()}
    metadata: dict[str, Any] = {}
    if any("tenant" in c.roots for c in compiled.values()):
        names = sorted(set(tenants))
        for r in (yield Query("tenant_metadata",
                              {"tenants": Rows(("id",), [(t,) for t in names])})):
            metadata[r["id"]] = _object(r["metadata"])
    return FanOutFilters(compiled=compiled, metadata=metadata)


@dataclass(frozen=True, slots=True, kw_only=True)
class FilterTestRow:
    """One stored event and whether a filter lets it through (`filter-test`)."""

    event_id: int
    message_id: str
    type: str
    source: str
    received_at: float
    subscribed: bool
    matched: bool
    body_purged: bool


def filter_test_tx(tenant: str, event_types: Sequence[str], value: Mapping[str, Any] | None,
                   last: int) -> Tx[list[FilterTestRow]]:
    """The tenant's newest `last` events, newest first, each with whether the destination's
    subscriptions (`event_types`) take it and whether filter `value` (None: no filter) lets
    it through. Reads only; an event whose body retention purged is matched without `data`.
    """
    compiled = None if value is None else compile_filter(value)
    row = yield one("tenant_metadata_one", tenant=tenant)
    metadata = _object(row["metadata"]) if row is not None else {}
    out = []
    for r in (yield Query("filter_test_events", {"tenant": tenant, "limit": last})):
        purged = r["body_purged_at"] is not None
        data = MISSING if purged else event_data(bytes(r["body"]),
                                                 bool(r["forwarded_headers"]))
        doc = event_document(event_type=r["type"], source=r["source"], data=data,
                             tenant=tenant, metadata=metadata)
        out.append(FilterTestRow(
            event_id=int(r["id"]), message_id=str(r["message_id"]), type=str(r["type"]),
            source=str(r["source"]), received_at=float(r["received_at"]),
            subscribed=subscribes(event_types, r["type"]),
            matched=compiled is None or compiled.predicate(doc), body_purged=purged))
    return out


def _object(text: Any) -> Any:
    """A stored JSON object column ({} when unreadable: metadata is checked on write)."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

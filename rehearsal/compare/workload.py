"""The one workload every system in `hookline bench --compare` gets, and the figures read
from what the receiver saw: pure functions, no I/O.

An event is `hookline.rehearsal.loadgen.event_body(index, run_id, body_bytes)`; each of the three
destinations must receive it once, signed and verified. A delivery is matched to its event
by the SHA-256 of the body the receiver got (every system delivers the exact bytes it
accepted), so the same code reads hookline's, Celery's and Huey's results. Times are unix
seconds; latencies are reported in milliseconds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hookline.rehearsal.loadgen import event_body, percentile


def body_index(run_id: str, events: int, body_bytes: int) -> dict[str, int]:
    """sha256 hex of each event's body -> the event's index (0 .. events-1)."""
    return {hashlib.sha256(event_body(i, run_id, body_bytes)).hexdigest(): i
            for i in range(events)}


def read_receipts(receipts: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int, int]:
    """(effects, requests, unverified requests) from either receiver's `GET /_receipts`.

    The receiver fixture (rehearsal/receiver.py) lists every request, each with `verified`;
    the lean one (rehearsal/fast_receiver.py) counts them: `requests` verified and
    `unverified`. Both list the effects alike. `requests` counts every request, verified or
    not, retries and duplicates included.
    """
    listed = receipts["requests"]
    if isinstance(listed, list):
        unverified = sum(not request["verified"] for request in listed)
        return receipts["effects"], len(listed), unverified
    return receipts["effects"], listed + receipts["unverified"], receipts["unverified"]


def delivery_figures(*, effects: Iterable[Mapping[str, Any]], requests: int,
                     accepted_at: Sequence[float | None], index_by_sha: Mapping[str, int],
                     destinations: int, load_started_at: float) -> dict[str, Any]:
    """Deliveries and accept->delivered latency of one system's run.

    Args:
        effects: the receiver's effects (`GET /_receipts`): the first verified arrival per
            (endpoint, webhook-id), with `endpoint`, `body_sha256` and `received_at`.
        requests: every request the receiver got (retries and duplicates included).
        accepted_at: per event index, when the load generator got its 2xx (None: refused).
        index_by_sha: from :func:`body_index`.
        destinations: destinations per event (3 in the bench).
        load_started_at: when the load generator started.

    Returns:
        `expected` (destinations x accepted events), `delivered` (distinct (endpoint, event)
        pairs with a verified arrival), `extra_effects` (verified arrivals under another
        webhook-id for a pair already delivered, or of unknown bodies), `requests`,
        `deliveries_per_s` (delivered / (last arrival - load start)), `latency_ms`
        p50/p90/p99/max of first arrival - accept time (0 when the arrival came first), and
        `last_delivery_at`.
    """
    first: dict[tuple[str, int], float] = {}
    extra = 0
    for effect in effects:
        index = index_by_sha.get(effect["body_sha256"])
        if index is None:
            extra += 1
            continue
        key = (effect["endpoint"], index)
        if key in first:
            extra += 1
        first[key] = min(first.get(key, effect["received_at"]), effect["received_at"])
    # A delivery can reach the receiver before the 2xx reaches the client: that counts as 0.
    latencies = sorted(
        max(0.0, (at - accepted) * 1000) for (_, index), at in first.items()
        if (accepted := accepted_at[index]) is not None)
    last = max(first.values(), default=None)
    span_s = (last - load_started_at) if last is not None else 0.0
    return {
        "expected": destinations * sum(a is not None for a in accepted_at),
        "delivered": len(first), "extra_effects": extra, "requests": requests,
        "deliveries_per_s": round(len(first) / span_s, 1) if span_s > 0 else None,
        "latency_ms": {p: round(percentile(latencies, f), 2) for p, f in
                       (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
        "last_delivery_at": last,
    }


# Which way is better for each compared figure: hookline / peer for throughput,
# peer / hookline for latency and cost, so a ratio above 1 always favours hookline.
HIGHER_IS_BETTER = ("events_per_s", "deliveries_per_s")
LOWER_IS_BETTER = ("latency_p50_ms", "latency_p99_ms", "cpu_s_per_1000_deliveries")


def ratios(hookline: Mapping[str, float | None],
           peer: Mapping[str, float | None]) -> dict[str, float | None]:
    """hookline / peer for throughput, peer / hookline for latency and CPU (above 1: hookline
    is better); None where a figure is missing or zero."""
    out: dict[str, float | None] = {}
    for key in (*HIGHER_IS_BETTER, *LOWER_IS_BETTER):
        ours, theirs = hookline.get(key), peer.get(key)
        num, den = (ours, theirs) if key in HIGHER_IS_BETTER else (theirs, ours)
        out[key] = round(num / den, 2) if num and den else None
    return out

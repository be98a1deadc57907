"""Latency figures of `hookline bench`: percentiles, and sent->delivered.

accept->delivered (rehearsal/bench.py, `db_figures`) starts at the event's `received_at`,
the time of the commit that stored it, so it leaves out how long the event waited for that
commit (ingest's group commit, spaced by `batch_interval_s` under a trickle). sent->delivered
starts when the load generator wrote the request (rehearsal/loadgen.py, `--sends`): what a
sender sees from its POST to the destination's answer. Both ends are unix seconds on this
host: the generator's wall clock, and the store's clock, anchored to the wall clock at each
`hookline serve` start (shared/store/clock.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def percentiles_ms(seconds: Iterable[float]) -> dict[str, float | None]:
    """p50, p90, p99 and max of `seconds`, in ms to 2 decimals (None without values)."""
    latencies = sorted(s * 1000 for s in seconds)

    def pick(f: float) -> float | None:
        if not latencies:
            return None
        return round(latencies[min(len(latencies) - 1, int(f * len(latencies)))], 2)

    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99),
            "max": round(latencies[-1], 2) if latencies else None}


def sent_to_delivered_ms(delivered: Iterable[tuple[str, float]],
                         sent_at: Sequence[float | None]) -> dict[str, float | None]:
    """Percentiles (ms) of each delivered job's `finished_at` minus its event's send time.

    Args:
        delivered: (the event's id as the load generator made it, `bench-RUN-INDEX`; the
            job's `finished_at`, unix seconds) per delivered job.
        sent_at: per event index, unix seconds its request was written (None: not sent).
            A job whose event has no send time (another generator's) is left out.
    """
    seconds = []
    for event_id, finished_at in delivered:
        index = event_id.rpartition("-")[2]
        if index.isdigit() and int(index) < len(sent_at):
            sent = sent_at[int(index)]
            if sent is not None:
                seconds.append(finished_at - sent)
    return percentiles_ms(seconds)

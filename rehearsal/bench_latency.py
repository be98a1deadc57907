"""Latency figures of `hookline bench`: percentiles, and sent->delivered.

accept->delivered (rehearsal/bench.py, `db_figures`) starts at the event's `received_at`,
the time ingest's transaction for its batch began, so it leaves out how long the request
waited for that batch (ingest's group commit, spaced by `batch_interval_s` under a trickle)
and its parsing. sent->delivered starts when the load generator wrote the request
(rehearsal/loadgen.py, `--sends`): what a sender sees from its POST to the destination's
answer. The two ends come from two clocks: the generator's wall clock, and the store's. On
SQLite the store's is this host's monotonic clock anchored to the wall clock at each
`hookline serve` start (shared/store/clock.py), so only a wall-clock step while the service
runs shifts the figure. On PostgreSQL it is the server's clock (the transaction's `now()`):
the bench's own throwaway server runs on this host; a server given by URL on another host
adds the two hosts' clock offset to every value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hookline.rehearsal.scenario_common import pick


def percentiles_ms(seconds: Iterable[float]) -> dict[str, float | None]:
    """p50, p90, p99 and max of `seconds`, in ms to 2 decimals (None without values)."""
    latencies = sorted(s * 1000 for s in seconds)
    if not latencies:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    return {"p50": round(pick(latencies, 0.5), 2), "p90": round(pick(latencies, 0.9), 2),
            "p99": round(pick(latencies, 0.99), 2), "max": round(latencies[-1], 2)}


def sent_to_delivered_ms(delivered: Iterable[tuple[str, float]], run_id: str,
                         sent_at: Sequence[float | None]) -> dict[str, float | int | None]:
    """Percentiles (ms) of each delivered job's `finished_at` minus its event's send time,
    and `joined`, the jobs counted.

    Args:
        delivered: (the event's id, the job's `finished_at` in unix seconds) per delivered
            job.
        run_id: the load generator's run, whose events are `bench-RUN_ID-INDEX`; a job of
            any other event is left out.
        sent_at: per event index, unix seconds its request was written (None: not sent).
    """
    prefix = f"bench-{run_id}-"
    seconds = []
    for event_id, finished_at in delivered:
        index = event_id[len(prefix):] if event_id.startswith(prefix) else ""
        if index.isdigit() and int(index) < len(sent_at):
            sent = sent_at[int(index)]
            if sent is not None:
                seconds.append(finished_at - sent)
    return {**percentiles_ms(seconds), "joined": len(seconds)}

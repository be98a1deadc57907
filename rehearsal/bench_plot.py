"""Throughput and latency over time for `hookline bench`: the per-second timeline kept in
bench.json, and bench.png drawn from it.

The timeline is pure arithmetic on timestamps read from the database (rehearsal/bench.py
reads them); the drawing needs matplotlib, the `bench` extra (`pip install
'hookline[bench]'`), and is skipped without it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hookline.rehearsal.scenario_common import pick

INSTALL_HINT = "pip install 'hookline[bench]'"


def _pick(sorted_ms: list[float], fraction: float) -> float | None:
    """The `fraction` percentile of `sorted_ms` (ascending) by scenario_common.pick, the
    bench's rule, rounded to 0.01; None when empty."""
    return round(pick(sorted_ms, fraction), 2) if sorted_ms else None


def timeline(received_s: Iterable[float], delivered: Iterable[tuple[float, float]],
             start_s: float) -> list[dict[str, Any]]:
    """Per-second buckets of a run: events accepted, deliveries done and accept->delivered
    latency of those deliveries.

    Args:
        received_s: each accepted event's `received_at`, unix seconds.
        delivered: (`finished_at`, `received_at`) of each done job, unix seconds.
        start_s: the run's start, unix seconds; bucket `t` covers [start_s + t, start_s + t
            + 1). A timestamp earlier than it (a database server's clock behind this
            host's) moves the start back to that timestamp.

    Returns:
        One dict per second from 0 to the last bucket with anything in it, empty seconds
        included: `t` (seconds since start), `accepted`, `delivered` (counts), `p50_ms` and
        `p99_ms` (latency of the deliveries finished in that second; None when none did).
        An empty list when there is nothing at all.
    """
    received = list(received_s)
    done = list(delivered)
    start_s = min([start_s, *received, *(finished for finished, _ in done)])
    accepted: dict[int, int] = {}
    latencies: dict[int, list[float]] = {}
    for at in received:
        t = int(at - start_s)
        accepted[t] = accepted.get(t, 0) + 1
    for finished, received_at in done:
        latencies.setdefault(int(finished - start_s), []).append(
            (finished - received_at) * 1000)
    last = max([*accepted, *latencies], default=-1)
    buckets = []
    for t in range(last + 1):
        ms = sorted(latencies.get(t, []))
        buckets.append({"t": t, "accepted": accepted.get(t, 0), "delivered": len(ms),
                        "p50_ms": _pick(ms, 0.5), "p99_ms": _pick(ms, 0.99)})
    return buckets


def plot_title(result: dict[str, Any]) -> str:
    """The plot's title: backend, workers, offered rate, and the machine (cores, fsync p50).

    Args:
        result: a bench.json dict (its `options` values are strings, as bench.json has them).
    """
    opts, machine = result["options"], result["machine"]
    rate = opts["rate_per_s"]
    offered = "flat out" if rate == "None" else f"{float(rate):,.0f} events/s offered"
    return (f"hookline bench: {result['backend']['name']}, {opts['workers']} workers, "
            f"{offered}\n{machine['cores']} cores, fsync p50 {machine['fsync_ms']['p50']} ms")


def write_plot(result: dict[str, Any], path: Path) -> bool:
    """Draw `result["timeline"]` to the PNG `path`: events accepted/s and deliveries/s on top,
    accept->delivered latency p50 and p99 (log scale) below.

    Args:
        result: a bench.json dict with `timeline`, `options`, `machine` and `backend`.
        path: the PNG file to write (replaced).

    Returns:
        True when written; False when matplotlib is not installed (nothing written).
    """
    try:
        import matplotlib  # noqa: PLC0415  (optional: the `bench` extra)
    except ImportError:
        return False
    matplotlib.use("Agg")  # files only, never a display
    from matplotlib import pyplot, ticker  # noqa: PLC0415  (optional: the `bench` extra)

    rows = result["timeline"]
    # Counts are steps over each whole second (one more edge closes the last one);
    # latencies are points at each second's middle.
    edges = [row["t"] for row in rows] + [len(rows)]
    middles = [row["t"] + 0.5 for row in rows]
    fig, (top, bottom) = pyplot.subplots(2, 1, sharex=True, figsize=(9, 6.5),
                                         layout="constrained")
    try:
        for key, label in (("accepted", "events accepted/s"), ("delivered", "deliveries/s")):
            counts = [row[key] for row in rows]
            top.step(edges, counts + counts[-1:], where="post", label=label)
        top.set_ylabel("per second")
        top.set_ylim(bottom=0)
        top.legend(loc="best")
        top.grid(alpha=0.3)
        for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
            # seconds without deliveries are gaps, not zeros (a log axis has no zero)
            bottom.plot(middles, [math.nan if row[key] is None else row[key] for row in rows],
                        marker=".", label=f"accept->delivered {label}")
        bottom.set_yscale("log")
        plain = ticker.FuncFormatter(lambda value, _: f"{value:g}")
        bottom.yaxis.set_major_formatter(plain)
        bottom.yaxis.set_minor_formatter(plain)
        bottom.set_ylabel("latency, ms")
        bottom.set_xlabel("seconds since the run's start")
        bottom.legend(loc="best")
        bottom.grid(alpha=0.3, which="both")
        fig.suptitle(plot_title(result))
        fig.savefig(path, format="png", dpi=100)
    finally:
        pyplot.close(fig)
    return True

"""A bounded HTTP load generator for `hookline bench`: posts N events at up to R per second.

Run as its own process (`python -m hookline.rehearsal.loadgen ...`) so it does not share a core's
event loop with what it measures. Prints one JSON line: counts, elapsed, and latency
percentiles in milliseconds. Only ever targets the URL it is given (127.0.0.1 in the bench).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import aiohttp


def event_body(index: int, run_id: str, body_bytes: int, *, type_: str = "bench.event",
               tenant: str | None = None) -> bytes:
    """A `POST /v1/events` body of about `body_bytes` bytes with a unique id, of type
    `type_`, for `tenant` (None: no tenant field, the default tenant)."""
    owner = "" if tenant is None else f'"tenant": "{tenant}", '
    head = f'{{{owner}"id": "bench-{run_id}-{index}", "type": "{type_}", "data": {{"pad": "'
    tail = '"}}'
    pad = "x" * max(0, body_bytes - len(head) - len(tail))
    return (head + pad + tail).encode()


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 for an empty one)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


async def run(url: str, events: int, concurrency: int, rate_per_s: float | None,
              body_bytes: int, run_id: str | None = None,
              accepted_at: list[float | None] | None = None, *, type_: str = "bench.event",
              tenant: str | None = None) -> dict[str, object]:
    """Post `events` bodies from `concurrency` connections; returns the figures.

    Args:
        run_id: the ids' run part (`bench-RUN-INDEX`); random when None.
        type_: the events' type.
        tenant: the tenant they are published for (None: no tenant field).
        accepted_at: when given, filled with one entry per event index: unix seconds when
            its 2xx answer was read, None when it got no 2xx.
    """
    run_id = run_id or os.urandom(4).hex()
    if accepted_at is not None:
        accepted_at[:] = [None] * events
    latencies_ms: list[float] = []
    statuses: dict[str, int] = {}
    next_index = 0
    started = time.monotonic()
    # The service under test reads the same variable (see rehearsal/bench.py).
    headers = {"content-type": "application/json",
               "authorization": f"Bearer {os.environ.get('HOOKLINE_INGEST_TOKEN', '')}"}

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal next_index
        while next_index < events:
            index = next_index
            next_index += 1
            if rate_per_s:
                due = started + index / rate_per_s
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            t0 = time.monotonic()
            try:
                async with session.post(url, data=event_body(index, run_id, body_bytes,
                                                              type_=type_, tenant=tenant),
                                        headers=headers) as resp:
                    await resp.read()
                    key = str(resp.status)
                    if accepted_at is not None and 200 <= resp.status < 300:
                        accepted_at[index] = time.time()
            except aiohttp.ClientError as exc:
                key = type(exc).__name__
            latencies_ms.append((time.monotonic() - t0) * 1000)
            statuses[key] = statuses.get(key, 0) + 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
    elapsed_s = time.monotonic() - started
    latencies_ms.sort()
    return {"events": events, "elapsed_s": round(elapsed_s, 3),
            "events_per_s": round(events / elapsed_s, 1), "statuses": statuses,
            "latency_ms": {p: round(percentile(latencies_ms, f), 2) for p, f in
                           (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))}}


def main(argv: list[str] | None = None) -> int:
    """CLI: --url URL --events N [--concurrency C] [--rate R] [--body-bytes B] [--run-id ID]
    [--accepts FILE] [--type TYPE] [--tenant ID] (FILE gets a JSON list: per event index, the
    unix time its 2xx was read, or null)."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.loadgen")
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rate", type=float,
                        help="events per second (default: as fast as possible)")
    parser.add_argument("--body-bytes", type=int, default=1500)
    parser.add_argument("--run-id", help="the ids' run part (default: random)")
    parser.add_argument("--accepts", help="write each event's accept time (unix s) here")
    parser.add_argument("--type", default="bench.event", help="the events' type")
    parser.add_argument("--tenant", help="publish for this tenant (default: none)")
    args = parser.parse_args(argv)
    accepted_at: list[float | None] | None = [] if args.accepts else None
    work = run(args.url, args.events, args.concurrency, args.rate, args.body_bytes,
               args.run_id, accepted_at, type_=args.type, tenant=args.tenant)
    try:
        import uvloop  # noqa: PLC0415  (optional: faster loop when installed)

        result = uvloop.run(work)
    except ImportError:
        result = asyncio.run(work)
    if args.accepts:
        with open(args.accepts, "w", encoding="utf-8") as handle:
            json.dump(accepted_at, handle)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

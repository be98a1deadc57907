"""A bounded HTTP load generator for `hookline bench`: posts N events, as fast as it can or
at R per second (evenly spaced, or at random times, R per second on average: `--arrivals`).

Run as its own process (`python -m hookline.rehearsal.loadgen ...`) so it does not share a core's
event loop with what it measures. Prints one JSON line: counts, elapsed, and latency
percentiles in milliseconds. Only ever targets the URL it is given (127.0.0.1 in the bench).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import sys
import time
import urllib.parse

REQUEST_TIMEOUT_S = 300.0  # one request's answer, as aiohttp's client default
ARRIVALS = ("even", "poisson")
"""How a steady rate's events are spaced: `even`, 1/rate apart; `poisson`, independent
arrivals (exponential gaps of mean 1/rate), as the events of many independent senders
arrive."""
POISSON_SEED = 20261204  # the same schedule in every run, so runs compare


def arrival_offsets(events: int, rate_per_s: float, arrivals: str = "even") -> list[float]:
    """When each event is due, seconds after the start: `events` offsets at `rate_per_s` on
    average, spaced as `arrivals` says (see ARRIVALS; poisson's come from a fixed seed).

    Raises:
        ValueError: an unknown `arrivals`, or a rate not above 0.
    """
    if not rate_per_s > 0:
        raise ValueError(f"the rate must be above 0, not {rate_per_s}")
    if arrivals not in ARRIVALS:
        raise ValueError(f"arrivals must be one of {', '.join(ARRIVALS)}, not {arrivals!r}")
    if events <= 0:
        return []
    if arrivals == "even":
        return [index / rate_per_s for index in range(events)]
    rng = random.Random(POISSON_SEED)
    gaps = (rng.expovariate(rate_per_s) for _ in range(events - 1))
    return list(itertools.accumulate(gaps, initial=0.0))


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


class _Connection:
    """One keep-alive HTTP/1.1 connection posting pre-built requests, reading each answer's
    status line, headers and Content-Length body with asyncio streams.

    Why not aiohttp's client: at a steady 1,000 events/s it cost this generator about 0.3 of
    a core on the bench's 2-core machine, CPU taken from the service it measures; these few
    stream calls cost a fraction of it. Only what ingest answers is understood: a body with
    Content-Length (or none: read to the connection's end; 204 and 304 have none),
    `Connection: close` honoured; not chunked bodies (aiohttp's JSON answers never are).
    """

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, request_head: bytes, body: bytes) -> int:
        """Sends one request (its head ends in a blank line) and returns the answer's status.

        Raises:
            OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError: the
                connection failed or the answer could not be read; the caller closes it (the
                next post opens one), as after a timeout.
        """
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(
                self._host, self._port)
        assert self._reader is not None
        self._writer.write(request_head + body)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status_line, _, header_block = head.partition(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length, close = None, False
        for line in header_block.split(b"\r\n"):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        if status in (204, 304):  # no body, whatever the headers say
            length = 0
        if length is None:
            await self._reader.read()
            close = True
        else:
            await self._reader.readexactly(length)
        if close:
            self.close()
        return status

    def close(self) -> None:
        """Closes the connection, if open."""
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


async def run(url: str, events: int, concurrency: int, rate_per_s: float | None,
              body_bytes: int, run_id: str | None = None,
              accepted_at: list[float | None] | None = None, *, type_: str = "bench.event",
              tenant: str | None = None, sent_at: list[float | None] | None = None,
              arrivals: str = "even") -> dict[str, object]:
    """Post `events` bodies from `concurrency` keep-alive connections; returns the figures
    (`generator_cpu_s`: this process's own CPU seconds while posting).

    Args:
        url: `http://HOST:PORT/PATH` (plain HTTP, no query or credentials: ValueError).
        rate_per_s: events per second on average (None or 0: as fast as possible).
        arrivals: how a steady rate's events are spaced (:func:`arrival_offsets`); an
            event is sent when due, or as soon as a connection is free after that.
        run_id: the ids' run part (`bench-RUN-INDEX`); random when None.
        type_: the events' type.
        tenant: the tenant they are published for (None: no tenant field).
        accepted_at: when given, filled with one entry per event index: unix seconds when
            its 2xx answer was read, None when it got no 2xx.
        sent_at: when given, filled with one entry per event index: unix seconds just
            before its request was written (None: never sent).
    """
    run_id = run_id or os.urandom(4).hex()
    if accepted_at is not None:
        accepted_at[:] = [None] * events
    if sent_at is not None:
        sent_at[:] = [None] * events
    target = urllib.parse.urlsplit(url)
    if target.scheme != "http" or target.query or target.username:
        raise ValueError(f"the load generator posts to plain http://HOST:PORT/PATH, not {url!r}")
    host, port = target.hostname or "127.0.0.1", target.port or 80
    # The service under test reads the same variable (see rehearsal/bench.py).
    token = os.environ.get("HOOKLINE_INGEST_TOKEN", "")
    head_start = (f"POST {target.path or '/'} HTTP/1.1\r\nHost: {target.netloc}\r\n"
                  f"Content-Type: application/json\r\nAuthorization: Bearer {token}\r\n"
                  "Content-Length: ").encode()
    due_s = arrival_offsets(events, rate_per_s, arrivals) if rate_per_s else None
    latencies_ms: list[float] = []
    statuses: dict[str, int] = {}
    next_index = 0
    started = time.monotonic()
    cpu_started = time.process_time()

    async def client() -> None:
        nonlocal next_index
        connection = _Connection(host, port)
        while next_index < events:
            index = next_index
            next_index += 1
            if due_s is not None:
                delay = started + due_s[index] - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            body = event_body(index, run_id, body_bytes, type_=type_, tenant=tenant)
            t0 = time.monotonic()
            if sent_at is not None:
                sent_at[index] = time.time()
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    status = await connection.post(
                        head_start + str(len(body)).encode() + b"\r\n\r\n", body)
                key = str(status)
                if accepted_at is not None and 200 <= status < 300:
                    accepted_at[index] = time.time()
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ValueError, TimeoutError) as exc:
                connection.close()
                key = type(exc).__name__
            latencies_ms.append((time.monotonic() - t0) * 1000)
            statuses[key] = statuses.get(key, 0) + 1
        connection.close()

    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed_s = time.monotonic() - started
    latencies_ms.sort()
    return {"events": events, "run_id": run_id, "elapsed_s": round(elapsed_s, 3),
            "events_per_s": round(events / elapsed_s, 1), "statuses": statuses,
            "generator_cpu_s": round(time.process_time() - cpu_started, 3),
            "latency_ms": {p: round(percentile(latencies_ms, f), 2) for p, f in
                           (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))}}


def main(argv: list[str] | None = None) -> int:
    """CLI: --url URL --events N [--concurrency C] [--rate R [--arrivals even|poisson]]
    [--body-bytes B] [--run-id ID] [--accepts FILE] [--sends FILE] [--type TYPE]
    [--tenant ID]. --accepts FILE gets a JSON list: per event index, the unix time its 2xx
    was read, or null; --sends FILE a JSON object: `run_id`, the ids' run part, and
    `sent_at`, per event index the unix time its request was written, or null."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.loadgen")
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rate", type=float,
                        help="events per second (default: as fast as possible)")
    parser.add_argument("--arrivals", choices=ARRIVALS, default="even",
                        help="with --rate: the events 1/rate apart (even) or at random, "
                             "independent times, the rate on average (poisson)")
    parser.add_argument("--body-bytes", type=int, default=1500)
    parser.add_argument("--run-id", help="the ids' run part (default: random)")
    parser.add_argument("--accepts", help="write each event's accept time (unix s) here")
    parser.add_argument("--sends", help="write each event's send time (unix s) here")
    parser.add_argument("--type", default="bench.event", help="the events' type")
    parser.add_argument("--tenant", help="publish for this tenant (default: none)")
    args = parser.parse_args(argv)
    if args.rate is not None and not args.rate > 0:
        parser.error("--rate must be above 0 (leave it out for as fast as possible)")
    if args.arrivals != "even" and not args.rate:
        parser.error("--arrivals poisson needs --rate")
    accepted_at: list[float | None] | None = [] if args.accepts else None
    sent_at: list[float | None] | None = [] if args.sends else None
    work = run(args.url, args.events, args.concurrency, args.rate, args.body_bytes,
               args.run_id, accepted_at, type_=args.type, tenant=args.tenant, sent_at=sent_at,
               arrivals=args.arrivals)
    try:
        import uvloop  # noqa: PLC0415  (optional: faster loop when installed)

        result = uvloop.run(work)
    except ImportError:
        result = asyncio.run(work)
    if args.accepts:
        with open(args.accepts, "w", encoding="utf-8") as handle:
            json.dump(accepted_at, handle)
    if args.sends:
        with open(args.sends, "w", encoding="utf-8") as handle:
            json.dump({"run_id": result["run_id"], "sent_at": sent_at}, handle)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

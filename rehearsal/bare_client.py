"""The sender's ceiling for `hookline bench`: a bare aiohttp client doing a worker's HTTP work.

One process of this module does what one hookline worker does on the wire and nothing else:
`concurrency` requests in flight over one keep-alive aiohttp session, each a POST of a
`body_bytes` JSON body to one of the receiver's endpoints (round robin), signed with the
endpoint's secret exactly as a worker signs (workers/sender.sign_request: a fresh
timestamp and an HMAC-SHA256 per request), its answer read. No database, no claim, no
bookkeeping: what is left of a delivery's CPU once the durable part is gone, so the bench
can say how far the workers are from the limit of the language (`delivery_vs_bare_client`,
rehearsal/bench_ceiling.py).

CLI: `python -m hookline.rehearsal.bare_client --url http://127.0.0.1:PORT --endpoint
NAME=SECRET ... --requests N --concurrency C --body-bytes B [--duration-s S]
[--events-per-s R]`. With `--events-per-s`, it paces itself as a worker delivering R events/s
would: every 1/R seconds one request to each endpoint at once (the everyday scenario's floor,
rehearsal/everyday_floor.py); without it, it sends as fast as it can. It prints
`{"ready": true}` once its session is open, waits for a line on stdin (the bench starts
every client at once), sends until N requests are answered or S seconds have passed, and
prints `{"requests", "failed", "elapsed_s", "cpu_s", "requests_per_s"}` (cpu_s: this
process's CPU over the sending only, seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time

import aiohttp

from hookline.shared.signing import new_message_ids
from hookline.workers.sender import plain_outgoing_headers, sign_request


async def send_all(url: str, endpoints: list[tuple[str, str]], *, requests: int,
                   concurrency: int, body_bytes: int, duration_s: float,
                   events_per_s: float | None = None) -> dict[str, float]:
    """Post up to `requests` signed bodies with `concurrency` in flight, for at most
    `duration_s` seconds, after a line arrives on stdin; returns the figures the CLI prints.

    Args:
        url: the receiver's base URL, `http://127.0.0.1:PORT`.
        endpoints: (name, `whsec_` secret) per endpoint, posted to in turn.
        requests: most requests in all.
        concurrency: requests in flight at once (and the pool's size).
        body_bytes: size of each JSON body, bytes.
        duration_s: most seconds of sending.
        events_per_s: when given, request i waits until i // len(endpoints) / events_per_s
            seconds after the start: each "event" is one request to every endpoint.
    """
    body = json.dumps({"type": "bench.bare_client", "pad": "x" * max(0, body_bytes - 40)}
                      ).encode()
    targets = itertools.cycle([(f"{url}/{name}", (secret,)) for name, secret in endpoints])
    ids = iter(new_message_ids(requests))
    # The headers a worker sends before signing (workers/sender.py), built once.
    unsigned = plain_outgoing_headers("bench.bare_client")
    counts = {"requests": 0, "failed": 0}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        print(json.dumps({"ready": True}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        cpu0, t0 = time.process_time(), time.monotonic()
        deadline = t0 + duration_s
        remaining = iter(range(requests))

        async def one_client() -> None:
            for index in remaining:
                if events_per_s:
                    delay_s = t0 + index // len(endpoints) / events_per_s - time.monotonic()
                    if delay_s > 0:
                        await asyncio.sleep(delay_s)
                if time.monotonic() > deadline:
                    return
                target, secrets_ = next(targets)
                # Signed the way a worker signs (Sender.send).
                headers = sign_request(dict(unsigned), next(ids), body, secrets_)
                async with session.post(target, data=body, headers=headers) as answer:
                    await answer.read()
                    counts["requests" if answer.status < 300 else "failed"] += 1

        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    return {**counts, "elapsed_s": round(elapsed, 3), "cpu_s": round(cpu, 3),
            "requests_per_s": round(counts["requests"] / elapsed, 1) if elapsed else 0.0}


def main(argv: list[str] | None = None) -> int:
    """CLI entry; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.bare_client")
    parser.add_argument("--url", required=True)
    parser.add_argument("--endpoint", action="append", required=True, metavar="NAME=SECRET")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--body-bytes", type=int, default=1500)
    parser.add_argument("--duration-s", type=float, default=3.0)
    parser.add_argument("--events-per-s", type=float,
                        help="pace: one request to each endpoint this many times a second")
    args = parser.parse_args(argv)
    endpoints = [tuple(spec.split("=", 1)) for spec in args.endpoint]
    if any(len(e) != 2 for e in endpoints) or args.requests < 1 or args.concurrency < 1:
        print("bare_client: --endpoint NAME=SECRET, --requests and --concurrency >= 1",
              file=sys.stderr)
        return 2
    run = send_all(args.url, [(name, secret) for name, secret in endpoints],
                   requests=args.requests, concurrency=args.concurrency,
                   body_bytes=args.body_bytes, duration_s=args.duration_s,
                   events_per_s=args.events_per_s)
    try:
        import uvloop  # noqa: PLC0415  (the workers' loop when installed: shared/process/child.py)

        figures = uvloop.run(run)
    except ImportError:
        figures = asyncio.run(run)
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

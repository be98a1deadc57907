"""The ingest writer process fed directly: what it commits when no HTTP side holds it back.

`python -m hookline.rehearsal.writer_feeder --address FILE --seconds S` connects to the
writer a running service announced in its address file (`<runtime_dir>/ingest-writer.address`,
hookline.shared.process.ingest_writer) over `--links` connections, as that many ingest
processes would, and on each sends batches of `--batch` new events of about `--body-bytes`
bytes (the bench's body, of type `bench.event`), the next as soon as the last is answered,
for `--seconds` seconds. It prints one JSON line: events sent and answered, how many were
accepted (stored with their jobs), the seconds it ran and its own CPU seconds.

`hookline bench --scenario ingest` runs it as design `writer_fed`: the writer's
rate with its batches ready at once is what it could take from HTTP processes on cores of
their own (issue #33, target 3; docs/benchmarks.md, "A scaling model for 16 cores, with
the ingest writer").
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import time
from pathlib import Path

from hookline.ingest.writer_link import WriterLink
from hookline.shared.models import Accepted, NewEvent
from hookline.shared.process.ingest_writer import socket_named_in

EVENT_TYPE = "bench.event"
"""The type of every event sent: the bench's destinations are subscribed to every type."""


def make_batch(run_id: str, start: int, size: int, pad: int) -> list[NewEvent]:
    """`size` events with the ids `run_id-start` onwards, each body the bench's JSON with a
    `pad` of `pad` characters."""
    events = []
    for n in range(start, start + size):
        event_id = f"{run_id}-{n}"
        body = (f'{{"id":"{event_id}","type":"{EVENT_TYPE}","data":{{"pad":"'
                f'{"x" * pad}"}}}}').encode()
        events.append(NewEvent(source="api", source_event_id=event_id, type=EVENT_TYPE,
                               body=body))
    return events


async def feed(address: Path, links: int, batch: int, seconds: float, body_bytes: int,
               run_id: str) -> dict[str, float | int]:
    """Send batches over `links` connections for `seconds`; the figures the module docstring
    names.

    Raises:
        WriterAway: the writer is not listening or a connection broke.
        StoreError: a batch the writer refused (a fault of its store).
    """
    pad = max(0, body_bytes - 80)
    stop_at = time.monotonic() + seconds
    counts = {"sent": 0, "accepted": 0}

    async def one_link(link_number: int) -> None:
        link = WriterLink(functools.partial(socket_named_in, address))
        sent = 0
        try:
            while time.monotonic() < stop_at:
                events = make_batch(f"{run_id}-{link_number}", sent, batch, pad)
                results = await link.add_events(events)
                sent += len(events)
                counts["sent"] += len(events)
                counts["accepted"] += sum(isinstance(r, Accepted) for r in results)
        finally:
            await link.close()

    started, cpu_started = time.monotonic(), time.process_time()
    await asyncio.gather(*(one_link(n) for n in range(links)))
    return {"events": counts["sent"], "accepted": counts["accepted"],
            "elapsed_s": round(time.monotonic() - started, 3),
            "cpu_s": round(time.process_time() - cpu_started, 3)}


def main(argv: list[str] | None = None) -> int:
    """CLI entry; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.writer_feeder")
    parser.add_argument("--address", type=Path, required=True,
                        help="the writer's address file in the service's runtime folder")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--links", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--body-bytes", type=int, default=1500)
    parser.add_argument("--run-id", default=os.urandom(4).hex())
    args = parser.parse_args(argv)
    figures = asyncio.run(feed(args.address, args.links, args.batch, args.seconds,
                               args.body_bytes, args.run_id))
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The ceiling of `hookline bench`: the least an aiohttp server can do for the same POST.

`python -m hookline.rehearsal.bare_server [--listen HOST:PORT]` serves `POST /v1/events` in one
process, on the same event loop ingest runs on (uvloop when installed, else asyncio; see
shared/process/child.py), reads the body and answers `202 {"accepted": true}` as JSON. No
validation, no database, no access log (ingest has none either). It prints one JSON line,
`{"port": N}`, once listening, and stops on SIGTERM or SIGINT. The bench drives it with the
same load tool, body and connections as ingest, so ingest's rate divided by this one is
the share of the bare framework's speed that hookline keeps while doing its work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from aiohttp import web

from hookline.shared.process.child import event_loop_runner


async def accept(request: web.Request) -> web.Response:
    """Read the body, answer 202 with a small JSON object."""
    await request.read()
    return web.json_response({"accepted": True}, status=202)


async def serve(host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT; prints `{"port": N}` once listening."""
    app = web.Application()
    app.router.add_post("/v1/events", accept)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    print(json.dumps({"port": bound}), flush=True)
    try:
        await stop_signal()
    finally:
        await runner.cleanup()


async def stop_signal() -> None:
    """Return once the process gets SIGTERM or SIGINT (its handlers replaced for good)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """CLI entry; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.bare_server")
    parser.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    event_loop_runner()(serve(host, int(port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

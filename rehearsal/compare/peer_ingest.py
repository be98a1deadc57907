"""The front door of a peer queue in `hookline bench --compare`: a minimal aiohttp app.

What a team's web app would do with Celery or Huey: take `POST /v1/events` (hookline's body:
a JSON object with string `id` and `type`), give the event a `webhook-id`
(shared/signing.py `new_message_id`, as hookline does), enqueue ONE task per destination
with the library's client (Celery `apply_async`, Huey's task call), and answer 202 once the
tasks are enqueued. The enqueue calls block (a Redis round trip, a SQLite commit) and are
made inline on the event loop, as a small app would; no bearer token. `GET /healthz`
answers 200 once listening.

CLI: `python -m hookline.rehearsal.compare.peer_ingest --queue celery|huey --listen HOST:PORT`, with
the queue's module settings in the environment (COMPARE_DESTINATIONS, COMPARE_BROKER_URL or
COMPARE_HUEY_DB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable

from aiohttp import web

from hookline.rehearsal.compare.peer_tasks import DESTINATIONS
from hookline.shared.signing import new_message_id

Enqueue = Callable[[str, str, str], None]  # (destination, message_id, body) -> None


def celery_enqueue() -> Enqueue:
    """Enqueue with Celery's client: `deliver.apply_async(args=...)` to the Redis broker."""
    from hookline.rehearsal.compare.celery_app import deliver  # noqa: PLC0415  (the bench extra loads only when used)

    def enqueue(destination: str, message_id: str, body: str) -> None:
        deliver.apply_async(args=(destination, message_id, body))

    return enqueue


def huey_enqueue() -> Enqueue:
    """Enqueue with Huey's client: calling the task writes it to the SQLite storage."""
    from hookline.rehearsal.compare.huey_app import deliver  # noqa: PLC0415  (the bench extra loads only when used)

    def enqueue(destination: str, message_id: str, body: str) -> None:
        deliver(destination, message_id, body)

    return enqueue


def make_app(enqueue: Enqueue, destinations: list[str]) -> web.Application:
    """The front door: POST /v1/events enqueues one task per name in `destinations`."""

    async def post_event(request: web.Request) -> web.Response:
        body = await request.text()
        try:
            document = json.loads(body)
        except ValueError:
            return web.json_response({"error": "invalid_json"}, status=400)
        if not (isinstance(document, dict) and isinstance(document.get("id"), str)
                and isinstance(document.get("type"), str)):
            return web.json_response({"error": "id and type (strings) are required"},
                                     status=400)
        message_id = new_message_id()
        for destination in destinations:
            enqueue(destination, message_id, body)
        return web.json_response({"id": document["id"], "message_id": message_id},
                                 status=202)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/v1/events", post_event)
    app.router.add_get("/healthz", healthz)
    return app


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code (argparse exits 2 on bad args)."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.compare.peer_ingest")
    parser.add_argument("--queue", choices=["celery", "huey"], required=True)
    parser.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    enqueue = celery_enqueue() if args.queue == "celery" else huey_enqueue()
    app = make_app(enqueue, sorted(DESTINATIONS))
    try:
        import uvloop  # noqa: PLC0415  (as hookline's ingest, when installed)

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    web.run_app(app, host=host, port=int(port), access_log=None, print=None, loop=loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())

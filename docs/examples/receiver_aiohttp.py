"""A webhook receiver for hookline deliveries, on aiohttp: verify, deduplicate, answer fast.

Run it (the secret is the destination's, printed by `hookline destinations add`):

    WEBHOOK_SECRET=whsec_... python docs/examples/receiver_aiohttp.py --port 8000

then point a destination at it: `hookline destinations add mine http://HOST:8000/webhooks`.
During a secret rotation put both secrets in WEBHOOK_SECRET, separated by a space.

Each request is checked with hookline's receiver kit (`hookline_client.verify`; the
`standardwebhooks` package works the same way), then recorded in SQLite keyed by
`webhook-id`: hookline delivers at least once, so the same message can arrive again (a
retry after a lost answer, a replay) and must take effect only once. The business effect
and the dedupe mark are written in ONE transaction: a crash between them can neither lose
the event nor apply it twice.

What production needs beyond this example: keep the processed ids in your application's
database, in the same transaction as the effect (as here), shared by every instance of the
receiver; keep them for longer than hookline may redeliver (its retries span 26 to 51
hours with the defaults, and an operator can replay dead letters later); and answer within
hookline's attempt timeout (10 s by default): move slow work to a queue and answer 2xx once
it is queued.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys

from aiohttp import web
from hookline_client import WebhookVerificationError, verify

SECRETS_KEY = web.AppKey("secrets", list[str])
DB_KEY = web.AppKey("db", sqlite3.Connection)


async def receive(request: web.Request) -> web.Response:
    """One delivery: 401 when not genuine, 200 once applied (or already applied before)."""
    body = await request.read()  # the exact bytes: the signature covers them
    try:
        verify(body, request.headers, request.app[SECRETS_KEY])
    except WebhookVerificationError as exc:
        return web.json_response({"error": str(exc)}, status=401)
    message_id = request.headers["webhook-id"]
    event = json.loads(body)
    db = request.app[DB_KEY]
    with db:  # one transaction: the dedupe mark and the effect commit together, or neither
        first = db.execute("INSERT OR IGNORE INTO processed (webhook_id) VALUES (?)",
                           (message_id,)).rowcount == 1
        if first:
            apply_event(db, message_id, event)
    return web.json_response({"ok": True, "duplicate": not first})


def apply_event(db: sqlite3.Connection, message_id: str, event: dict[str, object]) -> None:
    """Your business logic goes here. A body from POST /v1/events is the event as the
    publisher sent it: {"id", "type", "data", "source"?}."""
    db.execute("INSERT INTO effects (webhook_id, type, data) VALUES (?, ?, ?)",
               (message_id, event.get("type"), json.dumps(event.get("data"))))
    print(f"processed {message_id} {event.get('type')}", flush=True)


def open_db(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE IF NOT EXISTS processed (webhook_id TEXT PRIMARY KEY);
        CREATE TABLE IF NOT EXISTS effects (webhook_id TEXT, type TEXT, data TEXT);
    """)
    return db


def build_app(secrets: list[str], db_path: str) -> web.Application:
    app = web.Application()
    app[SECRETS_KEY] = secrets
    app[DB_KEY] = open_db(db_path)
    app.router.add_post("/webhooks", receive)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--db", default="receiver.sqlite3", help="processed ids and effects")
    args = parser.parse_args()
    secrets = os.environ.get("WEBHOOK_SECRET", "").split()
    if not secrets:
        sys.exit("set WEBHOOK_SECRET to the destination's whsec_ secret")
    listening = f"receiving on http://{args.host}:{args.port}/webhooks (database {args.db})"
    web.run_app(build_app(secrets, args.db), host=args.host, port=args.port,
                print=lambda _: print(listening, file=sys.stderr, flush=True))


if __name__ == "__main__":
    main()

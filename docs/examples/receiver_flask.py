"""A webhook receiver for hookline deliveries, on Flask (WSGI): verify, deduplicate, answer
fast.

Run it with Flask's own server for a trial (the secret is the destination's, printed by
`hookline destinations add`):

    WEBHOOK_SECRET=whsec_... python docs/examples/receiver_flask.py --port 8000

or under a production WSGI server, e.g.
`WEBHOOK_SECRET=... gunicorn 'receiver_flask:create_app()'`; then point a destination at it:
`hookline destinations add mine http://HOST:8000/webhooks`. During a secret rotation put
both secrets in WEBHOOK_SECRET, separated by a space.

Each request is checked with hookline's receiver kit (`hookline_client.verify`; the
`standardwebhooks` package works the same way), then recorded in SQLite keyed by
`webhook-id`: hookline delivers at least once, so the same message can arrive again (a
retry after a lost answer, a replay) and must take effect only once. The business effect
and the dedupe mark are written in ONE transaction: a crash between them can neither lose
the event nor apply it twice.

What production needs beyond this example: keep the processed ids in your application's
database, in the same transaction as the effect (as here), shared by every instance and
worker process of the receiver; keep them for longer than hookline may redeliver (its retries
span 26 to 51 hours with the defaults, and an operator can replay dead letters later); and
answer within hookline's attempt timeout (10 s by default): move slow work to a queue and
answer 2xx once it is queued.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue
from hookline_client import WebhookVerificationError, verify


def create_app(secrets: list[str] | None = None, db_path: str | None = None) -> Flask:
    """The receiver app; secrets default to WEBHOOK_SECRET (space-separated), the database
    to WEBHOOK_DB or receiver.sqlite3."""
    secrets = secrets or os.environ.get("WEBHOOK_SECRET", "").split()
    if not secrets:
        raise SystemExit("set WEBHOOK_SECRET to the destination's whsec_ secret")
    db_path = db_path or os.environ.get("WEBHOOK_DB", "receiver.sqlite3")
    with sqlite3.connect(db_path) as db:
        db.executescript("""
            CREATE TABLE IF NOT EXISTS processed (webhook_id TEXT PRIMARY KEY);
            CREATE TABLE IF NOT EXISTS effects (webhook_id TEXT, type TEXT, data TEXT);
        """)
    app = Flask(__name__)

    @app.post("/webhooks")
    def receive() -> ResponseReturnValue:
        """One delivery: 401 when not genuine, 200 once applied (or already applied)."""
        body = request.get_data()  # the exact bytes: the signature covers them
        try:
            verify(body, request.headers, secrets)
        except WebhookVerificationError as exc:
            return jsonify(error=str(exc)), 401
        message_id = request.headers["webhook-id"]
        event = json.loads(body)
        # A connection per request: WSGI servers run requests on several threads.
        db = sqlite3.connect(db_path, timeout=10)
        try:
            with db:  # one transaction: the dedupe mark and the effect, or neither
                first = db.execute("INSERT OR IGNORE INTO processed (webhook_id) VALUES (?)",
                                   (message_id,)).rowcount == 1
                if first:
                    apply_event(db, message_id, event)
        finally:
            db.close()
        return jsonify(ok=True, duplicate=not first)

    return app


def apply_event(db: sqlite3.Connection, message_id: str, event: dict[str, object]) -> None:
    """Your business logic goes here. A body from POST /v1/events is the event as the
    publisher sent it: {"id", "type", "data", "source"?}."""
    db.execute("INSERT INTO effects (webhook_id, type, data) VALUES (?, ?, ?)",
               (message_id, event.get("type"), json.dumps(event.get("data"))))
    print(f"processed {message_id} {event.get('type')}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--db", default="receiver.sqlite3", help="processed ids and effects")
    args = parser.parse_args()
    create_app(db_path=args.db).run(host=args.host, port=args.port)


if __name__ == "__main__":
    main()

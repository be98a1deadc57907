"""A plain HTTP receiver that records what it is sent, for tests that verify the deliveries'
headers and exact body bytes themselves (with `standardwebhooks`, say)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class RecordingHandler(BaseHTTPRequestHandler):
    """Answers every POST 200 and keeps its headers and body bytes in `received`."""

    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers.items()), body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the requests, not a log."""


def recording_handler() -> type[RecordingHandler]:
    """A RecordingHandler class with a `received` list of its own, so two test modules
    running in one process never see each other's requests."""
    return type("Recorder", (RecordingHandler,), {"received": []})


def verifies(secret: str, request: tuple[dict[str, str], bytes]) -> bool:
    """Whether a receiver holding only `secret` accepts a recorded request (standardwebhooks)."""
    headers, body = request
    try:
        Webhook(secret).verify(body, headers)
    except WebhookVerificationError:
        return False
    return True

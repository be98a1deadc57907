"""Operational events end to end: a real `hookline serve` drives a destination from healthy
to failing to auto-paused to recovered, and a receiver subscribed to `hookline.*` gets
exactly one signed event per state change (verified with the `standardwebhooks` package);
a second one with body_format `slack` gets the same events as `{"text": ...}`.
SQLite only (PostgreSQL would double its time): the state machine runs on both backends in
tests/unit/test_store_operational_events.py."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from procs import JSON_AUTH, healthy, start_cli, stop, wait_until
from standardwebhooks import Webhook

from hookline.rehearsal.harness import free_port

OPS_SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"
CHAT_SECRET = "whsec_" + "WllYV1ZVVFNSUVBPTk1MS0pJSEdGRURD"
SETTINGS = {  # short thresholds, fast retries: the whole story takes a few seconds
    "HOOKLINE_NOTIFY_FAILING_STREAK": "2", "HOOKLINE_BREAKER_FAILURES": "4",
    "HOOKLINE_BREAKER_MIN_SPAN_S": "0", "HOOKLINE_RETRY_BASE_S": "0.05",
    "HOOKLINE_RETRY_CAP_S": "0.1", "HOOKLINE_MAX_ATTEMPTS": "50",
    "HOOKLINE_POLL_INTERVAL_S": "0.1", "HOOKLINE_PUBLIC_URL": "https://hooks.example.com",
}


class Receiver:
    """/target answers `target_status`; /ops and /chat record every request and answer 200."""

    def __init__(self) -> None:
        self.target_status = 500
        self.got: dict[str, list[tuple[dict[str, str], bytes]]] = {"/ops": [], "/chat": []}
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                status = 200
                with receiver.lock:
                    if self.path == "/target":
                        status = receiver.target_status
                    else:
                        receiver.got[self.path].append((dict(self.headers), body))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def received(self, path: str) -> list[tuple[dict[str, str], bytes]]:
        with self.lock:
            return list(self.got[path])


@contextmanager
def receiving() -> Iterator[tuple[Receiver, str]]:
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), receiver.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def call(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=JSON_AUTH)
    with urllib.request.urlopen(request, timeout=5) as resp:
        return json.loads(resp.read() or b"{}")


def verified(secret: str, headers: dict[str, str], body: bytes) -> Any:
    """The body as the Standard Webhooks oracle verifies it (raises when the signature,
    id or timestamp does not hold)."""
    lower = {k.lower(): v for k, v in headers.items()}
    return Webhook(secret).verify(body, lower)


def test_failing_paused_recovered_reach_a_subscriber_once_each_signed(tmp_path: Path):
    db = str(tmp_path / "ops.db")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with receiving() as (receiver, url):
        service = start_cli(["--db", db, "serve", "--workers", "1", "--listen",
                             f"127.0.0.1:{port}"], tmp_path / "serve.log", env=SETTINGS)
        try:
            wait_until(lambda: healthy(base), 20, "ingest to answer /healthz")
            admin = f"{base}/v1/admin/destinations"
            call("POST", admin, {"name": "target", "url": f"{url}/target",
                                 "event_types": ["push"]})
            call("POST", admin, {"name": "ops", "url": f"{url}/ops", "secret": OPS_SECRET,
                                 "event_types": ["hookline.*"]})
            call("POST", admin, {"name": "chat", "url": f"{url}/chat", "secret": CHAT_SECRET,
                                 "event_types": ["hookline.destination.*"]})
            call("PATCH", f"{admin}/chat", {"body_format": "slack"})
            call("POST", f"{base}/v1/events", {"id": "e1", "type": "push", "data": {}})
            wait_until(lambda: len(receiver.received("/ops")) >= 2, 30,
                       "the failing and paused events")
            assert call("GET", f"{admin}/target")["paused"] is True
            receiver.target_status = 200
            call("POST", f"{admin}/target/resume", {})
            wait_until(lambda: len(receiver.received("/ops")) >= 3
                       and len(receiver.received("/chat")) >= 3, 30,
                       "the recovered event at both receivers")
            wait_until(lambda: call("GET", f"{base}/v1/admin/stats")["jobs_by_status"]
                       ["pending"] == 0, 10, "nothing left to deliver")
            metrics = urllib.request.urlopen(urllib.request.Request(
                f"{base}/metrics", headers=JSON_AUTH), timeout=5).read().decode()
        finally:
            assert stop(service) == 0
    ops = [(h, verified(OPS_SECRET, h, b)) for h, b in receiver.received("/ops")]
    assert [event["type"] for _, event in ops] == [
        "hookline.destination.failing", "hookline.destination.paused",
        "hookline.destination.recovered"]
    assert len({h["webhook-id"] for h, _ in ops}) == 3  # once each: no redelivery
    failing, paused, recovered = (event["data"] for _, event in ops)
    assert failing["destination"] == "target" and failing["tenant"] == "_default"
    assert failing["failure_streak"] == 2 and failing["last_status_code"] == 500
    assert failing["dashboard_url"] == "https://hooks.example.com/#/destinations?tenant=_default"
    assert paused["reason"] == "breaker" and paused["failure_streak"] == 4
    assert recovered["previous_state"] == "paused"
    chat = [verified(CHAT_SECRET, h, b) for h, b in receiver.received("/chat")]
    assert [set(c) for c in chat] == [{"text"}] * 3
    assert "is failing" in chat[0]["text"] and "(breaker)" in chat[1]["text"]
    assert "delivers again" in chat[2]["text"] and "<https://hooks.example.com/" in chat[2]["text"]
    for kind in ("failing", "paused", "recovered"):
        assert f'hookline_notifications_total{{kind="destination.{kind}"}} 1.0' in metrics

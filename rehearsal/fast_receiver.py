"""A lean webhook receiver for `hookline bench`: verifies, dedupes and counts, little else.

The receiver fixture (rehearsal/receiver.py) records every request and verifies with the
standardwebhooks library through aiohttp's full web stack; on a 2-core machine it used about
a third of the CPU of a delivery benchmark, CPU the service under test then lacked. This
one is a bare asyncio protocol over httptools (the C HTTP parser uvicorn uses) on uvloop:
keep-alive HTTP/1.1, `POST /NAME` checked against the endpoint's `whsec_` secret (Standard
Webhooks spec, signature section: HMAC-SHA256 over `id.timestamp.body`, any `v1,` entry
may match), the first request per `webhook-id` counted as an effect and later ones as
duplicates (at-least-once delivery: receivers dedupe by webhook-id), answered `204` (or
`401` for a bad signature, `404` for an unknown endpoint). `GET /_summary` serves the
counts per endpoint as JSON.

For `hookline bench --compare`, which measures accept -> first verified arrival, each effect
is also kept as (body SHA-256, unix seconds when the request completed): `GET /_receipts`
serves `{"effects": [{"endpoint", "body_sha256", "received_at"}, ...], "requests": verified
requests, "unverified": bad signatures}` and `GET /_count` `{"requests": verified requests,
"effects": N}` (the fixture's keys, cheap enough to poll). Only a first arrival is hashed,
and stored as a tuple; the dicts are built when served.

CLI: `python -m hookline.rehearsal.fast_receiver --listen 127.0.0.1:0 --endpoint NAME=SECRET ...`;
prints `{"port": N}` on its first stdout line, then serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import cast

import httptools

from hookline.shared.errors import ConfigError
from hookline.shared.signing import secret_key


@dataclass(slots=True)
class EndpointCounts:
    """What one endpoint saw: verified requests, first deliveries per webhook-id (effects),
    repeats of an id already seen (duplicates), and requests refused for their signature;
    `arrivals` holds each effect's (body SHA-256 hex, unix seconds received)."""

    key: bytes
    requests: int = 0
    effects: int = 0
    duplicates: int = 0
    bad_signatures: int = 0
    seen: set[str] = field(default_factory=set)
    arrivals: list[tuple[str, float]] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        return {"requests": self.requests, "effects": self.effects,
                "duplicates": self.duplicates, "bad_signatures": self.bad_signatures}


def receipts(endpoints: dict[str, EndpointCounts]) -> dict[str, object]:
    """Every endpoint's effects (first verified arrival per webhook-id: `endpoint`,
    `body_sha256`, `received_at` in unix seconds) and the counts of verified and refused
    requests, as served by `GET /_receipts`."""
    return {"effects": [{"endpoint": name, "body_sha256": sha, "received_at": at}
                        for name, c in endpoints.items() for sha, at in c.arrivals],
            "requests": sum(c.requests for c in endpoints.values()),
            "unverified": sum(c.bad_signatures for c in endpoints.values())}


def signature_ok(key: bytes, message_id: str, timestamp: str, body: bytes,
                 header: str) -> bool:
    """Whether any `v1,<base64>` entry of `header` is the HMAC-SHA256 of `id.timestamp.body`
    under `key` (Standard Webhooks spec, signature section)."""
    expected = base64.b64encode(hmac.new(key, f"{message_id}.{timestamp}.".encode() + body,
                                         hashlib.sha256).digest())
    return any(entry.startswith("v1,") and hmac.compare_digest(entry[3:].encode(), expected)
               for entry in header.split())


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: parse, check, answer, in arrival order."""

    def __init__(self, endpoints: dict[str, EndpointCounts]) -> None:
        self.endpoints = endpoints
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.WriteTransport | None = None
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though uvloop's is no subclass of asyncio's WriteTransport.
        self.transport = cast(asyncio.WriteTransport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._answer(400, b'{"error":"bad_request"}', close=True)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url, self.headers, self.body = b"", {}, []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        path = self.url.split(b"?", 1)[0].decode("latin-1")
        if method == b"GET" and path == "/_summary":
            counts = {name: c.summary() for name, c in self.endpoints.items()}
            self._answer(200, json.dumps({"endpoints": counts}).encode())
            return
        if method == b"GET" and path == "/_count":
            self._answer(200, json.dumps({
                "requests": sum(c.requests for c in self.endpoints.values()),
                "effects": sum(c.effects for c in self.endpoints.values())}).encode())
            return
        if method == b"GET" and path == "/_receipts":
            self._answer(200, json.dumps(receipts(self.endpoints)).encode())
            return
        endpoint = self.endpoints.get(path.lstrip("/"))
        if method != b"POST" or endpoint is None:
            self._answer(404, b'{"error":"not_found"}')
            return
        received_at = time.time()
        get = self.headers.get
        message_id = get(b"webhook-id", b"").decode("latin-1")
        body = b"".join(self.body)
        if not signature_ok(endpoint.key, message_id,
                            get(b"webhook-timestamp", b"").decode("latin-1"), body,
                            get(b"webhook-signature", b"").decode("latin-1")):
            endpoint.bad_signatures += 1
            self._answer(401, b'{"error":"bad_signature"}')
            return
        endpoint.requests += 1
        if message_id in endpoint.seen:
            endpoint.duplicates += 1
        else:
            endpoint.seen.add(message_id)
            endpoint.effects += 1
            endpoint.arrivals.append((hashlib.sha256(body).hexdigest(), received_at))
        self._answer(204, b"")

    def _answer(self, status: int, body: bytes, close: bool = False) -> None:
        assert self.transport is not None
        reason = {200: b"OK", 204: b"No Content", 400: b"Bad Request", 401: b"Unauthorized",
                  404: b"Not Found"}[status]
        head = b"HTTP/1.1 %d %s\r\n" % (status, reason)
        if status != 204:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        if close or not self.parser.should_keep_alive():
            head += b"Connection: close\r\n"
            self.transport.write(head + b"\r\n" + body)
            self.transport.close()
            return
        self.transport.write(head + b"\r\n" + body)


async def serve(host: str, port: int, endpoints: dict[str, EndpointCounts],
                announce: bool = True) -> None:
    """Serve until SIGTERM/SIGINT; prints `{"port": N}` first when `announce`."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Connection(endpoints), host, port, backlog=1024)
    if announce:
        print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with server:
        await stop.wait()


def parse_endpoint(spec: str) -> tuple[str, EndpointCounts]:
    """`NAME=SECRET` (a trailing `:ok` behaviour, as the fixture takes, is accepted) ->
    (name, counts). Raises ValueError (or ConfigError for a malformed secret)."""
    name, _, secret = spec.partition("=")
    if not name or not secret:
        raise ValueError(f"--endpoint must be NAME=SECRET, not {spec!r}")
    secret = secret.removesuffix(":ok")
    return name, EndpointCounts(key=secret_key(secret))


def main(argv: list[str] | None = None) -> int:
    """CLI entry; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.fast_receiver")
    parser.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT")
    parser.add_argument("--endpoint", action="append", required=True, metavar="NAME=SECRET")
    args = parser.parse_args(argv)
    try:
        endpoints = dict(parse_endpoint(spec) for spec in args.endpoint)
    except (ValueError, ConfigError) as exc:
        print(f"fast_receiver: {exc}", file=sys.stderr)
        return 2
    host, _, port = args.listen.rpartition(":")
    try:
        import uvloop  # noqa: PLC0415  (optional: faster loop when installed)

        uvloop.run(serve(host, int(port), endpoints))
    except ImportError:
        asyncio.run(serve(host, int(port), endpoints))
    return 0


if __name__ == "__main__":
    sys.exit(main())

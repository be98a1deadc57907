"""Ingest's request-head limits over a real socket: `serve()` on 127.0.0.1 with a real SQLite
file, raw HTTP bytes written to it (ingest/http_limits.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from hookline.shared.config import Config
from hookline.shared.store.sqlite import SqliteStore
from tests.integration.test_ingest import event_body, start_serve

LIMITS = {"max_header_bytes": 1024, "max_headers": 20}
TOKEN = "limits-test-token"


@pytest.fixture
async def ingest(tmp_path: Path) -> AsyncIterator[tuple[int, Config]]:
    """serve() on a free port with small header limits; (port, config)."""
    config = Config(db=str(tmp_path / "limits.db"), listen="127.0.0.1:0", ingest_token=TOKEN,
                    **LIMITS)
    task, stop, port = await start_serve(config)
    yield port, config
    stop.set()
    await asyncio.wait_for(task, 10)


async def raw_request(port: int, headers: list[tuple[str, str]], body: bytes = b"",
                      target: str = "/v1/events") -> tuple[int, dict[str, str], bytes]:
    """POST `body` with exactly `headers` (plus Host, Content-Length, Connection: close and
    the ingest token's Authorization) as raw bytes; (status, response headers, body)."""
    head = [f"POST {target} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}",
            "Connection: close", f"Authorization: Bearer {TOKEN}",
            *(f"{name}: {value}" for name, value in headers)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    raw_headers, _, payload = rest.partition(b"\r\n\r\n")
    parsed = dict(line.decode().split(": ", 1) for line in raw_headers.split(b"\r\n") if line)
    return int(status_line.split()[1]), {k.lower(): v for k, v in parsed.items()}, payload


def json_body(headers: dict[str, str], payload: bytes) -> Any:
    assert headers["content-type"].startswith("application/json")
    return json.loads(payload)


async def stored_events(config: Config) -> int:
    async with SqliteStore(config.db) as store:
        return (await store.stats()).events


@pytest.mark.parametrize(("name", "headers"), [
    ("oversize field", [("Content-Type", "application/json"), ("X-Big", "a" * 1100)]),
    ("oversize name", [("Content-Type", "application/json"), ("X-" + "n" * 1100, "1")]),
    ("too many fields", [("Content-Type", "application/json")]
     + [(f"X-Extra-{i}", "1") for i in range(25)]),
])
async def test_header_limits_answer_431_json_store_nothing_and_keep_serving(ingest, name,
                                                                             headers):
    """A header field over max_header_bytes, or more than max_headers fields, is answered
    431 headers_too_large in the JSON error shape before any handler runs; nothing is stored,
    and the next request on a new connection is served normally."""
    port, config = ingest
    with capture_logs() as logs:
        status, response_headers, payload = await raw_request(port, headers, event_body("x"))
    assert status == 431, (name, payload)
    answer = json_body(response_headers, payload)
    assert answer["error"] == "headers_too_large" and answer["detail"]
    assert [(e["event"], e["status"]) for e in logs] == [("request_rejected", 431)]
    assert await stored_events(config) == 0

    status, response_headers, payload = await raw_request(
        port, [("Content-Type", "application/json")], event_body("after"))
    assert status == 202, payload
    assert await stored_events(config) == 1


async def test_headers_at_the_limits_are_accepted(ingest):
    """A field of exactly max_header_bytes (name + value) and exactly max_headers fields
    (Host, Content-Length, Connection, Authorization and Content-Type included) pass."""
    port, config = ingest
    name = "X-Fill"
    headers = [("Content-Type", "application/json"),
               (name, "v" * (LIMITS["max_header_bytes"] - len(name)))]
    headers += [(f"X-Extra-{i}", "1") for i in range(LIMITS["max_headers"] - 4 - len(headers))]
    status, _, payload = await raw_request(port, headers, event_body("edge"))
    assert status == 202, payload
    assert await stored_events(config) == 1


async def test_overlong_request_line_is_414_and_garbage_is_400_json(ingest):
    """A request line over 8192 bytes is 414 uri_too_long; an unparsable request is 400
    bad_request; both JSON, neither stores anything."""
    port, config = ingest
    status, headers, payload = await raw_request(port, [], target="/v1/events?" + "q" * 9000)
    assert (status, json_body(headers, payload)["error"]) == (414, "uri_too_long")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"\x16\x03\x01 not http at all\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"400"
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"] == "bad_request"
    assert await stored_events(config) == 0

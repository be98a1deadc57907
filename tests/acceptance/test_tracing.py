"""Tracing end to end: a running `hookline serve` with `tracing` on exports to a real OTLP/HTTP
receiver this test starts (its protobuf decoded with the OpenTelemetry proto package), and one
published event is followed from the publisher's span to the receiver that continued the
trace: publisher -> `POST /v1/events` -> `hookline.group_commit` and each `hookline.attempt`
(a retry a sibling of the first attempt) -> the `traceparent` the receiver got."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import hmac
import json
import sqlite3
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from procs import AUTH, TEST_TOKEN, run_cli, start_cli, stop, wait_until

from hookline.rehearsal.harness import free_port
from hookline.shared.signing import generate_secret

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PUBLISHER_SPAN = "00f067aa0ba902b7"
TRACESTATE = "publisher=abc"


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: every span of every `POST /v1/traces`, decoded, as
    {"name", "trace", "span", "parent", "kind", "attributes", "links", "resource"}."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CollectorHandler)
        self.spans: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def named(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.spans if s["name"] == name]


class _CollectorHandler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces" or self.headers["Content-Type"] != "application/x-protobuf":
            self.send_error(404)
            return
        export = ExportTraceServiceRequest.FromString(body)
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    with self.server.lock:
                        self.server.spans.append({
                            "name": span.name, "trace": span.trace_id.hex(),
                            "span": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                            "kind": span.kind, "resource": resource,
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "links": [link.span_id.hex() for link in span.links]})
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the spans, not the access log."""


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Endpoint(ThreadingHTTPServer):
    """A webhook receiver recording each request's trace headers; `fail_first` answers the
    first request 503, so the event is retried."""

    def __init__(self, fail_first: bool) -> None:
        super().__init__(("127.0.0.1", 0), _EndpointHandler)
        self.fail_first = fail_first
        self.seen: list[dict[str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _EndpointHandler(BaseHTTPRequestHandler):
    server: Endpoint

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.seen.append({name: self.headers.get(name)
                                 for name in ("traceparent", "tracestate", "webhook-id")})
        status = 503 if self.server.fail_first and len(self.server.seen) == 1 else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _serving(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def servers() -> Iterator[tuple[Collector, Endpoint, Endpoint]]:
    collector, traced, plain = Collector(), Endpoint(fail_first=True), Endpoint(fail_first=False)
    for server in (collector, traced, plain):
        _serving(server)
    try:
        yield collector, traced, plain
    finally:
        for server in (collector, traced, plain):
            server.shutdown()
            server.server_close()


def test_one_event_is_one_trace_from_publisher_to_receiver(
        tmp_path: Path, servers: tuple[Collector, Endpoint, Endpoint]) -> None:
    collector, traced, plain = servers
    db = str(tmp_path / "svc.db")
    setup = [["destinations", "add", "traced", traced.url, "--secret", generate_secret(),
              "--propagate-trace"],
             ["destinations", "add", "plain", plain.url, "--secret", generate_secret()]]
    with _traced_service(tmp_path, db, collector, setup,
                         {"HOOKLINE_RETRY_BASE_S": "0.2"}) as base:
        published = _publish(base, traceparent=f"00-{TRACE_ID}-{PUBLISHER_SPAN}-01")
        wait_until(lambda: len(collector.named("hookline.attempt")) == 3, 30,
                   "three attempt spans at the collector")
        dropped = _scrape(base, "hookline_otel_spans_dropped_total")

    [request] = collector.named("POST /v1/events")
    [commit] = collector.named("hookline.group_commit")
    attempts = sorted(collector.named("hookline.attempt"),
                      key=lambda s: (s["attributes"]["hookline.destination"],
                                     s["attributes"]["hookline.attempt"]))
    assert {s["trace"] for s in (request, commit, *attempts)} == {TRACE_ID}
    assert request["parent"] == PUBLISHER_SPAN  # the publisher's traceparent, continued
    assert request["attributes"]["http.response.status_code"] == 202
    assert request["resource"]["service.name"] == "hookline"
    assert request["resource"]["hookline.slot"] == "ingest"
    assert commit["parent"] == request["span"] and commit["attributes"][
        "hookline.batch.events"] == 1
    # Every attempt, the retry included, is a child of the request: siblings.
    assert [s["parent"] for s in attempts] == [request["span"]] * 3
    assert {s["resource"]["hookline.slot"] for s in attempts} == {"worker-1"}
    assert [(s["attributes"]["hookline.destination"], s["attributes"]["hookline.attempt"],
             s["attributes"].get("http.response.status_code"),
             s["attributes"]["hookline.outcome"]) for s in attempts] == [
        ("plain", 1, 200, "done"), ("traced", 1, 503, "retry"), ("traced", 2, 200, "done")]
    assert {s["attributes"]["hookline.webhook_id"] for s in attempts} == {
        published["message_id"]}
    assert {s["attributes"]["hookline.tenant"] for s in attempts} == {"_default"}
    assert all(s["attributes"]["hookline.duration_s"] >= 0 for s in attempts)
    assert attempts[1]["attributes"]["error.type"] == "HTTP 503"

    # The receiver continues the trace: each request's traceparent names its attempt span.
    assert [seen["traceparent"] for seen in traced.seen] == [
        f"00-{TRACE_ID}-{attempt['span']}-01" for attempt in attempts[1:]]
    assert [seen["tracestate"] for seen in traced.seen] == [TRACESTATE] * 2
    assert plain.seen == [{"traceparent": None, "tracestate": None,
                           "webhook-id": published["message_id"]}]

    with sqlite3.connect(db) as conn:
        [(stored,)] = conn.execute("SELECT trace_context FROM events").fetchall()
    assert stored == f"00-{TRACE_ID}-{request['span']}-01\n{TRACESTATE}"
    assert dropped == {"export_failed": 0.0, "queue_full": 0.0}
    print(json.dumps([{k: s[k] for k in ("name", "span", "parent")}
                      for s in (request, commit, *attempts)], indent=1))


def test_a_provider_event_is_traced_like_a_published_one(
        tmp_path: Path, servers: tuple[Collector, Endpoint, Endpoint]) -> None:
    """A GitHub delivery to POST /v1/sources/{name} gets its own request span (a new trace:
    providers send no traceparent), stored with the event, and its delivery's attempt is
    that span's child."""
    collector, _traced, plain = servers
    db = str(tmp_path / "svc.db")
    secret = "gh-secret-for-the-test"
    setup = [["destinations", "add", "plain", plain.url, "--secret", generate_secret()],
             ["sources", "add", "gh", "--scheme", "github", "--secret", secret]]
    with _traced_service(tmp_path, db, collector, setup, {}) as base:
        body = json.dumps({"action": "opened", "number": 7}).encode()
        signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(f"{base}/v1/sources/gh", data=body, headers={
            "content-type": "application/json", "X-GitHub-Delivery": "d-1",
            "X-GitHub-Event": "pull_request", "X-Hub-Signature-256": f"sha256={signature}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 202
        wait_until(lambda: len(collector.named("hookline.attempt")) == 1, 30,
                   "the attempt span at the collector")

    [span] = collector.named("POST /v1/sources/{name}")
    [attempt] = collector.named("hookline.attempt")
    assert span["parent"] == "" and span["attributes"]["http.response.status_code"] == 202
    assert attempt["trace"] == span["trace"] and attempt["parent"] == span["span"]
    assert attempt["attributes"]["hookline.event_type"] == "pull_request.opened"
    with sqlite3.connect(db) as conn:
        [(stored,)] = conn.execute("SELECT trace_context FROM events").fetchall()
    # flags: sampled, and (a trace the SDK began) its trace id random: 03
    assert stored.startswith(f"00-{span['trace']}-{span['span']}-0")


@contextlib.contextmanager
def _traced_service(tmp_path: Path, db: str, collector: Collector, setup: list[list[str]],
                    env: dict[str, str]) -> Iterator[str]:
    """`hookline serve` (1 worker) on `db` with tracing on, exporting to `collector`, after
    `init` and the `setup` CLI commands; yields its base URL once ready, stops it after."""
    env = {"HOOKLINE_DB": db, "HOOKLINE_TRACING": "true",
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
           "OTEL_BSP_SCHEDULE_DELAY": "100", **env}
    for command in (["init"], *setup):
        done = run_cli(*command, env=env)
        assert done.returncode == 0, done.stderr
    port = free_port()
    serve = start_cli(["serve", "--workers", "1", "--listen", f"127.0.0.1:{port}"],
                      tmp_path / "serve.out", env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _ready(base), 30, "hookline serve to be ready")
        yield base
    finally:
        assert stop(serve) == 0


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _publish(base: str, traceparent: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base}/v1/events", data=json.dumps({"type": "order.created", "id": "o-1",
                                              "data": {"order": 1}}).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {TEST_TOKEN}",
                 "traceparent": traceparent, "tracestate": TRACESTATE})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 202
        answer: dict[str, Any] = json.loads(resp.read())
        return answer


def _scrape(base: str, family: str) -> dict[str, float]:
    """{reason label: value} of `family`'s series in /metrics."""
    request = urllib.request.Request(f"{base}/metrics", headers=AUTH)
    with urllib.request.urlopen(request, timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(family + "{"):
            labels, value = line[len(family) + 1:].split("} ")
            out[labels.split('"')[1]] = float(value)
    return out

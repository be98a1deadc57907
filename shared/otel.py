"""OpenTelemetry traces: the spans hookline makes and how they leave the process.

Imported only while the `tracing` setting is on (:func:`hookline.shared.tracing.start_tracing`);
OPERATIONS.md, "Tracing", is the operator's view. One trace per published event:

* `POST /v1/events` (SERVER): ingest's request, continuing the publisher's `traceparent`
  (and `tracestate`), or the root of a new trace. Its context is stored with the event.
* `hookline.group_commit` (INTERNAL): one store transaction holding the events of many
  requests. A span has one parent, so it is the child of the first traced request of its
  batch and carries a *link* to every other one: a lone request (an idle server) sees its
  commit inline, and under load every request's trace still reaches the commit that made it
  durable, through the link, without one commit span per request (the commit is one piece of
  work, and a copy per event would multiply the spans a loaded ingest exports by the batch
  size).
* `hookline.attempt` (CLIENT): one delivery attempt, in whichever worker process makes it,
  a child of the stored request span, so retries are siblings. With the destination's
  `propagate_trace`, the request carries this span's `traceparent` (and `tracestate`).

Spans leave through :class:`BoundedBatchProcessor`: a bounded queue emptied by one
background thread in batches to the SDK's OTLP/HTTP exporter. Nothing on the event loop
waits for the collector: a full queue drops the span, an export that fails drops its batch,
and both are counted (`hookline_otel_spans_dropped_total{reason}`), so an unreachable
collector never slows or fails an event or a delivery. The exporter, the sampler and the
resource are configured by the standard `OTEL_*` variables (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, OTEL_BSP_MAX_QUEUE_SIZE, ...).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from hookline.shared.logs import get_logger
from hookline.shared.models import AttemptResult, Claim, Dead, Done, Outcome
from hookline.shared.tracing import (
    TRACE_HEADERS,
    batch_settings,
    decode_trace_context,
    encode_trace_context,
)
from hookline.shared.version import VERSION

DEFAULT_SERVICE_NAME = "hookline"
COMMIT_SPAN = "hookline.group_commit"
ATTEMPT_SPAN = "hookline.attempt"
SHUTDOWN_WAIT_S = 2.0
"""Longest a stopping process waits for its last spans to be exported, seconds."""

_PROPAGATOR = TraceContextTextMapPropagator()
_NO_PARENT = Context()  # an empty context: the span starts a new trace


class BoundedBatchProcessor(SpanProcessor):
    """Queues ended spans (at most `max_queue_size`) and exports them from one daemon thread
    in batches of at most `max_batch`, every `delay_s` or as soon as a batch is full.

    :meth:`on_end` runs on the caller's thread (the event loop) and never blocks: when the
    queue is full the span is dropped. An export that fails (the collector refused it, is
    unreachable, or timed out: OTEL_EXPORTER_OTLP_TIMEOUT) drops its batch. Both are counted
    in :attr:`dropped`. One `traces_export_failed` line is logged per run of failures, and
    `traces_export_recovered` when an export succeeds again.

    Args:
        exporter: where batches go (the SDK's OTLP/HTTP exporter in production).
        max_queue_size: spans held at most (OTEL_BSP_MAX_QUEUE_SIZE, default 2048).
        max_batch: spans per export at most (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 512).
        delay_s: longest a span waits for its export, seconds (OTEL_BSP_SCHEDULE_DELAY in
            milliseconds, default 5000).

    Attributes:
        dropped: spans lost, by reason: `queue_full`, `export_failed`.
        exported: spans the exporter accepted.
    """

    def __init__(self, exporter: SpanExporter, *, max_queue_size: int, max_batch: int,
                 delay_s: float) -> None:
        self._exporter = exporter
        self._max_queue_size = max_queue_size
        self._max_batch = min(max_batch, max_queue_size)
        self._delay_s = delay_s
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = False
        self._failing = False
        self.dropped = {"queue_full": 0, "export_failed": 0}
        self.exported = 0
        self._thread = threading.Thread(target=self._run, name="otel-export", daemon=True)
        self._thread.start()

    @classmethod
    def from_environment(cls, exporter: SpanExporter) -> BoundedBatchProcessor:
        """A processor sized by the standard OTEL_BSP_* variables."""
        sizes = batch_settings()
        return cls(exporter, max_queue_size=sizes["OTEL_BSP_MAX_QUEUE_SIZE"],
                   max_batch=sizes["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"],
                   delay_s=sizes["OTEL_BSP_SCHEDULE_DELAY"] / 1000)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue a sampled span for export, or count it dropped when the queue is full."""
        if self._stopping or not span.context.trace_flags.sampled:
            return
        if len(self._queue) >= self._max_queue_size:
            self.dropped["queue_full"] += 1
            return
        self._queue.append(span)
        if len(self._queue) >= self._max_batch:
            self._wake.set()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Ask for an export of everything queued now and wait up to `timeout_millis` for
        the queue to empty; returns whether it did."""
        deadline = time.monotonic() + timeout_millis / 1000
        while self._queue or not self._idle.is_set():
            if time.monotonic() >= deadline or not self._thread.is_alive():
                return False
            self._wake.set()
            time.sleep(0.01)
        return True

    def shutdown(self) -> None:
        """Export what is queued (waiting at most SHUTDOWN_WAIT_S), then stop the thread;
        spans still queued then are counted dropped (`export_failed`)."""
        self.force_flush(int(SHUTDOWN_WAIT_S * 1000))
        self._stopping = True
        self._wake.set()
        self._thread.join(SHUTDOWN_WAIT_S)
        self.dropped["export_failed"] += len(self._queue)
        self._queue.clear()
        self._exporter.shutdown()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self._delay_s)
            self._wake.clear()
            while self._queue and not self._stopping:
                self._idle.clear()
                batch = [self._queue.popleft()
                         for _ in range(min(self._max_batch, len(self._queue)))]
                self._export(batch)
                self._idle.set()

    def _export(self, batch: list[ReadableSpan]) -> None:
        try:
            result = self._exporter.export(batch)
        except Exception as exc:  # noqa: BLE001  (the export thread must outlive any fault)
            result = SpanExportResult.FAILURE
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = "the exporter reported a failure"
        if result is SpanExportResult.SUCCESS:
            self.exported += len(batch)
            if self._failing:
                self._failing = False
                get_logger().info("traces_export_recovered")
            return
        self.dropped["export_failed"] += len(batch)
        if not self._failing:
            self._failing = True
            get_logger().warning("traces_export_failed", spans=len(batch), error=error)


class Attempt:
    """One delivery attempt's span (see :meth:`Tracing.attempt`).

    Attributes:
        span: the `hookline.attempt` span.
        claim: the claim to send: the one given, plus the `traceparent` (and `tracestate`)
            of this span as request headers when its destination asks for them.
    """

    __slots__ = ("claim", "span")

    def __init__(self, span: Span, claim: Claim) -> None:
        self.span = span
        self.claim = claim

    def record(self, result: AttemptResult, outcome: Outcome) -> None:
        """Set what happened on the wire and what it earned as the span's attributes."""
        span = self.span
        span.set_attribute("hookline.duration_s", result.duration_s)
        if result.status_code is not None:
            span.set_attribute("http.response.status_code", result.status_code)
        kind = ("done" if isinstance(outcome, Done) else "dead" if isinstance(outcome, Dead)
                else "retry")
        span.set_attribute("hookline.outcome", kind)
        if kind != "done":
            error = result.error or f"HTTP {result.status_code}"
            span.set_attribute("error.type", error.split(":", 1)[0])
            span.set_attribute("hookline.error", error)
            span.set_status(Status(StatusCode.ERROR, error))


class Tracing:
    """A process's tracer provider, exporter and the spans hookline makes (module docstring).

    Args:
        slot: the supervisor's name for this process; the resource attribute `hookline.slot`.
        exporter: where spans go; None: the SDK's OTLP/HTTP exporter, configured by the
            OTEL_EXPORTER_OTLP_* variables (default http://localhost:4318/v1/traces).

    Raises:
        ConfigError: an OTEL_BSP_* variable is malformed.
    """

    def __init__(self, slot: str, exporter: SpanExporter | None = None) -> None:
        resource = Resource.create({"hookline.slot": slot, "service.version": VERSION})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            # Neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names the service.
            resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
        # The exporter logs every failed export on its own; the processor logs one line
        # per run of failures instead (traces_export_failed / traces_export_recovered).
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        self.processor = BoundedBatchProcessor.from_environment(
            exporter if exporter is not None else OTLPSpanExporter())
        # The sampler comes from OTEL_TRACES_SAMPLER (default: parent-based, always on).
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.provider.add_span_processor(self.processor)
        self._tracer = self.provider.get_tracer("hookline", VERSION)
        self._stopped = False

    def dropped(self) -> dict[str, int]:
        """Spans lost so far, by reason (`queue_full`, `export_failed`)."""
        return dict(self.processor.dropped)

    def shutdown(self) -> None:
        """Export what is queued (bounded by SHUTDOWN_WAIT_S) and stop (idempotent)."""
        if not self._stopped:
            self._stopped = True
            self.provider.shutdown()

    @contextlib.contextmanager
    def request(self, route: str, headers: Mapping[str, str]) -> Iterator[Span]:
        """A SERVER span for one request on `route` (`POST /v1/events`), the child of the
        publisher's `traceparent` in `headers` (a new trace without one, or with a malformed
        one). Ended on exit; an exception marks it failed."""
        parent = _PROPAGATOR.extract(headers)
        method, _, path = route.partition(" ")
        span = self._tracer.start_span(route, context=parent, kind=SpanKind.SERVER,
                                       attributes={"http.request.method": method,
                                                   "http.route": path})
        with trace.use_span(span, end_on_exit=True, record_exception=True,
                            set_status_on_exception=True):
            yield span

    @staticmethod
    def answered(span: Span, status: int) -> None:
        """Record a request span's answer: its status code; a 5xx marks it failed."""
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))

    @staticmethod
    def stored_context(span: Span) -> str | None:
        """The stored form of `span`'s context (hookline.shared.tracing); None when invalid."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
        return encode_trace_context(carrier)

    @contextlib.contextmanager
    def commit(self, stored: Sequence[str | None]) -> Iterator[Span]:
        """The span of one group commit of events whose stored trace contexts are `stored`:
        the child of the first one, linked to the others (module docstring)."""
        contexts = [c for c in map(_span_context, stored) if c is not None]
        parent = (trace.set_span_in_context(trace.NonRecordingSpan(contexts[0])) if contexts
                  else _NO_PARENT)
        span = self._tracer.start_span(
            COMMIT_SPAN, context=parent, links=[Link(c) for c in contexts[1:]],
            attributes={"hookline.batch.events": len(stored)})
        with trace.use_span(span, end_on_exit=True, record_exception=True,
                            set_status_on_exception=True):
            yield span

    @contextlib.contextmanager
    def attempt(self, claim: Claim) -> Iterator[Attempt]:
        """The span of one attempt of `claim`, the child of its event's stored context (the
        root of a new trace for an event stored without one). When its destination asks
        (`propagate_trace`), the attempt's claim carries this span's `traceparent` and
        `tracestate` headers, replacing custom headers of those names."""
        stored = _span_context(claim.trace_context)
        parent = (trace.set_span_in_context(trace.NonRecordingSpan(stored))
                  if stored is not None else _NO_PARENT)
        span = self._tracer.start_span(ATTEMPT_SPAN, context=parent, kind=SpanKind.CLIENT,
                                       attributes={
                                           "hookline.destination": claim.destination_name,
                                           "hookline.tenant": claim.tenant_id,
                                           "hookline.webhook_id": claim.message_id,
                                           "hookline.event_id": claim.event_id,
                                           "hookline.job_id": claim.job_id,
                                           "hookline.attempt": claim.attempt,
                                           "hookline.event_type": claim.event_type,
                                           "http.request.method": "POST"})
        sent = claim
        if claim.propagate_trace:
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
            kept = tuple(h for h in claim.headers if h[0].lower() not in TRACE_HEADERS)
            sent = replace(claim, headers=kept + tuple(carrier.items()))
        with trace.use_span(span, end_on_exit=True, record_exception=True,
                            set_status_on_exception=True):
            yield Attempt(span, sent)


def _span_context(stored: str | None) -> SpanContext | None:
    """The remote span context a stored trace context names; None for none or a malformed
    one."""
    if not stored:
        return None
    context = trace.get_current_span(_PROPAGATOR.extract(decode_trace_context(stored)))
    span_context = context.get_span_context()
    return span_context if span_context.is_valid else None

"""Tracing's faults: a collector that cannot be reached never fails a delivery (its spans are
counted dropped), and tracing turned on without OpenTelemetry installed is a configuration
error naming the install command."""

from __future__ import annotations

import asyncio
import time

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from hookline.rehearsal.harness import free_port
from hookline.rehearsal.receiver import Endpoint, Receiver
from hookline.shared import tracing
from hookline.shared.config import Config
from hookline.shared.errors import InvalidSetting
from hookline.shared.otel import Tracing
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from hookline.workers.loop import Worker
from hookline.workers.sender import Sender
from tests.conftest import new_event, settle
from tests.integration.test_worker import FAST

EVENTS = 20


async def test_an_unreachable_collector_never_fails_a_delivery(tmp_path):
    """Exporting to a closed port: every event is delivered on its first attempt as without
    tracing, and every attempt span is counted dropped (export_failed), none exported."""
    closed = f"http://127.0.0.1:{free_port()}/v1/traces"  # nothing listens there
    traced = Tracing("worker-1", exporter=OTLPSpanExporter(endpoint=closed, timeout=0.5))
    secret = generate_secret()
    async with SqliteStore(str(tmp_path / "t.db")) as store, \
            Receiver([Endpoint("ok", secret)]) as receiver:
        await store.add_destination(name="ok", url=receiver.url("ok"), secret=secret,
                                    event_types=["*"], max_in_flight=10, propagate_trace=True)
        stop = asyncio.Event()
        async with Sender(timeout_s=FAST.attempt_timeout_s,
                          policy=FAST.address_policy) as sender:
            worker = Worker(store, FAST, "w1", sender, tracing=traced)
            task = asyncio.create_task(worker.run(stop))
            try:
                await store.add_events([new_event(f"e{i}") for i in range(EVENTS)])
                counts = await settle(store)
            finally:
                stop.set()
                await task
        assert counts["done"] == EVENTS and len(receiver.effects) == EVENTS
        assert [a.attempt for a in await store.list_attempts()] == [1] * EVENTS
    await asyncio.to_thread(traced.shutdown)
    deadline = time.monotonic() + 10
    while sum(traced.dropped().values()) < EVENTS and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # an export under way when shutdown gave up ends late
    assert traced.dropped() == {"queue_full": 0, "export_failed": EVENTS}
    assert traced.processor.exported == 0


def test_tracing_on_without_opentelemetry_is_a_config_error(monkeypatch):
    """The setting's rule looks for the packages: with one missing (a module name that
    cannot exist stands in for it), tracing on is refused naming `pip install
    'hookline[otel]'`; tracing off never looks."""
    monkeypatch.setattr(tracing, "_REQUIRED", ("opentelemetry_missing_for_test.sdk",))
    with pytest.raises(InvalidSetting, match=r"tracing.*pip install 'hookline\[otel\]'"):
        Config(tracing=True)
    assert Config(tracing=False).tracing is False
    assert tracing.start_tracing(False, "ingest") is None

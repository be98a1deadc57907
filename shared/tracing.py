"""Tracing's front door, importable without OpenTelemetry installed.

Tracing is opt-in (the `tracing` setting; OPERATIONS.md, "Tracing"). While it is off nothing
here imports OpenTelemetry, and no code on ingest's or the workers' hot path does more than
test a `None`. When it is on, :func:`start_tracing` loads :mod:`hookline.shared.otel` (the SDK,
its OTLP/HTTP exporter, the spans hookline makes); the setting's rule
(:func:`check_tracing_setting`) refuses it at load time when those packages are missing, a
permanent configuration error naming the install command.

The trace context stored with an event (`events.trace_context`) is the W3C `traceparent` of
the ingest request's span, followed by a newline and the `tracestate` when there is one
(:func:`encode_trace_context`, :func:`decode_trace_context`): every delivery attempt, in any
worker process and however much later, is a child span of it.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from hookline.shared.errors import ConfigError, InvalidSetting

if TYPE_CHECKING:
    from hookline.shared.otel import Tracing

INSTALL_HINT = "pip install 'hookline[otel]'"
"""How to get the packages tracing needs (the `otel` extra)."""

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACE_HEADERS = frozenset({TRACEPARENT, TRACESTATE})
"""The W3C Trace Context headers (lower case)."""

BATCH_DEFAULTS = {"OTEL_BSP_MAX_QUEUE_SIZE": 2048, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512,
                  "OTEL_BSP_SCHEDULE_DELAY": 5000}
"""The span export queue's variables that hookline reads itself, with their defaults (spans,
spans, milliseconds); the other `OTEL_*` variables go to the OpenTelemetry SDK."""

_REQUIRED = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")
_SEPARATOR = "\n"  # neither header value may hold one (they are single HTTP header lines)


def missing_packages() -> list[str]:
    """The OpenTelemetry modules tracing needs that cannot be imported ([] when all can)."""
    missing = []
    for module in _REQUIRED:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            missing.append(module)
    return missing


def check_tracing_setting(name: str, value: Any) -> None:
    """The `tracing` setting's rule: on only when the OpenTelemetry packages are installed.

    Raises:
        InvalidSetting: tracing is on and a package is missing (the message names the
            install command); permanent, so the service does not start.
    """
    if value and (missing := missing_packages()):
        raise InvalidSetting(name, f"is on but OpenTelemetry is not installed (no "
                                   f"{', '.join(missing)}): run {INSTALL_HINT}, or turn "
                                   "tracing off")


def batch_settings() -> dict[str, int]:
    """The span export queue's `OTEL_BSP_*` variables (BATCH_DEFAULTS' names): each one's
    value, or its default when unset. Read by every process that traces, at start, and by
    `hookline serve --check`.

    Raises:
        ConfigError: one is set, but not to a positive integer; the message names it
            (permanent: fix the environment).
    """
    found = {}
    for name, default in BATCH_DEFAULTS.items():
        raw = os.environ.get(name, "").strip()
        if not raw:
            found[name] = default
            continue
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            raise ConfigError(f"{name} must be a positive integer, not {raw!r}")
        found[name] = value
    return found


def start_tracing(enabled: bool, slot: str) -> Tracing | None:
    """The process's tracing, or None when the setting is off.

    Args:
        enabled: the `tracing` setting.
        slot: the supervisor's name for this process (`ingest`, `worker-2`), a resource
            attribute of every span it exports.

    Returns:
        A started :class:`hookline.shared.otel.Tracing` (its exporter and span processor
        configured from the standard `OTEL_*` variables), or None.
    """
    if not enabled:
        return None
    from hookline.shared.otel import Tracing  # noqa: PLC0415  (optional dependency)
    return Tracing(slot)


def encode_trace_context(carrier: dict[str, str]) -> str | None:
    """The stored form of a W3C carrier: `traceparent`, then a newline and `tracestate`
    when present; None without a traceparent."""
    parent = carrier.get(TRACEPARENT)
    if not parent:
        return None
    state = carrier.get(TRACESTATE)
    return f"{parent}{_SEPARATOR}{state}" if state else parent


def decode_trace_context(stored: str | None) -> dict[str, str]:
    """A W3C carrier ({"traceparent": ..., "tracestate": ...}) from the stored form ({} for
    None)."""
    if not stored:
        return {}
    parent, _, state = stored.partition(_SEPARATOR)
    return {TRACEPARENT: parent, TRACESTATE: state} if state else {TRACEPARENT: parent}

"""The log line's own timestamp and JSON rendering write exactly what structlog's
TimeStamper(fmt="iso", utc=True) and JSONRenderer wrote before them."""

from __future__ import annotations

import datetime
import time

import pytest
import structlog

from hookline.shared.logs import render_json, stamp_iso_utc


@pytest.mark.parametrize("nanos", [
    0, 1_700_000_000_000_000_000, 1_700_000_000_123_456_789, 1_700_000_000_000_000_999,
    1_799_999_999_999_999_999, 1_700_000_001_000_001_000])
def test_timestamp_is_structlogs_iso_utc(monkeypatch, nanos):
    """Microseconds truncated like datetime.now(); no fraction at a whole second."""
    monkeypatch.setattr(time, "time_ns", lambda: nanos)
    expected = datetime.datetime.fromtimestamp(nanos // 10**9, tz=datetime.UTC).replace(
        microsecond=nanos % 10**9 // 1000).isoformat().replace("+00:00", "Z")
    assert stamp_iso_utc(None, "info", {})["ts"] == expected


def test_timestamp_follows_the_clock_across_seconds(monkeypatch):
    """The per-second cache never serves a stale date."""
    for nanos in (1_700_000_000_500_000_000, 1_700_086_400_500_000_000):
        monkeypatch.setattr(time, "time_ns", lambda nanos=nanos: nanos)
        stamped = stamp_iso_utc(None, "info", {})["ts"]
    assert stamped == "2023-11-15T22:13:20.500000Z"


class _Custom:
    def __repr__(self) -> str:
        return "custom!"


class _Structured:
    def __structlog__(self) -> dict[str, int]:
        return {"n": 1}


def test_rendered_line_is_structlogs_json():
    """Key order, non-ASCII, NaN, bytes, tuples and unknown objects as JSONRenderer."""
    event = {"event": "job_done", "job_id": 1, "u": "é", "f": float("nan"), "b": b"x",
             "t": (1, 2), "obj": _Custom(), "s": _Structured(), "none": None}
    reference = structlog.processors.JSONRenderer(sort_keys=False)
    assert render_json(None, "info", dict(event)) == reference(None, "info", dict(event))

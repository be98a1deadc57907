"""Drive ingest with `wrk` (Debian package) when it is installed: one Lua script that posts
unique ~1.5 KB events, and a parser for wrk's --latency report."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

_SCRIPT = """
local counter = 0
local pad = string.rep("x", %(pad)d)
local run = "%(run)s"
local thread_no = 0
local threads = {}
function setup(thread)
  thread_no = thread_no + 1
  thread:set("tid", thread_no)
end
local type_count = %(type_count)d
local tenant_count = %(tenant_count)d
function request()
  counter = counter + 1
  local event_type = "bench.event"
  if type_count > 0 then
    event_type = "c" .. math.random(0, type_count - 1) .. ".invoice.paid"
  end
  local owner = ""
  if tenant_count > 0 then
    owner = '"tenant":"t' .. math.random(0, tenant_count - 1) .. '",'
  end
  local body = '{' .. owner .. '"id":"' .. run .. "-" .. tid .. "-" .. counter ..
    '","type":"' .. event_type .. '","data":{"pad":"' .. pad .. '"}}'
  return wrk.format("POST", "/v1/events", {["Content-Type"] = "application/json",
                     ["Authorization"] = "Bearer %(token)s"}, body)
end
"""
_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def available() -> bool:
    """True when the `wrk` binary is on PATH."""
    return shutil.which("wrk") is not None


def run_wrk(base_url: str, duration_s: int, connections: int, body_bytes: int,
            run_id: str, token: str, *, type_count: int = 0,
            tenant_count: int = 0) -> dict[str, Any]:
    """Run wrk for `duration_s` seconds against POST /v1/events (Bearer `token`); returns
    requests/s, non-2xx count and latency percentiles (ms).

    Args:
        type_count: 0: every event is of type `bench.event`; N: each is of type
            `c{random 0..N-1}.invoice.paid` (the scale scenarios).
        tenant_count: 0: no tenant field; N: each is for tenant `t{random 0..N-1}`.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(_SCRIPT % {"pad": max(0, body_bytes - 80), "run": run_id, "token": token,
                            "type_count": type_count, "tenant_count": tenant_count})
        script = fh.name
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{duration_s}s", "--latency", "-s", script,
             base_url], capture_output=True, text=True, check=True, timeout=duration_s + 60,
        ).stdout
    finally:
        Path(script).unlink()
    return parse_report(out)


def parse_report(text: str) -> dict[str, Any]:
    """Figures from wrk's text report (with --latency)."""
    latency = {f"p{m.group(1)}": _to_ms(m.group(2), m.group(3))
               for m in re.finditer(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M)}
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in", text)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errors = re.search(r"Socket errors:.*", text)
    return {"tool": "wrk", "events_per_s": float(rps.group(1)) if rps else 0.0,
            "requests": int(total.group(1)) if total else 0,
            "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errors.group(0) if errors else None, "latency_ms": latency}


def _to_ms(value: str, unit: str) -> float:
    return round(float(value) * _UNITS_MS[unit], 3)

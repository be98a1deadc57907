"""A stand-in OpenTelemetry collector for measuring tracing's cost: it accepts every
`POST /v1/traces` (OTLP/HTTP) with 200 and counts requests and bytes, decoding nothing, so
the figures measure hookline's side of an export, not a collector's.

    python -m hookline.rehearsal.otlp_sink --port 4318
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 HOOKLINE_TRACING=1 hookline bench ...

On SIGTERM or SIGINT it prints `{"requests": N, "bytes": M}` and exits (docs/benchmarks.md,
"Tracing").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from aiohttp import web

_EMPTY_ANSWER = b""  # an empty ExportTraceServiceResponse: no partial success to report


def build_app(counts: dict[str, int]) -> web.Application:
    """The sink's app; `counts` receives `requests` and `bytes` as they arrive."""

    async def traces(request: web.Request) -> web.Response:
        counts["requests"] += 1
        counts["bytes"] += len(await request.read())
        return web.Response(body=_EMPTY_ANSWER, content_type="application/x-protobuf")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", traces)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT, then print the counts as JSON; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.otlp_sink")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args(argv)
    counts = {"requests": 0, "bytes": 0}
    web.run_app(build_app(counts), host=args.host, port=args.port, print=None,
                access_log=None)
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

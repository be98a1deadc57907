"""Request-head limits of ingest, and JSON answers for requests aiohttp cannot parse.

aiohttp's HTTP parser enforces the limits (`max_field_size`: one header field, name and value
together; `max_headers`: header fields per request; `max_line_size`: the request line) before
any handler or middleware runs, and answers a violation itself with a plain-text 400 while
logging a traceback at ERROR. :class:`IngestRunner` keeps the parser's limits and replaces
that answer with hookline's JSON error shape and a precise status:

======================================  ======  ====================================
violation                               status  `error`
======================================  ======  ====================================
a header field over `max_header_bytes`  431     `headers_too_large`
more than `max_headers` header fields   431     `headers_too_large`
request line over 8192 bytes            414     `uri_too_long`
anything else unparsable                400     `bad_request`
======================================  ======  ====================================

The connection is closed after such an answer (the parser cannot resynchronise), and the
rejection is logged as `request_rejected` at info level, without a traceback.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from hookline.shared.config import Config
from hookline.shared.logs import get_logger

MAX_REQUEST_LINE_BYTES = 8192
"""Longest accepted request line (method, target, version), bytes."""


def parser_limits(config: Config) -> dict[str, int]:
    """The aiohttp request-handler arguments for `config`'s limits.

    Args:
        config: `max_header_bytes` (one header field, bytes) and `max_headers` (count) are read.

    Returns:
        Keyword arguments for `web.AppRunner` (passed on to each connection's parser).
    """
    return {"max_field_size": config.max_header_bytes, "max_headers": config.max_headers,
            "max_line_size": MAX_REQUEST_LINE_BYTES}


def classify_parse_error(exc: BaseException | None, max_field_size: int) -> tuple[int, str, str]:
    """(status, error code, detail) for a request the HTTP parser refused.

    Args:
        exc: the parser's exception (None when aiohttp gave none).
        max_field_size: the header field limit in force, bytes (tells a header line from the
            request line, whose limit is :data:`MAX_REQUEST_LINE_BYTES`).
    """
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else None
        if limit == max_field_size:
            return (431, "headers_too_large",
                    f"a request header field is longer than {max_field_size} bytes "
                    "(name and value together)")
        return 414, "uri_too_long", f"the request line is longer than {limit} bytes"
    if isinstance(exc, BadHttpMessage) and "too many headers" in exc.message.lower():
        return 431, "headers_too_large", "the request has too many header fields"
    reason = exc.message if isinstance(exc, BadHttpMessage) else "the request is malformed"
    return 400, "bad_request", f"malformed HTTP request: {reason}"[:200]


class IngestRequestHandler(RequestHandler):
    """aiohttp's per-connection protocol, answering parser errors as JSON (module docstring)."""

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """Answer a request that failed before reaching the app (status < 500), or defer to
        aiohttp (500: a failure outside our middlewares, which aiohttp logs).

        Raises:
            ConnectionError: part of an answer was already sent (as aiohttp does).
        """
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:
            raise ConnectionError("Response is sent already, cannot send another response "
                                  "with the error message")
        status, code, detail = classify_parse_error(exc, self.max_field_size)
        get_logger().info("request_rejected", status=status, error=code, detail=detail,
                          remote=request.remote)
        response = web.Response(status=status, content_type="application/json",
                                text=json.dumps({"error": code, "detail": detail}))
        response.force_close()
        return response


class _IngestServer(web.Server):
    """aiohttp's low-level server, building :class:`IngestRequestHandler` connections."""

    def __call__(self) -> RequestHandler:
        return IngestRequestHandler(self, loop=self._loop, **self._kwargs)


class IngestRunner(web.AppRunner):
    """`web.AppRunner` whose connections answer unparsable requests in JSON.

    Args:
        app: the ingest application.
        **kwargs: as for `web.AppRunner`; pass :func:`parser_limits` here.
    """

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # aiohttp builds the Server inside AppRunner; only its protocol factory changes.
        # tests/integration/test_ingest_limits.py fails if an aiohttp upgrade breaks this.
        server.__class__ = _IngestServer
        return server

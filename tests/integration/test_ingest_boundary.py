"""Ingest's one middleware on a real socket: every answer (redirect, JSON error, 500) names
hookline in `Server`, is counted once by route and status, and leaves nothing in flight."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.ingest.app_state import IN_FLIGHT_KEY, PROCESS_METRICS_KEY
from hookline.shared.config import Config
from hookline.shared.metrics_catalog import INGEST_REJECTIONS, INGEST_REQUESTS
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.version import PRODUCT


async def _fails(request: web.Request) -> web.Response:
    raise RuntimeError("a bug with /a/secret/path in it")


async def _moves(request: web.Request) -> web.Response:
    raise web.HTTPFound("/healthz")


async def test_every_answer_carries_server_and_is_counted_once(tmp_path: Path):
    async with SqliteStore(str(tmp_path / "h.db")) as store:
        app = build_app(store, Config(ingest_token="i", max_body_bytes=100))
        app.router.add_get("/fails", _fails)
        app.router.add_get("/moves", _moves)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            answers = []
            for method, path, kwargs in (
                    ("GET", "/moves", {"allow_redirects": False}), ("GET", "/fails", {}),
                    ("POST", "/healthz", {}), ("GET", "/nope", {}), ("GET", "/", {}),
                    ("POST", "/v1/events", {"data": b"x" * 500, "headers": {
                        "Authorization": "Bearer i", "Content-Type": "application/json"}})):
                async with client.request(method, path, **kwargs) as resp:
                    body = await resp.read()
                    answers.append((path, resp.status, resp.headers.get("Server"),
                                    resp.headers.get("Allow")))
                    assert b"secret" not in body and b"Traceback" not in body
            assert answers == [("/moves", 302, PRODUCT, None), ("/fails", 500, PRODUCT, None),
                               ("/healthz", 405, PRODUCT, "GET,HEAD"),
                               ("/nope", 404, PRODUCT, None), ("/", 200, PRODUCT, None),
                               ("/v1/events", 413, PRODUCT, None)]
            assert app[IN_FLIGHT_KEY].count == 0
        counted = app[PROCESS_METRICS_KEY].current()
        assert counted[INGEST_REQUESTS.name] == {
            ("GET /moves", "302"): 1.0, ("GET /fails", "500"): 1.0, ("unmatched", "405"): 1.0,
            ("unmatched", "404"): 1.0, ("GET /", "200"): 1.0, ("POST /v1/events", "413"): 1.0}
        assert counted[INGEST_REJECTIONS.name] == {("body_too_large",): 1.0}

"""The customer portal's files and headers, through the real ingest app on 127.0.0.1 with a
real SQLite file: the strict CSP with `frame-ancestors` from `portal_frame_ancestors`, the
dashboard still refusing every frame, the fixed file list, and the setting's rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.ingest.dashboard import CSP as DASHBOARD_CSP
from hookline.ingest.portal import portal_csp
from hookline.shared.config import Config
from hookline.shared.errors import InvalidSetting
from hookline.shared.store.sqlite import SqliteStore

PORTAL_FILES = ("portal.js", "tenant_api.js", "destinations.js", "destination.js",
                "destination_form.js", "deliveries.js", "health.js", "secret.js", "portal.css")
ALLOWED = "https://app.example.com, http://127.0.0.1:8123"


@pytest.fixture
async def real_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(str(tmp_path / "portal.db")) as s:
        yield s


async def _client(store: SqliteStore, **settings: Any) -> TestClient[Any, Any]:
    config = Config(db=store.path, **settings)
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(store, config),
                                                         host="127.0.0.1"))
    await client.start_server()
    return client


async def test_portal_is_served_without_auth_under_a_strict_csp_refusing_frames(real_store):
    """By default `/portal/` and its files answer 200 without a token under the dashboard's
    policy (no inline script, same origin only) with `frame-ancestors 'none'`,
    X-Frame-Options DENY and no referrer; the page has no inline script, no script reads
    HTML from data; unknown names are a JSON 404; `/portal` redirects to `/portal/`."""
    client = await _client(real_store)
    try:
        async with client.get("/portal/") as resp:
            assert resp.status == 200 and resp.content_type == "text/html"
            assert resp.headers["Content-Security-Policy"] == DASHBOARD_CSP
            assert resp.headers["X-Frame-Options"] == "DENY"
            assert resp.headers["Referrer-Policy"] == "no-referrer"
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            html = await resp.text()
        assert '<script type="module" src="/portal/static/portal.js"></script>' in html
        assert "<script>" not in html and " style=" not in html
        for name in PORTAL_FILES:
            async with client.get(f"/portal/static/{name}") as resp:
                assert resp.status == 200, name
                assert resp.headers["Content-Security-Policy"] == DASHBOARD_CSP
                text = await resp.text()
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                         "eval(", "new Function"):
                assert sink not in text, (name, sink)
        for path in ("/portal/static/missing.js", "/portal/static/..%2Fdashboard.py",
                     "/portal/static/index.html", "/portal/static/../app.js"):
            async with client.get(path) as resp:
                assert resp.status == 404, path
                assert (await resp.json())["error"] == "not_found"
        async with client.get("/portal", allow_redirects=False) as resp:
            assert resp.status == 302 and resp.headers["Location"] == "/portal/"
        async with client.get("/portal/settings.json") as resp:
            assert (await resp.json()) == {"owner_name": "the service that sent you here"}
    finally:
        await client.close()


async def test_allowed_frame_ancestors_reach_the_portal_only(real_store):
    """With `portal_frame_ancestors` set, every portal answer lists exactly those origins in
    `frame-ancestors` and drops X-Frame-Options (which would refuse them); the dashboard keeps
    `frame-ancestors 'none'` and DENY."""
    client = await _client(real_store, portal_frame_ancestors=ALLOWED,
                           portal_owner_name="Acme Cloud")
    expected = portal_csp(("https://app.example.com", "http://127.0.0.1:8123"))
    assert expected.endswith("; frame-ancestors https://app.example.com http://127.0.0.1:8123")
    try:
        for path in ("/portal/", "/portal/static/portal.js", "/portal/settings.json"):
            async with client.get(path) as resp:
                assert resp.status == 200, path
                assert resp.headers["Content-Security-Policy"] == expected, path
                assert "X-Frame-Options" not in resp.headers, path
                if path.endswith(".json"):
                    assert (await resp.json())["owner_name"] == "Acme Cloud"
        for path in ("/", "/static/app.js"):
            async with client.get(path) as resp:
                assert resp.headers["Content-Security-Policy"] == DASHBOARD_CSP, path
                assert resp.headers["X-Frame-Options"] == "DENY", path
    finally:
        await client.close()


@pytest.mark.parametrize("value", [
    "*", "https://*", "'self'", "'unsafe-inline'", "https://a.example.com; script-src *",
    "javascript:alert(1)", "https://a.example.com/path", "ftp://a.example.com", "a.example.com",
    "data:", "https://a.example.com'"])
def test_frame_ancestors_setting_takes_origins_only(value):
    """Anything but `http(s)://HOST[:PORT]` origins (a keyword, a wildcard for every site, a
    path, a second directive) is refused naming the setting: nothing can widen the header."""
    with pytest.raises(InvalidSetting) as refused:
        Config(portal_frame_ancestors=value)
    assert "portal_frame_ancestors" in str(refused.value)


def test_frame_ancestors_setting_accepts_origins_and_subdomain_wildcards():
    """Origins separated by commas or spaces, with ports, IP addresses and `*.` subdomains."""
    config = Config(portal_frame_ancestors=" https://app.example.com,https://*.example.org "
                                           "http://127.0.0.1:8080  http://[::1]:9000/")
    assert config.portal_frame_ancestors.startswith(" https://app.example.com")
    from hookline.shared.config_checks import frame_ancestors

    assert frame_ancestors(config.portal_frame_ancestors) == (
        "https://app.example.com", "https://*.example.org", "http://127.0.0.1:8080",
        "http://[::1]:9000")

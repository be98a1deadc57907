"""`hookline tenants token` and `hookline tenants revoke-tokens` as real OS processes on each
backend: the token a CLI process mints opens the tenant API of an ingest app on the same
database (one signing key per database), and a CLI revoke shuts it at once."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields
from hookline.supervisor.cli.main import main as hookline_main
from tests.acceptance.procs import run_cli


async def test_cli_mints_a_token_the_api_accepts_and_revokes_it(real_store: Store, store_url):
    await real_store.put_tenant("acme", TenantFields(name="Acme"))
    minted = run_cli("--db", store_url, "tenants", "token", "acme", "--ttl", "30m",
                     "--read-only", "--capability", "view_secret", "--json",
                     "--base-url", "https://hooks.example.com/")
    assert minted.returncode == 0, minted.stderr
    issued = json.loads(minted.stdout)
    assert issued["capabilities"] == ["view", "view_secret"] and issued["read_only"] is True
    assert issued["portal_url"] == f"https://hooks.example.com/portal/#token={issued['token']}"
    assert 1700 < issued["expires_at"] - await real_store.now_s() <= 1800
    assert issued["token"] not in minted.stderr and '"tenant_token_minted"' in minted.stderr

    app = build_app(real_store, Config(admin_token="admin"))
    bearer = {"Authorization": f"Bearer {issued['token']}"}
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        async with client.get("/v1/tenant", headers=bearer) as resp:
            answer: Any = await resp.json()
            assert resp.status == 200, answer
            assert answer["read_only"] is True and answer["tenant"]["id"] == "acme"
        revoked = run_cli("--db", store_url, "tenants", "revoke-tokens", "acme")
        assert revoked.returncode == 0, revoked.stderr
        assert "revoked every token of tenant acme" in revoked.stdout
        async with client.get("/v1/tenant", headers=bearer) as resp:
            assert (resp.status, (await resp.json())["error"]) == (401, "token_revoked")


def test_cli_refuses_bad_input_and_unknown_tenants(tmp_path, capsys):
    """A lifetime over 24 h, a read-only token asked to resend or a bad id exits 2 naming
    it; an unknown tenant exits 1."""
    db = str(tmp_path / "t.db")
    assert hookline_main(["--db", db, "init"]) == 0
    for args, code, text in ((["--ttl", "25h"], 2, "ttl"), (["--ttl", "soon"], 2, "ttl"),
                             (["--read-only", "--capability", "resend"], 2,
                              "a read-only token holds only view and view_secret, not resend")):
        with contextlib.redirect_stdout(io.StringIO()):
            assert hookline_main(["--db", db, "tenants", "token", "acme", *args]) == code
        assert text in capsys.readouterr().err
    assert hookline_main(["--db", db, "tenants", "token", "bad id!"]) == 2
    assert "id" in capsys.readouterr().err
    assert hookline_main(["--db", db, "tenants", "token", "nobody"]) == 1
    assert "no tenant 'nobody'" in capsys.readouterr().err
    assert hookline_main(["--db", db, "tenants", "revoke-tokens", "nobody"]) == 1


def test_the_portal_url_is_under_public_url_and_a_bad_base_url_exits_2(tmp_path, capsys,
                                                                      monkeypatch):
    """Without --base-url the link is under the public_url setting (behind a TLS proxy the
    listen address would be http://); a --base-url that is not an http(s) URL exits 2."""
    db = str(tmp_path / "t.db")
    assert hookline_main(["--db", db, "init"]) == 0
    assert hookline_main(["--db", db, "tenants", "put", "acme"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("HOOKLINE_PUBLIC_URL", "https://hooks.example.com/base")
    assert hookline_main(["--db", db, "tenants", "token", "acme", "--json"]) == 0
    issued = json.loads(capsys.readouterr().out)
    assert issued["portal_url"] == (
        f"https://hooks.example.com/base/portal/#token={issued['token']}")
    assert hookline_main(["--db", db, "tenants", "token", "acme",
                          "--base-url", "javascript:alert(1)//"]) == 2
    assert "base_url" in capsys.readouterr().err


async def test_the_api_builds_the_portal_url_from_public_url_not_the_host_header(
        real_store: Store):
    """Behind a proxy, ingest sees http and whatever Host the request carried: with
    public_url set, the minted link is under it."""
    await real_store.put_tenant("acme", TenantFields())
    config = Config(admin_token="admin", public_url="https://hooks.example.com")
    headers = {"Authorization": "Bearer admin", "Host": "evil.example"}
    async with (TestClient(TestServer(build_app(real_store, config),
                                      host="127.0.0.1")) as client,
                client.post("/v1/admin/tenants/acme/tokens", json={"ttl_s": 60},
                            headers=headers) as resp):
        answer: Any = await resp.json()
        assert resp.status == 201, answer
    assert answer["portal_url"] == f"https://hooks.example.com/portal/#token={answer['token']}"

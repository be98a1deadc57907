"""`hookline dead`, `hookline jobs` and `GET /v1/admin/dead` page on past their limit (each
backend in turn): the CLI says on stderr when more exist, `(N shown; more: --before ID)`,
and only then (it reads one row more than it shows; a page that is exactly full of the last
rows has no hint); following the hints lists every dead letter exactly once; `--json` stays
a list. The API's `before` does the same for scripts; a cursor no longer dead is 404."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
import structlog
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields
from hookline.supervisor.cli import main as cli_main
from tests.conftest import new_event

ADMIN_TOKEN = "admin-token-for-tests"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FAILED = AttemptResult(started_at=0.0, duration_s=0.1, status_code=410)
HINT = re.compile(r"^\((\d+) shown; more: --before (\d+)\)$", re.MULTILINE)
DEAD = 7


async def _seven_dead_of_acme(store: Store) -> None:
    """Seven dead jobs of tenant acme's destination, died in two batches (ties inside each:
    one finish, one instant), and one of the default tenant's that acme's listing leaves
    out."""
    await store.put_tenant("acme", TenantFields(name="Acme"))
    for tenant in ("acme", "_default"):
        await store.add_destination(name="hooks", url="http://127.0.0.1:9/h", tenant=tenant,
                                    secret=generate_secret(), event_types=["*"],
                                    max_in_flight=100)
    await store.add_events([new_event(f"a{n}", tenant="acme") for n in range(DEAD)]
                           + [new_event("d0")])
    claims = await store.claim("w", 100, lease_s=30, max_attempts=3)
    assert len(claims) == DEAD + 1
    await store.finish([(c, Dead(error="HTTP 410"), FAILED) for c in claims[:4]])
    await asyncio.sleep(0.01)
    await store.finish([(c, Dead(error="HTTP 410"), FAILED) for c in claims[4:]])


async def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    capsys.readouterr()
    try:
        assert await asyncio.to_thread(cli_main, list(args)) == 0, args
    finally:
        structlog.reset_defaults()  # the CLI pointed the logs at the captured streams
    captured = capsys.readouterr()
    return captured.out, captured.err


async def test_dead_cli_hints_the_next_page_and_pages_each_once(
        real_store: Store, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    await _seven_dead_of_acme(real_store)
    whole = [d.job.id for d in await real_store.list_dead(tenant="acme")]
    assert len(whole) == DEAD

    shown: list[int] = []
    cursor: list[str] = []
    for _ in range(DEAD):  # bounded: a hint that never ends fails below
        out, err = await _cli(capsys, "--db", store_url, "dead", "--tenant", "acme",
                              "--limit", "3", "--json", *cursor)
        page = [row["id"] for row in json.loads(out)]  # --json: still a bare list
        shown += page
        hint = HINT.search(err)
        if hint is None:
            break
        assert (int(hint[1]), int(hint[2])) == (3, page[-1]) and len(page) == 3, err
        cursor = ["--before", hint[2]]
    assert shown == whole
    assert len(shown) == len(set(shown))

    # A full page with nothing after it has no hint; one row fewer has one. The table too.
    _, err = await _cli(capsys, "--db", store_url, "dead", "--tenant", "acme",
                        "--limit", str(DEAD))
    assert HINT.search(err) is None, err
    out, err = await _cli(capsys, "--db", store_url, "dead", "--tenant", "acme",
                          "--limit", str(DEAD - 1))
    assert HINT.search(err)[0] == f"({DEAD - 1} shown; more: --before {whole[-2]})", err
    assert "more:" not in out and len(out.strip().splitlines()) == 1 + DEAD - 1, out


async def test_jobs_cli_hints_the_next_page(
        real_store: Store, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    await _seven_dead_of_acme(real_store)
    whole = [j.id for j in await real_store.list_jobs(tenant="acme")]
    out, err = await _cli(capsys, "--db", store_url, "jobs", "--tenant", "acme",
                          "--limit", "5", "--json")
    assert [r["id"] for r in json.loads(out)] == whole[:5]
    assert HINT.search(err)[0] == f"(5 shown; more: --before {whole[4]})", err
    out, err = await _cli(capsys, "--db", store_url, "jobs", "--tenant", "acme",
                          "--limit", "5", "--json", "--before", str(whole[4]))
    assert [r["id"] for r in json.loads(out)] == whole[5:] and HINT.search(err) is None


def test_help_gives_the_default_limits(capsys: pytest.CaptureFixture[str]) -> None:
    for command, default in (("dead", 100), ("jobs", 50)):
        with pytest.raises(SystemExit):
            cli_main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"default {default}" in text and "--before ID" in text, text


async def _get(client: TestClient[Any, Any], path: str) -> tuple[int, Any]:
    async with client.get(path, headers=ADMIN) as resp:
        return resp.status, await resp.json()


async def test_admin_api_dead_pages_with_before(real_store: Store) -> None:
    await _seven_dead_of_acme(real_store)
    whole = [d.job.id for d in await real_store.list_dead(tenant="acme")]
    config = Config(admin_token=ADMIN_TOKEN, ingest_token=ADMIN_TOKEN)
    async with TestClient(TestServer(build_app(real_store, config), host="127.0.0.1")) as client:
        shown: list[int] = []
        query = "/v1/admin/dead?tenant=acme&limit=2"
        for _ in range(DEAD):  # bounded: a cursor that is ignored fails below, not hangs
            status, page = await _get(client, query + (f"&before={shown[-1]}" if shown else ""))
            assert status == 200 and isinstance(page, list), page
            shown += [row["id"] for row in page]
            if len(page) < 2:
                break
        assert shown == whole

        status, answer = await _get(client, "/v1/admin/dead?before=abc")
        assert (status, answer["error"], answer.get("field")) == (
            400, "invalid_request", "before"), answer
        assert await real_store.replay(job_id=whole[2]) == 1
        status, answer = await _get(client, f"/v1/admin/dead?before={whole[2]}")
        assert (status, answer["error"]) == (404, "not_found"), answer
        assert f"job {whole[2]} is not a dead letter" in answer["detail"], answer

        status, jobs = await _get(client, f"/v1/admin/jobs?tenant=acme&before={whole[0]}")
        assert status == 200 and all(row["id"] < whole[0] for row in jobs), jobs

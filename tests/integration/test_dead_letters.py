"""Dead letters under retention, on a real database (each backend in turn): they keep their
payload while listed, `retention_dead_letters_s` bounds them, and every one that `hookline
dead` and `GET /v1/admin/dead` list is either replayable or says why not."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import structlog
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.ingest.maintenance import run_retention
from hookline.shared.config import Config
from hookline.shared.errors import ConfigError, Conflict
from hookline.shared.models import AttemptResult, Dead
from hookline.shared.policy.rules import RetentionAges
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.supervisor.cli import main as cli_main
from tests.conftest import execute_db, new_event

ADMIN_TOKEN = "admin-token-for-tests"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FAILED = AttemptResult(started_at=0.0, duration_s=0.1, status_code=410)


async def retention_round(store: Store, **ages: float) -> None:
    """One round of ingest's periodic purge with these Config ages (seconds)."""
    config = Config(retention_interval_s=0.05, **ages)
    stop = asyncio.Event()
    task = asyncio.create_task(run_retention(store, config, stop))
    await asyncio.sleep(0.3)
    stop.set()
    await task


async def dead_listing(client: TestClient[Any, Any]) -> dict[str, dict[str, Any]]:
    async with client.get("/v1/admin/dead", headers=ADMIN) as resp:
        assert resp.status == 200
        return {row["message_id"]: row for row in await resp.json()}


async def test_dead_letters_keep_their_payload_are_bounded_and_say_if_replayable(
        real_store: Store, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Three dead jobs (one kept whole, one whose destination was removed, one whose body an
    older hookline purged) survive a retention round with every other age at 0 and
    `retention_dead_letters_s` of a day, bodies included; the API and the CLI mark each
    replayable or not with the reason, and a replay agrees with the mark; a round with
    `retention_dead_letters_s = 0` then deletes them."""
    for name in ("kept", "gone", "purged"):
        await real_store.add_destination(name=name, url=f"http://127.0.0.1:9/{name}",
                                         secret=generate_secret(), event_types=[name],
                                         max_in_flight=1)
    accepted = await real_store.add_events([new_event(n, type_=n)
                                            for n in ("kept", "gone", "purged")])
    message = {n: a.message_id for n, a in zip(("kept", "gone", "purged"), accepted,
                                                strict=True)}
    for claim in await real_store.claim("w", 3, lease_s=30, max_attempts=3):
        await real_store.finish([(claim, Dead(error="HTTP 410"), FAILED)])
    await real_store.remove_destination("gone")
    await execute_db(store_url, "UPDATE events SET body_purged_at = 1 "
                                "WHERE source_event_id = 'purged'")
    await asyncio.sleep(0.05)  # died strictly before the round's cutoffs

    await retention_round(real_store, retention_bodies_s=0, retention_metadata_s=0,
                          retention_dedupe_s=0, retention_dead_letters_s=86400)
    kept = [d for d in await real_store.list_dead() if d.job.message_id == message["kept"]]
    assert len(kept) == 1
    body = await real_store.event_body(kept[0].job.id, 100)
    assert (body.head, body.body_purged_at) == (new_event("kept", type_="kept").body, None)

    config = Config(admin_token=ADMIN_TOKEN, ingest_token=ADMIN_TOKEN)
    async with TestClient(TestServer(build_app(real_store, config), host="127.0.0.1")) as client:
        listed = await dead_listing(client)
    assert {m: (row["replayable"], row["not_replayable_reason"])
            for m, row in listed.items()} == {
        message["kept"]: (True, None), message["gone"]: (False, "destination removed"),
        message["purged"]: (False, "body purged")}
    for row in listed.values():  # the mark is what a replay of that job does
        if row["replayable"]:
            assert await real_store.replay(job_id=row["id"], dry_run=True) == 1
        else:
            with pytest.raises(Conflict, match="cannot be replayed"):
                await real_store.replay(job_id=row["id"], dry_run=True)

    capsys.readouterr()  # the log lines so far
    try:
        assert await asyncio.to_thread(cli_main, ["--db", store_url, "dead", "--json"]) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[-1]) == list(listed.values())
        assert await asyncio.to_thread(cli_main, ["--db", store_url, "dead"]) == 0
        out = capsys.readouterr().out.splitlines()
    finally:
        structlog.reset_defaults()  # the CLI pointed the logs at the captured stdout
    table = out[next(i for i, line in enumerate(out) if line.startswith("ID ")):]
    assert "REPLAYABLE" in table[0] and len(table) == 4
    assert "  yes  " in next(line for line in table if message["kept"] in line)
    assert sum("no: destination removed" in line for line in table) == 1
    assert sum("no: body purged" in line for line in table) == 1

    await retention_round(real_store, retention_bodies_s=0, retention_metadata_s=86400,
                          retention_dedupe_s=86400, retention_dead_letters_s=0)
    assert await real_store.list_dead() == []
    assert (await real_store.stats()).attempts == 0


def test_dead_letter_retention_defaults_to_metadata_retention_and_is_checked() -> None:
    """Unset, dead jobs go with other job metadata; a malformed age is refused."""
    now = time.time()
    default = Config()
    ages = RetentionAges(default.retention_bodies_s, default.retention_metadata_s,
                         default.retention_dedupe_s, default.retention_dead_letters_s)
    assert ages.cutoffs(now)["dead_before_s"] == now - default.retention_metadata_s
    assert RetentionAges(1, 2, 3, 10).cutoffs(now)["dead_before_s"] == now - 10
    with pytest.raises(ConfigError, match="retention_dead_letters_s"):
        Config(retention_dead_letters_s=-1)
    assert Config.load(env={"HOOKLINE_RETENTION_DEAD_LETTERS_S": "7776000"},
                       ).retention_dead_letters_s == 7776000

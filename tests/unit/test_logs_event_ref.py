"""`hookline logs --event REF` (the CLI's entry point, in-process) on a real SQLite file: REF
may be the internal id, the webhook-id or the sender's id, each resolved through the store to
the internal id the log lines carry; nothing matching exits 1 with a message."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields
from hookline.supervisor.cli.main import main
from tests.conftest import new_event


@pytest.fixture
def logged_event(tmp_path: Path) -> tuple[str, Path, int, str]:
    """A database with events evt_0 and evt_1 (one job each), and a log file with lines about
    both: (database path, log path, evt_1's internal id, evt_1's webhook-id)."""
    db = str(tmp_path / "logs.db")

    async def fill() -> list:
        async with SqliteStore(db) as store:
            await store.add_destination(name="d", url="http://127.0.0.1:9/", secret="whsec_"
                                        + "A" * 32, event_types=["*"], max_in_flight=1)
            return await store.add_events([new_event("evt_0"), new_event("evt_1")])

    first, second = asyncio.run(fill())
    log = tmp_path / "service.log"
    log.write_text("".join(json.dumps(line) + "\n" for line in (
        {"event": "event_accepted", "level": "info", "event_id": first.event_id},
        {"event": "event_accepted", "level": "info", "event_id": second.event_id,
         "message_id": second.message_id, "job_ids": list(second.job_ids)},
        {"event": "job_done", "level": "info", "event_id": second.event_id,
         "job_id": second.job_ids[0]},
    )))
    return db, log, second.event_id, second.message_id


@pytest.mark.parametrize("form", ["internal id", "webhook-id", "sender's id", "with source"])
def test_every_reference_finds_the_events_lines(logged_event, form, capsys):
    db, log, event_id, message_id = logged_event
    ref = {"internal id": [str(event_id)], "webhook-id": [message_id],
           "sender's id": ["evt_1"], "with source": ["evt_1", "--source", "api"]}[form]
    assert main(["--db", db, "logs", str(log), "--json", "--event", *ref]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["event"], r["event_id"]) for r in lines] == [
        ("event_accepted", event_id), ("job_done", event_id)]


def test_nothing_matching_exits_1_with_a_message(logged_event, tmp_path, capsys):
    db, log, event_id, _ = logged_event
    assert main(["--db", db, "logs", str(log), "--event", "evt_9"]) == 1
    assert "no event with sender's id 'evt_9' from source 'api'" in capsys.readouterr().err
    assert main(["--db", db, "logs", str(log), "--event", "evt_1", "--level", "error"]) == 1
    assert f"no log lines about event {event_id} (evt_1)" in capsys.readouterr().err
    assert main(["--db", db, "logs", str(log), "--source", "api"]) == 2
    # Without the database (reading another host's log), an internal id is used as it is.
    missing = str(tmp_path / "elsewhere.db")
    assert main(["--db", missing, "logs", str(log), "--event", str(event_id)]) == 0
    assert main(["--db", missing, "logs", str(log), "--event", "evt_1"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert not Path(missing).exists()


def test_a_sender_id_of_another_tenant_is_found_with_its_tenant(tmp_path, capsys):
    """`logs --event evt_a --tenant acme` finds acme's event by the sender's id, as `hookline
    event evt_a --tenant acme` does; so does `--event evt_a` alone, acme being the only
    tenant with that id, and `--tenant _default` finds none."""
    db = str(tmp_path / "logs.db")

    async def fill() -> int:
        async with SqliteStore(db) as store:
            await store.put_tenant("acme", TenantFields())
            [accepted] = await store.add_events([new_event("evt_a", tenant="acme")])
            return int(accepted.event_id)

    event_id = asyncio.run(fill())
    # What the store logged while filling is no answer of the command's: with structlog not
    # yet configured in this process (this test first in its worker), it went to stdout.
    capsys.readouterr()
    log = tmp_path / "service.log"
    log.write_text(json.dumps({"event": "event_accepted", "level": "info",
                               "event_id": event_id, "tenant": "acme"}) + "\n")
    assert main(["--db", db, "logs", str(log), "--json", "--event", "evt_a",
                 "--tenant", "acme"]) == 0
    [line] = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert (line["event_id"], line["tenant"]) == (event_id, "acme")
    assert main(["--db", db, "logs", str(log), "--json", "--event", "evt_a"]) == 0
    assert [json.loads(text)["event_id"] for text in capsys.readouterr().out.splitlines()] == [
        event_id]
    assert main(["--db", db, "logs", str(log), "--event", "evt_a", "--tenant", "_default"]) == 1
    assert "no event with sender's id 'evt_a'" in capsys.readouterr().err

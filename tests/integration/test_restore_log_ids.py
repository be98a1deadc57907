"""After a restore, the ids the old database gave out after the snapshot are given out
again (AUTOINCREMENT starts above the snapshot's highest, not above ids it never saw). The
same log file then holds lines about a lost event and a new one under one event id:
`hookline restore` prints the `--since` that tells them apart, and `hookline logs` with it
shows the new event's lines only."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.timeparse import parse_instant
from hookline.supervisor.cli.human import iso_time_ms
from tests.conftest import cli_stdout, new_event


async def _add_event(db: Path, ref: str) -> int:
    async with SqliteStore(str(db)) as store:
        [accepted] = await store.add_events([new_event(ref)])
        return accepted.event_id


def _accepted_line(event_id: int, ref: str) -> str:
    return json.dumps({"ts": iso_time_ms(time.time()), "level": "info",
                       "event": "event_accepted", "event_id": event_id,
                       "source_event_id": ref}) + "\n"


def test_logs_since_the_restore_tell_a_new_event_from_a_lost_one_of_the_same_id(tmp_path):
    old, log = tmp_path / "old.db", tmp_path / "hookline.log"
    asyncio.run(_add_event(old, "kept"))
    cli_stdout("--db", str(old), "backup", "--out", str(tmp_path / "snaps"))
    [snapshot] = (tmp_path / "snaps").glob("*.db")
    lost_id = asyncio.run(_add_event(old, "lost"))  # after the snapshot: lost with old.db
    log.write_text(_accepted_line(lost_id, "lost"))
    time.sleep(0.01)  # the log's times are to the millisecond
    said = cli_stdout("--db", str(old), "restore", str(snapshot), "--into", str(tmp_path / "new"))
    since = re.search(r"hookline logs --since (\S+)`", said)
    assert since, said
    new = tmp_path / "new" / "hookline.db"
    assert asyncio.run(_add_event(new, "new")) == lost_id  # the id is given out again
    with log.open("a") as lines:
        lines.write(_accepted_line(lost_id, "new"))

    def about_new(*extra: str) -> list[str]:
        shown = cli_stdout("--db", str(new), "logs", str(log), "--event", "new", "--json", *extra)
        return [json.loads(line)["source_event_id"] for line in shown.splitlines()]

    assert about_new() == ["lost", "new"]
    assert about_new("--since", since.group(1)) == ["new"]
    said = json.loads(cli_stdout("--db", str(old), "restore", str(snapshot), "--into",
                           str(tmp_path / "again"), "--json"))
    assert parse_instant(said["logs_since"], 0.0) >= parse_instant(since.group(1), 0.0)

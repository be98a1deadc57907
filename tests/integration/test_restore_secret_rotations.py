"""A restore brings back the snapshot's destination signing secrets: a rotation made after
the snapshot is undone (deliveries are signed with the secret the receiver dropped), and so
is an `expire-previous-secret` (a retired, perhaps leaked, secret signs again). `hookline
restore` says so, with the snapshot's time, the log search that finds the rotations and
expiries made since, and the destinations whose previous secret signs again in the copy.

The real CLI in-process on real SQLite files, as test_restore_log_ids.py."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from hookline.shared.store.backup_format import Manifest
from hookline.shared.store.sqlite import SqliteStore
from hookline.supervisor.cli.human import iso_time, iso_time_ms
from hookline.supervisor.cli.main import main as hookline_main


def _cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert hookline_main(list(args)) == 0, args
    return out.getvalue()


async def _secret(db: Path, name: str, tenant: str) -> str:
    async with SqliteStore(str(db)) as store:
        dest = await store.get_destination(name, tenant=tenant)
        assert dest is not None
        return dest.secret


def test_restore_warns_that_rotations_and_expiries_after_the_snapshot_are_undone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    live, log = tmp_path / "live.db", tmp_path / "hookline.log"
    monkeypatch.setenv("HOOKLINE_LOG_FILE", str(log))
    db = ("--db", str(live))
    _cli(*db, "init")
    _cli(*db, "tenants", "put", "acme")
    _cli(*db, "destinations", "add", "mine", "https://example.com/a")
    _cli(*db, "destinations", "add", "theirs", "https://example.com/b", "--tenant", "acme")
    # Before the snapshot: theirs rotates with an overlap, so the snapshot holds a
    # previous secret that still signs.
    _cli(*db, "destinations", "rotate-secret", "theirs", "--tenant", "acme", "--overlap", "1h")
    old_secret = asyncio.run(_secret(live, "mine", "_default"))
    _cli(*db, "backup", "--out", str(tmp_path / "snaps"))
    [snapshot] = (tmp_path / "snaps").glob("*.db")
    taken_at = Manifest.read(snapshot.with_suffix(".json")).created_at_unix
    taken, since = iso_time(taken_at), iso_time_ms(taken_at)
    # After it: mine rotates at once (the receiver switched), theirs' old one is retired.
    _cli(*db, "destinations", "rotate-secret", "mine", "--overlap", "0s")
    _cli(*db, "destinations", "expire-previous-secret", "theirs", "--tenant", "acme")

    said = _cli(*db, "restore", str(snapshot), "--into", str(tmp_path / "new"))
    restored = tmp_path / "new" / "hookline.db"
    assert asyncio.run(_secret(restored, "mine", "_default")) == old_secret  # the undoing
    assert (f"destination signing secrets are the snapshot's (taken {taken}): every "
            "rotate-secret and expire-previous-secret made after it is undone") in said, said
    assert (f"hookline --db {restored} destinations rotate-secret NAME [--tenant ID] "
            "--secret whsec_... --overlap 0s") in said, said
    assert "previous secrets that sign again" in said, said
    assert "theirs (tenant acme) until " in said, said
    assert "mine" not in said.rpartition("previous secrets that sign again")[2], said

    # The search it prints finds exactly the two changes made after the snapshot.
    search = said.split("find them with `", 1)[1].split("`", 1)[0]
    command, _, pattern = search.partition(" | grep -E ")
    assert command.startswith(f"hookline logs --since {since} --json"), search
    shown = _cli(*db, *command.split()[1:])
    found = [json.loads(line) for line in shown.splitlines()
             if re.search(pattern.strip("'"), line)]  # what grep -E keeps
    assert [(line["event"], line["destination"]) for line in found] == [
        ("secret_rotated", "mine"), ("previous_secret_expired", "theirs")], shown

    as_json = json.loads(_cli(*db, "restore", str(snapshot), "--into",
                              str(tmp_path / "again"), "--json"))
    assert as_json["secrets_as_of"] == since
    assert [(s["tenant"], s["destination"]) for s in as_json["previous_secrets_signing"]] == [
        ("acme", "theirs")]


def test_restore_without_a_manifest_says_the_snapshot_time_is_unknown(tmp_path: Path):
    live = tmp_path / "live.db"
    _cli("--db", str(live), "init")
    _cli("--db", str(live), "destinations", "add", "mine", "https://example.com/a")
    _cli("--db", str(live), "backup", "--out", str(tmp_path / "snaps"))
    [snapshot] = (tmp_path / "snaps").glob("*.db")
    snapshot.with_suffix(".json").unlink()
    said = _cli("--db", str(live), "restore", str(snapshot), "--into", str(tmp_path / "new"),
                "--no-manifest")
    assert "(taken at an unknown time: no manifest)" in said, said
    assert "previous secrets that sign again" not in said, said

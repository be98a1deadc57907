"""The CLI's output against the admin API's, on one real SQLite file: `--json` prints exactly
the API's JSON for the same thing (the API runs in-process on a real socket on 127.0.0.1),
and the human output of every command is aligned text without Python reprs."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from hookline.ingest.app import build_app
from hookline.rehearsal.harness import free_port
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead, Done
from hookline.shared.store.sqlite import SqliteStore
from hookline.supervisor.cli.human import duration, iso_time, show, size
from hookline.supervisor.cli.main import main as hookline_main
from tests.conftest import new_event

TOKEN = "t0ken-for-output-tests"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

PYTHON_REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\['|\{'|\('|\b[12]\d{9}\.\d+")
"""What human output must never contain: Python reprs and bare unix-seconds floats."""
ISO_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")


class ApiServer:
    """The ingest app (admin API included) on 127.0.0.1, in a thread with its own loop,
    on its own store over `db`."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.base = f"http://127.0.0.1:{free_port()}"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._store = SqliteStore(db)
        self._runner: web.AppRunner | None = None

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)

    async def _start(self) -> None:
        await self._store.open()
        app = build_app(self._store, Config(db=self.db, admin_token=TOKEN,
                                            allow_networks="127.0.0.0/8"))
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", int(self.base.rsplit(":", 1)[1])).start()

    def stop(self) -> None:
        async def stop() -> None:
            assert self._runner is not None
            await self._runner.cleanup()
            await self._store.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer of `method path`; fails the test on a non-2xx status."""
        request = urllib.request.Request(
            self.base + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return json.loads(resp.read())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite file with two destinations (one paused, one with a custom header), a
    source, two dead jobs and a done one, each with its attempts; nothing pending."""
    path = str(tmp_path_factory.mktemp("output") / "out.db")

    async def fill() -> None:
        async with SqliteStore(path) as store:
            await store.add_destination(name="d", url="http://127.0.0.1:9/x", secret=SECRET,
                                        event_types=["*"], max_in_flight=1,
                                        headers={"X-Api-Key": "k"})
            await store.add_destination(name="p", url="http://127.0.0.1:9/p", secret=SECRET,
                                        event_types=["never.*"], max_in_flight=2)
            await store.set_paused("p", True, "maintenance")
            await store.add_source(name="gh", scheme="github", secret="s" * 24)
            await store.add_events([new_event(e) for e in ("e1", "e2", "e3")])
            # max_in_flight 1: one claim at a time, each finished before the next
            for outcome in (Dead(error="HTTP 410"), Done(), Dead(error="HTTP 410")):
                (claim,) = await store.claim("w", 1, 30.0, 3)
                await store.finish([(claim, outcome, AttemptResult(
                    started_at=time.time(), duration_s=0.25,
                    status_code=200 if isinstance(outcome, Done) else 410,
                    response_excerpt='{"gone": true}'))])

    asyncio.run(fill())
    return path


@pytest.fixture(scope="module")
def api(db: str) -> Iterator[ApiServer]:
    server = ApiServer(db)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def cli(db: str, *args: str, code: int = 0) -> str:
    """Run `hookline --db DB ARGS` in this process; its stdout (the exit code must be `code`)."""
    out = io.StringIO()
    env = {"HOOKLINE_ALLOW_NETWORKS": "127.0.0.0/8"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out):
            got = hookline_main(["--db", db, *args])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert got == code, (args, got, out.getvalue())
    return out.getvalue()


def cli_json(db: str, *args: str) -> Any:
    return json.loads(cli(db, *args, "--json"))


def _dead_ids(api: ApiServer) -> list[int]:
    return [j["id"] for j in api.call("GET", "/v1/admin/dead")]


# -- the same JSON from the CLI and the API -------------------------------------------------


READ_PAIRS = [
    (["destinations", "list"], "/v1/admin/destinations"),
    (["destinations", "show", "d"], "/v1/admin/destinations/d"),
    (["destinations", "show", "p"], "/v1/admin/destinations/p"),
    (["jobs", "--limit", "100"], "/v1/admin/jobs?limit=100"),
    (["jobs", "--status", "dead"], "/v1/admin/jobs?status=dead"),
    (["dead"], "/v1/admin/dead"),
    (["dead", "--destination", "d", "--since", "1h"], "/v1/admin/dead?destination=d&since=1h"),
    (["sources", "list"], "/v1/admin/sources"),
]


@pytest.mark.parametrize(("args", "path"), READ_PAIRS, ids=[" ".join(a) for a, _ in READ_PAIRS])
def test_listings_print_the_api_json(db: str, api: ApiServer, args: list[str], path: str):
    """Each listing's --json is the admin API's answer for the same store, field for field."""
    assert cli_json(db, *args) == api.call("GET", path)


def test_stats_and_job_story_print_the_api_json(db: str, api: ApiServer):
    """stats (`jobs_by_status`, not `jobs`) and a job's story equal the API's; only the
    WAL's size may move between the two reads (opening a store writes to it)."""
    from_cli, from_api = cli_json(db, "stats"), api.call("GET", "/v1/admin/stats")
    assert set(from_cli) == set(from_api) and "jobs_by_status" in from_cli
    assert ({k: v for k, v in from_cli.items() if k != "wal_bytes"}
            == {k: v for k, v in from_api.items() if k != "wal_bytes"})
    for job_id in (*_dead_ids(api), 2):
        story = cli_json(db, "job", str(job_id))
        assert story == api.call("GET", f"/v1/admin/jobs/{job_id}")
        assert story["attempts_in_budget"] == 1 and len(story["attempts"]) == 1


# -- human output --------------------------------------------------------------------------


HUMAN_COMMANDS = [
    ["stats"], ["destinations", "list"], ["destinations", "show", "d"],
    ["destinations", "show", "p"], ["jobs"], ["jobs", "--status", "done"], ["dead"],
    ["sources", "list"], ["config", "show"], ["replay", "--all-dead", "--dry-run"], ["purge"],
    ["pause", "p", "--reason", "still down"], ["resume", "p"],
    ["destinations", "add", "h1", "http://127.0.0.1:9/h"],
    ["destinations", "update", "h1", "--set", "timeout_s=2.5", "--set", "ordered=true"],
    ["destinations", "show", "h1"], ["destinations", "remove", "h1"],
    ["sources", "add", "hs", "--scheme", "github"], ["sources", "remove", "hs"],
    ["destinations", "rotate-secret", "p", "--overlap", "1h"], ["destinations", "secret", "p"],
    ["destinations", "expire-previous-secret", "p"],
]


def test_human_output_has_no_python_reprs(db: str, api: ApiServer, tmp_path: Path):
    """Every command's human output, jobs and attempts included, spells times as ISO 8601
    UTC and never prints `None`, `True`, `['…']`, `{'…'}` or a bare unix float."""
    outputs = {" ".join(args): cli(db, *args) for args in HUMAN_COMMANDS}
    for job_id in (1, 2):
        outputs[f"job {job_id}"] = cli(db, "job", str(job_id))
    snaps, into = tmp_path / "snaps", tmp_path / "restored"
    outputs["backup"] = cli(db, "backup", "--out", str(snaps), "--keep", "2")
    [snapshot] = sorted(snaps.glob("*.db"))
    outputs["backup verify"] = cli(db, "backup", "verify", str(snapshot))
    outputs["restore"] = cli(db, "restore", str(snapshot), "--into", str(into))
    log = tmp_path / "h.log"
    log.write_text(json.dumps({"ts": "2026-12-01T18:03:14.123Z", "level": "info",
                               "event": "job_retry_scheduled", "job_id": 1, "status": None,
                               "run_at": 1796148736.75, "retry_in_s": 0.107,
                               "job_ids": [1, 2], "duplicate": True}) + "\n")
    outputs["logs"] = cli(db, "logs", str(log))
    # a job names its tenant: destination names repeat across tenants
    assert re.search(r"^tenant\s+_default$", outputs["job 1"], re.MULTILINE), outputs["job 1"]
    for command, text in outputs.items():
        assert text.strip(), command
        assert not PYTHON_REPR.search(text), (command, PYTHON_REPR.search(text), text)
    for command in ("destinations list", "jobs", "dead", "sources list", "job 1",
                    "destinations show d", "backup", "backup verify", "logs",
                    "destinations rotate-secret p --overlap 1h"):
        assert ISO_TIME.search(outputs[command]) or "T18:03:14.123Z" in outputs[command], (
            command, outputs[command])
    shown = {name: dict(line.split(None, 1) for line in outputs[f"destinations show {name}"]
                        .splitlines()) for name in ("p", "h1")}
    assert shown["p"]["paused"] == "yes" and shown["p"]["paused_reason"] == "maintenance"
    assert shown["p"]["timeout_s"] == "-" and shown["p"]["event_types"] == "never.*"
    assert shown["h1"]["timeout_s"] == "2.5 s" and shown["h1"]["ordered"] == "yes"
    assert "X-Api-Key" in outputs["destinations show d"]
    assert re.search(r"jobs_by_status\s+pending 0, running 0, done 1, dead 2",
                     outputs["stats"]), outputs["stats"]
    assert "250 ms" in outputs["job 1"] and "HTTP 410" in outputs["job 1"]
    assert "run_at=2026-" in outputs["logs"] and 'retry_in_s="107 ms"' in outputs["logs"]


def test_actions_print_the_api_json(db: str, api: ApiServer):
    """pause, resume, update, add (given and generated secrets, policy fields), remove, the
    secret's rotate, reveal and early expiry, sources add and remove, replay (dry run and real)
    and purge answer the same JSON through both."""
    assert cli_json(db, "pause", "d", "--reason", "r") == api.call(
        "POST", "/v1/admin/destinations/d/pause", {"reason": "r"}) == {"paused": "d",
                                                                      "reason": "r"}
    assert cli_json(db, "resume", "d") == api.call("POST", "/v1/admin/destinations/d/resume")
    assert cli_json(db, "destinations", "update", "p", "--max-in-flight", "3") == api.call(
        "PATCH", "/v1/admin/destinations/p", {"max_in_flight": 3})

    def added(name: str, out: dict[str, Any]) -> dict[str, Any]:
        assert out["name"] == name
        return {k: v for k, v in out.items() if k not in ("id", "name", "created_at")}

    url = "http://127.0.0.1:9/new"
    assert added("c1", cli_json(db, "destinations", "add", "c1", url, "--secret", SECRET,
                                "--max-in-flight", "4")) == added("a1", api.call(
        "POST", "/v1/admin/destinations",
        {"name": "a1", "url": url, "secret": SECRET, "max_in_flight": 4}))
    generated = [cli_json(db, "destinations", "add", "c2", url),
                 api.call("POST", "/v1/admin/destinations", {"name": "a2", "url": url})]
    assert all(g["secret"].startswith("whsec_") and len(g["secret"]) > 30 for g in generated)
    assert ({k for k in generated[0] if k != "secret"} == {k for k in generated[1]
                                                          if k != "secret"})
    assert added("c3", cli_json(db, "destinations", "add", "c3", url, "--secret", SECRET,
                                "--timeout", "2.5", "--rate-limit", "4", "--ordered")) == added(
        "a3", api.call("POST", "/v1/admin/destinations", {
            "name": "a3", "url": url, "secret": SECRET, "timeout_s": 2.5,
            "rate_limit_per_s": 4, "ordered": True}))
    rotated = cli_json(db, "destinations", "rotate-secret", "c3", "--overlap", "1h")
    assert rotated == api.call("GET", "/v1/admin/destinations/c3/secret") == cli_json(
        db, "destinations", "secret", "c3")
    assert set(rotated) == set(api.call("POST", "/v1/admin/destinations/a3/rotate-secret"))
    assert added("c3", cli_json(db, "destinations", "expire-previous-secret", "c3")) == added(
        "a3", api.call("POST", "/v1/admin/destinations/a3/expire-previous-secret")) == {
        "expired": True}
    assert cli_json(db, "destinations", "remove", "c1") == {"removed": "c1", "jobs_ended": 0}
    assert api.call("DELETE", "/v1/admin/destinations/a1") == {"removed": "a1",
                                                               "jobs_ended": 0}

    source_cli = cli_json(db, "sources", "add", "s1", "--scheme", "token", "--secret", "t" * 24)
    source_api = api.call("POST", "/v1/admin/sources",
                          {"name": "s2", "scheme": "token", "secret": "t" * 24})
    assert added("s1", source_cli) == added("s2", source_api)
    generated = [cli_json(db, "sources", "add", "s3", "--scheme", "github"),
                 api.call("POST", "/v1/admin/sources", {"name": "s4", "scheme": "github"})]
    assert all(len(g["secret"]) > 20 and "…" not in g["secret"] for g in generated)
    assert cli_json(db, "sources", "remove", "s1") == {"removed": "s1"}
    assert api.call("DELETE", "/v1/admin/sources/s2") == {"removed": "s2"}

    assert cli_json(db, "purge") == api.call("POST", "/v1/admin/purge", {})
    assert cli_json(db, "replay", "--all-dead", "--dry-run") == api.call(
        "POST", "/v1/admin/replay", {"all_dead": True, "dry_run": True}) == {
        "count": 2, "dry_run": True}
    first, second = _dead_ids(api)
    assert cli_json(db, "replay", "--job", str(first)) == api.call(
        "POST", "/v1/admin/replay", {"job_id": second}) == {"count": 1, "dry_run": False}


def test_values_are_spelled_for_people():
    """Field names decide the spelling: instants, durations, rates, sizes; and no reprs."""
    assert iso_time(1_796_148_736.75) == "2026-12-01T18:12:16Z"
    assert [duration(s) for s in (0.0078, 12.5, 245, 3 * 3600 + 720, 2 * 86400 + 4 * 3600)] == [
        "8 ms", "12.5 s", "4 min 5 s", "3 h 12 min", "2 d 4 h"]
    assert [size(n) for n in (812, 4096, 1_300_000)] == ["812 B", "4.0 KiB", "1.2 MiB"]
    assert show("created_at", 1_796_148_736.75) == "2026-12-01T18:12:16Z"
    assert show("failing_since", None) == "-" and show("paused", True) == "yes"
    assert show("rate_limit_per_s", 5.0) == "5/s" and show("timeout_s", 2.5) == "2.5 s"
    assert show("event_types", ["a.*", "b"]) == "a.*, b" and show("headers", {}) == "-"
    assert show("jobs_by_status", {"pending": 4, "dead": 0}) == "pending 4, dead 0"
    assert show("jobs_by_destination", {"d": {"done": 1}}) == "d (done 1)"
    assert show("response_excerpt", "a\nb\tc") == "a b c" and show("ratio", 0.25) == "0.25"

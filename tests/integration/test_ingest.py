"""The ingest app on 127.0.0.1 against a real database (each backend in turn: a SQLite file,
then PostgreSQL), and `python -m hookline.ingest` as a process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from hookline.ingest.app import build_app
from hookline.ingest.app_state import COMMITTER_KEY
from hookline.ingest.group_commit import GroupCommitter
from hookline.ingest.main import serve
from hookline.shared.config import Config
from hookline.shared.errors import StoreBusy, StoreClosing
from hookline.shared.process.lifecycle import BOOT_ERROR_EXIT
from hookline.shared.report_models import Stats
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from tests.conftest import is_postgres, new_event, opened_store

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "token-for-tests"  # both ingest_token and admin_token, so one header serves both
SMALL = Config(max_body_bytes=4096, ingest_token=TOKEN, admin_token=TOKEN)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON_TYPE = {"Content-Type": "application/json", **AUTH}  # else aiohttp sends octet-stream


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    """A client of the ingest app served on 127.0.0.1 (max_body_bytes = 4096)."""
    async with TestClient(TestServer(build_app(real_store, SMALL), host="127.0.0.1")) as c:
        yield c


async def add_destination(store: Store, name: str, *event_types: str) -> None:
    await store.add_destination(name=name, url=f"http://127.0.0.1:9/{name}",
                                secret=generate_secret(), event_types=event_types,
                                max_in_flight=4)


def event_body(event_id: str, type_: str = "invoice.paid", **extra: Any) -> bytes:
    return json.dumps({"id": event_id, "type": type_, "data": {"n": 1}, **extra}).encode()


async def post(client: TestClient[Any, Any], body: Any, **headers: str
               ) -> tuple[int, dict[str, Any]]:
    """POST to /v1/events (JSON content type unless overridden); returns (status, json)."""
    headers = {**JSON_TYPE, **headers}
    async with client.post("/v1/events", data=body, headers=headers) as resp:
        assert resp.content_type == "application/json"
        return resp.status, await resp.json()


async def assert_nothing_stored(store: Store) -> None:
    stats = await store.stats()
    assert stats.events == 0 and sum(stats.jobs_by_status.values()) == 0


# -- accepted, fanned out, deduplicated ----------------------------------------------------


async def test_accepted_event_fans_out_to_subscribed_destinations_only(client, real_store):
    """202 once committed; one job per destination whose subscription matches (exact type,
    `prefix.*`, `*`), none for others; event and jobs are in the store when the answer comes."""
    await add_destination(real_store, "exact", "invoice.paid")
    await add_destination(real_store, "prefix", "invoice.*")
    await add_destination(real_store, "all", "*")
    await add_destination(real_store, "other", "invoice.created", "customer.*")
    with capture_logs() as logs:
        status, answer = await post(client, event_body("evt_1"))
    assert status == 202
    assert answer["jobs"] == 3 and isinstance(answer["event_id"], int)
    assert answer["message_id"].startswith("msg_") and "duplicate" not in answer
    jobs = await real_store.list_jobs()
    assert sorted(j.destination for j in jobs) == ["all", "exact", "prefix"]
    assert {j.event_id for j in jobs} == {answer["event_id"]}
    assert {j.status for j in jobs} == {"pending"}
    assert (await real_store.stats()).events == 1
    accepted = [entry for entry in logs if entry["event"] == "event_accepted"]
    assert accepted == [{"event": "event_accepted", "log_level": "info",
                         "event_id": answer["event_id"], "message_id": answer["message_id"],
                         "source": "api", "source_event_id": "evt_1", "type": "invoice.paid",
                         "tenant": "_default", "jobs": 3, "job_ids": [1, 2, 3]}]


async def test_event_without_subscribers_is_stored_with_no_jobs(client, real_store):
    """An event nobody subscribes to is still accepted and stored, with jobs = 0."""
    await add_destination(real_store, "other", "customer.*")
    status, answer = await post(client, event_body("evt_1"))
    assert (status, answer["jobs"]) == (202, 0)
    assert (await real_store.stats()).events == 1


async def test_repeat_of_same_source_and_id_is_a_duplicate(client, real_store):
    """A second POST with the same (source, id) answers 200 duplicate with the first
    event's ids and creates no event and no job; the same id from another source is new."""
    await add_destination(real_store, "all", "*")
    _, first = await post(client, event_body("evt_1"))
    with capture_logs() as logs:
        status, again = await post(client, event_body("evt_1", type_="other.type"))
    assert status == 200
    assert again == {"event_id": first["event_id"], "message_id": first["message_id"],
                     "jobs": 0, "duplicate": True}
    assert [e["event"] for e in logs] == ["event_duplicate"]
    stats = await real_store.stats()
    assert (stats.events, stats.jobs_by_status["pending"]) == (1, 1)
    status, other = await post(client, event_body("evt_1", source="github"))
    assert status == 202 and other["event_id"] != first["event_id"]


async def test_stored_body_is_exactly_the_posted_bytes(client, real_store):
    """The body a worker claims is byte for byte what was posted: non-ASCII, odd spacing
    and key order that json.dumps would change are all kept."""
    await add_destination(real_store, "all", "*")
    body = ('{ "type" :"a.b",\n\t"data":{"zeta":1 ,"alpha":"héllo ☃ \\u00e9","n":1.50},'
            '"id":"evt_exact"   }  ').encode()
    assert json.dumps(json.loads(body)).encode() != body
    status, _ = await post(client, body)
    assert status == 202
    [claim] = await real_store.claim("test", 10, 30.0, 5)
    assert claim.body == body


# -- rejected: 4xx JSON, nothing stored ----------------------------------------------------


@pytest.mark.parametrize(("body", "field"), [
    (b"this is not json", "body"),
    (b"", "body"),
    (b'[{"id": "a", "type": "t", "data": 1}]', "body"),
    (b'{"type": "t", "data": 1}', "id"),
    (b'{"id": "a", "data": 1}', "type"),
    (b'{"id": "a", "type": "t"}', "data"),
    (b'{"id": "a.b", "type": "t", "data": 1}', "id"),
    (b'{"id": 12, "type": "t", "data": 1}', "id"),
    (b'{"id": "a", "type": "bad type", "data": 1}', "type"),
    (b'{"id": "a", "type": "t", "data": 1, "extra": 2}', "extra"),
    (b'{"id": "a", "type": "t", "data": "\xff"}', "body"),
])
async def test_malformed_event_is_400_naming_the_field(client, real_store, body, field):
    """Each malformed body gets 400 invalid_event whose detail names the problem field,
    and nothing is stored."""
    await add_destination(real_store, "all", "*")
    with capture_logs() as logs:
        status, answer = await post(client, body)
    assert status == 400
    assert answer["error"] == "invalid_event" and answer["field"] == field
    assert answer["detail"].startswith(f"{field}: ")
    assert [(e["event"], e["error"]) for e in logs] == [("event_rejected", "invalid_event")]
    await assert_nothing_stored(real_store)


async def test_oversize_body_with_content_length_is_413(client, real_store):
    """A body over max_body_bytes (declared by Content-Length) gets 413 body_too_large."""
    body = event_body("big", data="x" * SMALL.max_body_bytes)
    status, answer = await post(client, body)
    assert (status, answer["error"]) == (413, "body_too_large")
    await assert_nothing_stored(real_store)


async def test_oversize_chunked_body_is_413_without_buffering_it(client, real_store):
    """A chunked body with no Content-Length is refused with 413 as soon as it passes the
    limit: the answer arrives while the client is still holding back the rest of the body."""
    answered = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"id": "big", "type": "t", "data": "'
        for _ in range(8):  # 8 KiB: twice the limit
            yield b"x" * 1024
        await asyncio.wait_for(answered.wait(), 10)  # the rest only after the answer came
        for _ in range(64):
            yield b"x" * 1024
        yield b'"}'

    async with client.post("/v1/events", data=chunks(), headers=JSON_TYPE) as resp:
        assert "Content-Length" not in resp.request_info.headers
        answered.set()
        assert (resp.status, (await resp.json())["error"]) == (413, "body_too_large")
    await assert_nothing_stored(real_store)


async def test_small_chunked_body_is_accepted(client, real_store):
    """Chunked transfer without Content-Length is fine when the body fits the limit."""
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"id": "chunked", '
        yield b'"type": "t", "data": 1}'

    status, _ = await post(client, chunks())
    assert status == 202


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "application/json; charset=latin-1"])
async def test_wrong_content_type_is_415(client, real_store, content_type):
    """A Content-Type other than application/json (UTF-8) gets 415, nothing stored."""
    status, answer = await post(client, event_body("a"), **{"Content-Type": content_type})
    assert (status, answer["error"]) == (415, "unsupported_media_type")
    await assert_nothing_stored(real_store)


async def test_missing_content_type_is_tolerated(client):
    """A request without Content-Type is accepted if the body is JSON."""
    async with client.post("/v1/events", data=event_body("a"), headers=AUTH,
                           skip_auto_headers=["Content-Type"]) as resp:
        assert "Content-Type" not in resp.request_info.headers
        assert resp.status == 202


async def test_unknown_path_and_wrong_method_are_json(client):
    """aiohttp's own 404 and 405 come back in the JSON error shape (405 keeps Allow)."""
    async with client.get("/nope") as resp:
        assert resp.status == 404
        assert (await resp.json())["error"] == "not_found"
    async with client.get("/v1/events") as resp:
        assert resp.status == 405
        assert (await resp.json())["error"] == "method_not_allowed"
        assert "POST" in resp.headers["Allow"]


# -- health, stats, store failures ---------------------------------------------------------


async def test_healthz_and_stats(client, real_store):
    """GET /healthz is ok; GET /v1/admin/stats reports the store's counts."""
    await add_destination(real_store, "all", "*")
    await post(client, event_body("a"))
    async with client.get("/healthz") as resp:
        body = await resp.json()
        # The store's own check (the SQLite WAL: hookline.shared.store.Store.health) where it has
        # one.
        assert (resp.status, body["status"], set(body.get("checks", {})) <= {"wal"}) == (
            200, "ok", True)
    async with client.get("/v1/admin/stats", headers=AUTH) as resp:
        stats = await resp.json()
    assert resp.status == 200
    assert stats["events"] == 1 and stats["attempts"] == 0
    assert stats["jobs_by_status"] == {"pending": 1, "running": 0, "done": 0, "dead": 0}
    assert stats["oldest_pending_age_s"] >= 0


async def test_stats_need_the_admin_token_when_one_is_set(real_store):
    """With admin_token set, /v1/admin/stats answers 401 JSON without the Bearer token."""
    app = build_app(real_store, Config(admin_token="s3cret"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        async with c.get("/v1/admin/stats") as resp:
            assert (resp.status, (await resp.json())["error"]) == (401, "unauthorized")
        async with c.get("/v1/admin/stats", headers={"Authorization": "Bearer s3cret"}) as resp:
            assert resp.status == 200


def location(store: Store) -> str:
    """Where a store's data lives (a SQLite file path or a PostgreSQL URL): internals that
    must never reach a client."""
    return str(getattr(store, "path", None) or getattr(store, "dsn"))  # noqa: B009  (`dsn` is no Store attribute: PostgreSQL only)


class FailingStore:
    """Delegates to a real store, but add_events raises `error` (and stats is broken)."""

    def __init__(self, inner: Store, error: Exception) -> None:
        self.inner, self.error = inner, error

    def __getattr__(self, name: str) -> Any:  # every other operation (the catalogue's reads)
        return getattr(self.inner, name)

    async def add_events(self, events: Any, **options: Any) -> Any:
        raise self.error

    async def stats(self) -> Stats:
        raise RuntimeError(f"secret path {location(self.inner)}")


async def test_store_busy_is_503_with_retry_after(real_store):
    """StoreBusy from the store answers 503 store_busy with Retry-After: 1."""
    store = FailingStore(real_store, StoreBusy("database is locked"))
    app = build_app(store, SMALL)  # type: ignore[arg-type]
    async with (TestClient(TestServer(app, host="127.0.0.1")) as c,
                c.post("/v1/events", data=event_body("a"), headers=JSON_TYPE) as resp):
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "1"
        assert (await resp.json())["error"] == "store_busy"
    await assert_nothing_stored(real_store)


async def test_unexpected_error_is_500_without_internals(real_store):
    """An unexpected exception answers 500 internal_error; the body holds no trace or path,
    the log holds the exception."""
    store = FailingStore(real_store, ZeroDivisionError("boom"))
    app = build_app(store, SMALL)  # type: ignore[arg-type]
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        with capture_logs() as logs:
            for path, method in (("/v1/events", "POST"), ("/v1/admin/stats", "GET")):
                async with c.request(method, path, data=event_body("a"),
                                     headers=JSON_TYPE) as resp:
                    text = await resp.text()
                assert resp.status == 500
                assert json.loads(text) == {"error": "internal_error",
                                            "detail": "an unexpected error occurred"}
                assert "Traceback" not in text and location(real_store) not in text
    failures = [e for e in logs if e["event"] == "request_failed"]
    assert len(failures) == 2 and all(e.get("exc_info") for e in failures)


# -- group commit --------------------------------------------------------------------------


async def test_concurrent_posts_share_commits(real_store):
    """200 concurrent posts are all answered 202 and stored with their jobs, in fewer
    add_events calls than requests (group commit)."""
    await add_destination(real_store, "a", "*")
    await add_destination(real_store, "b", "load.*")
    committer = GroupCommitter(real_store)
    app = build_app(real_store, SMALL, committer=committer)
    assert app[COMMITTER_KEY] is committer
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        results = await asyncio.gather(*(post(c, event_body(f"e{i}", "load.test"))
                                         for i in range(200)))
    assert [status for status, _ in results] == [202] * 200
    assert all(answer["jobs"] == 2 for _, answer in results)
    assert len({answer["event_id"] for _, answer in results}) == 200
    stats = await real_store.stats()
    assert (stats.events, stats.jobs_by_status["pending"]) == (200, 400)
    assert committer.committed == 200
    assert 1 <= committer.batches < 200


async def test_committer_failure_reaches_every_waiter_and_stop_drains(real_store):
    """A failing add_events fails every request of its batch; stop() commits what is queued
    before the task ends, and submit after stop is refused."""
    broken = FailingStore(real_store, StoreBusy("locked"))
    failing = GroupCommitter(broken)  # type: ignore[arg-type]
    failing.start()
    outcomes = await asyncio.gather(*(failing.submit(new_event(f"f{i}")) for i in range(5)),
                                    return_exceptions=True)
    await failing.stop()
    assert failing.batches == 1  # all five were queued before the committer woke
    assert all(isinstance(o, StoreBusy) for o in outcomes)

    committer = GroupCommitter(real_store, max_batch=2)
    committer.start()
    waiters = [asyncio.ensure_future(committer.submit(new_event(f"d{i}"))) for i in range(5)]
    await asyncio.sleep(0)  # let every submit enqueue before stopping
    await committer.stop()
    assert all(w.done() and not w.cancelled() for w in waiters)
    assert (await real_store.stats()).events == 5
    assert committer.batches >= 3  # max_batch=2 splits 5 events into at least 3 commits
    with pytest.raises(StoreClosing):  # shutting down: its own error, not a busy database
        await committer.submit(new_event("late"))


# -- serve() and the process ---------------------------------------------------------------


async def start_serve(config: Config) -> tuple[asyncio.Task[None], asyncio.Event, int]:
    """Run serve() in a task; returns it, its stop event, and the bound port."""
    stop = asyncio.Event()
    ports: list[int] = []
    task = asyncio.create_task(serve(config, ready=ports.append, stop=stop))
    deadline = time.monotonic() + 10
    while not ports:
        assert not task.done() and time.monotonic() < deadline, "serve() did not start"
        await asyncio.sleep(0.01)
    return task, stop, ports[0]


async def test_serve_reports_its_port_and_stops_on_the_event(store_url, tmp_path):
    """serve() on port 0 calls ready(port), answers on it, and returns once stop is set."""
    config = Config(db=store_url, listen="127.0.0.1:0", ingest_token=TOKEN,
                    runtime_dir=str(tmp_path / "run"))
    task, stop, port = await start_serve(config)
    assert port > 0
    async with (aiohttp.ClientSession() as session,
                session.post(f"http://127.0.0.1:{port}/v1/events",
                             data=event_body("s1"), headers=JSON_TYPE) as resp):
        assert resp.status == 202
    stop.set()
    await asyncio.wait_for(task, 10)
    async with opened_store(config.db) as store:
        assert (await store.stats()).events == 1


async def test_stop_lets_a_request_still_sending_its_body_finish(store_url, tmp_path):
    """A stop while a request is still sending its body stops listening at once, yet lets
    that request finish: it is committed and answered 202 (with Connection: close)."""
    config = Config(db=store_url, listen="127.0.0.1:0", ingest_token=TOKEN,
                    graceful_timeout_s=4.0, runtime_dir=str(tmp_path / "run"))
    task, stop, port = await start_serve(config)
    release = asyncio.Event()
    first_part_sent = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b'{"id": "late", "type": "t", '
        first_part_sent.set()  # aiohttp asks for the next part once it has sent this one
        await asyncio.wait_for(release.wait(), 5)
        yield b'"data": 1}'

    async with aiohttp.ClientSession() as session:
        request = asyncio.ensure_future(session.post(
            f"http://127.0.0.1:{port}/v1/events", data=slow_body(), headers=JSON_TYPE))
        await asyncio.wait_for(first_part_sent.wait(), 5)
        await asyncio.sleep(0.2)  # the handler is now waiting for the rest of the body
        stop.set()
        # Refused within ms of the stop; 1.5 s leaves a loaded machine room and stays well
        # under the 3 s drain (graceful_timeout_s x 0.75), after which it closes anyway.
        refused_by = time.monotonic() + 1.5
        while True:  # until it no longer listens
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz"):
                    pass
            except aiohttp.ClientConnectionError:
                break
            assert time.monotonic() < refused_by, "still listening 1.5 s after the stop"
            await asyncio.sleep(0.05)
        assert not task.done()
        release.set()
        async with await request as resp:
            assert resp.status == 202
            assert resp.headers["Connection"] == "close"
    await asyncio.wait_for(task, 10)
    async with opened_store(config.db) as store:
        assert (await store.stats()).events == 1


def start_ingest(config: Config, log_path: Path) -> subprocess.Popen[bytes]:
    """`python -m hookline.ingest --config-json ...` as a real process, logging to `log_path`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "hookline.ingest", "--config-json", config.to_json()],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def log_events(log_path: Path) -> list[dict[str, Any]]:
    lines = log_path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
    return value


def listening_port(proc: subprocess.Popen[bytes], log_path: Path) -> int:
    def port() -> int | None:
        if proc.poll() is not None:
            raise AssertionError(f"ingest exited {proc.returncode}: {log_path.read_text()}")
        found = [e["port"] for e in log_events(log_path) if e["event"] == "ingest_listening"]
        return found[0] if found else None

    return int(wait_for(port, 15, "ingest_listening"))


async def test_process_serves_and_exits_0_on_sigterm(store_url, tmp_path):
    """The real `python -m hookline.ingest` accepts an event over a socket, then SIGTERM ends it
    cleanly with exit code 0 and the event committed."""
    config = Config(db=store_url, listen="127.0.0.1:0", ingest_token=TOKEN,
                    runtime_dir=str(tmp_path / "run"))
    log_path = tmp_path / "ingest.log"
    proc = start_ingest(config, log_path)
    try:
        port = await asyncio.to_thread(listening_port, proc, log_path)
        async with (aiohttp.ClientSession() as session,
                    session.post(f"http://127.0.0.1:{port}/v1/events",
                                 data=event_body("p1"), headers=JSON_TYPE) as resp):
            assert resp.status == 202
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, log_path.read_text()
    events = [e["event"] for e in log_events(log_path)]
    assert events[-1] == "ingest_stopped" and "event_accepted" in events
    # Between stopping and stopped only the process's write-lock figures (SQLite) are logged.
    assert [e for e in events[events.index("ingest_stopping") + 1:-1]
            if e != "write_lock_stats"] == []
    async with opened_store(config.db) as store:
        assert (await store.stats()).events == 1


def unopenable(store_url: str, tmp_path: Path) -> str:
    """A database URL of the same backend that cannot be opened: a file in a directory that
    does not exist, or a database the PostgreSQL server does not have."""
    if is_postgres(store_url):
        return store_url.rsplit("/", 1)[0] + "/no_such_database"
    return str(tmp_path / "no" / "such" / "dir" / "x.db")


@pytest.mark.parametrize("problem", ["unopenable_db", "port_in_use"])
async def test_process_cannot_boot_exits_3(store_url, tmp_path, problem):
    """A database that cannot be opened (SQLite: its directory does not exist; PostgreSQL:
    the server has no such database), or a port already taken, ends the process with
    BOOT_ERROR_EXIT (3) and a boot_failed log line."""
    run = str(tmp_path / "run")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if problem == "unopenable_db":
            config = Config(db=unopenable(store_url, tmp_path), listen="127.0.0.1:0",
                            runtime_dir=run)
        else:
            config = Config(db=store_url, listen=f"127.0.0.1:{taken.getsockname()[1]}",
                            runtime_dir=run)
        log_path = tmp_path / "ingest.log"
        proc = start_ingest(config, log_path)
        try:
            code = await asyncio.to_thread(proc.wait, 15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code == BOOT_ERROR_EXIT, log_path.read_text()
    events = [e["event"] for e in log_events(log_path)]
    # (a fresh SQLite file logs store_clock_anchored when opened, before the port fails)
    assert events[-1] == "boot_failed" and "ingest_listening" not in events, events

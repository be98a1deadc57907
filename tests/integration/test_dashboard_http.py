"""The dashboard's files and the admin views it reads, through the real ingest app on
127.0.0.1 with a real SQLite file."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.admin_views import decode_head
from hookline.ingest.app import build_app
from hookline.ingest.dashboard import CSP
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Done, Retry
from hookline.shared.process.lifecycle import STATUS_FILE, write_status
from hookline.shared.process.metrics_file import ProcessMetrics, SnapshotWriter, snapshot_path
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from hookline.supervisor.metrics import SupervisorMetrics
from tests.conftest import new_event

TOKEN = "t0ken-for-dashboard-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def real_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(str(tmp_path / "dash.db")) as s:
        yield s


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    return folder


@pytest.fixture
async def client(real_store: SqliteStore, runtime: Path) -> AsyncIterator[TestClient[Any, Any]]:
    config = Config(admin_token=TOKEN, db=real_store.path, runtime_dir=str(runtime))
    async with TestClient(TestServer(build_app(real_store, config), host="127.0.0.1")) as c:
        yield c


async def _get(client: TestClient[Any, Any], path: str) -> tuple[int, Any]:
    async with client.get(path, headers=AUTH) as resp:
        return resp.status, await resp.json()


async def test_page_and_assets_are_served_without_auth_under_a_strict_csp(client):
    """`/` and every file it loads answer 200 without a token, with the CSP (no inline script,
    same-origin only) and nosniff; an unknown or traversing asset name is a JSON 404; the
    page has no inline script and no data."""
    async with client.get("/") as resp:
        assert resp.status == 200 and resp.content_type == "text/html"
        assert resp.headers["Content-Security-Policy"] == CSP
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        html = await resp.text()
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    assert '<script type="module" src="/static/app.js"></script>' in html
    assert "<script>" not in html and " style=" not in html
    for name in ("app.js", "api.js", "dom.js", "chart.js", "overview.js", "destinations.js",
                 "destination_form.js", "forms.js", "sources.js", "dead.js", "job.js", "payload.js",
                 "events.js", "event.js", "bulk.js", "secret.js", "event_types.js", "style.css",
                 "favicon.svg"):
        async with client.get(f"/static/{name}") as resp:
            assert resp.status == 200, name
            assert resp.headers["Content-Security-Policy"] == CSP
            if name.endswith(".js"):
                assert resp.content_type == "text/javascript"
                text = await resp.text()
                for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                             "eval("):
                    assert sink not in text, (name, sink)
    for path in ("/static/missing.js", "/static/..%2F__init__.py", "/static/__init__.py"):
        async with client.get(path) as resp:
            assert resp.status == 404 and (await resp.json())["error"] == "not_found"


async def test_views_need_the_admin_token(client):
    """The dashboard's data routes are admin routes: 401 without the Bearer token."""
    for path in ("/v1/admin/destination-stats", "/v1/admin/throughput",
                 "/v1/admin/supervisor", "/v1/admin/jobs/1/event"):
        async with client.get(path) as resp:
            assert resp.status == 401, path


async def test_destination_stats_and_throughput(client, real_store):
    """destination-stats lists live destinations with counts, state and latency, never a
    secret; throughput answers zero-filled minute buckets holding what happened; bad
    parameters are 400."""
    secret = generate_secret()
    await real_store.add_destination(name="a", url="http://127.0.0.1:9/h", secret=secret,
                                     event_types=["*"], max_in_flight=3)
    await real_store.add_events([new_event("e1"), new_event("e2")])
    claims = await real_store.claim("w", 1, 30.0, 3)
    await real_store.finish([(claims[0], Done(), AttemptResult(
        started_at=time.time(), duration_s=0.25, status_code=200))])
    await real_store.set_paused("a", True, "circuit breaker: 100 consecutive failed attempts")

    status, rows = await _get(client, "/v1/admin/destination-stats")
    assert status == 200 and secret not in str(rows)
    [row] = rows
    assert (row["name"], row["paused"], row["pending"], row["in_flight"], row["dead"]) == (
        "a", True, 1, 0, 0)
    assert row["paused_reason"].startswith("circuit breaker")
    assert (row["latency_samples"], row["p50_s"], row["p99_s"]) == (1, 0.25, 0.25)
    assert row["delivered_samples"] == 1

    before = time.time()
    status, out = await _get(client, "/v1/admin/throughput?window=10m&bucket=60")
    after = time.time()
    assert status == 200 and out["bucket_s"] == 60 and len(out["buckets"]) in (10, 11)
    assert sum(b["events"] for b in out["buckets"]) == 2
    assert sum(b["delivered"] for b in out["buckets"]) == 1
    # The last bucket is the minute of the request (which may cross a minute's end).
    assert out["buckets"][-1]["start_s"] <= after and before < out["buckets"][-1]["start_s"] + 60
    assert sum(b["failed"] for b in out["buckets"]) == 0

    await real_store.set_paused("a", False)
    [claim] = await real_store.claim("w", 1, 30.0, 3)
    await real_store.finish([(claim, Retry(delay_s=3600, error="HTTP 503"),
                              AttemptResult(started_at=time.time(), duration_s=0.5,
                                            status_code=503))])
    status, out = await _get(client, "/v1/admin/throughput?window=10m&bucket=60")
    assert sum(b["failed"] for b in out["buckets"]) == 1
    status, [row] = await _get(client, "/v1/admin/destination-stats")
    assert (row["latency_samples"], row["delivered_samples"]) == (2, 1)
    for bad in ("window=often", "bucket=0", "bucket=x", "window=30d&bucket=1"):
        status, err = await _get(client, f"/v1/admin/throughput?{bad}")
        assert (status, err["error"]) == (400, "invalid_request"), bad


async def test_job_event_is_text_and_size_limited(client, real_store):
    """The job's event body comes back as text, cut to max_bytes (a character cut in two is
    dropped, not reported invalid); an unknown job is 404."""
    await real_store.add_destination(name="a", url="http://127.0.0.1:9/h",
                                     secret=generate_secret(), event_types=["*"],
                                     max_in_flight=3)
    body = '{"id": "e1", "data": "<script>x</script> ünïcode"}'.encode()
    [accepted] = await real_store.add_events([new_event("e1", "t.x", body=body)])
    job_id = accepted.job_ids[0]
    status, out = await _get(client, f"/v1/admin/jobs/{job_id}/event")
    assert status == 200
    assert (out["body"], out["truncated"], out["size_bytes"], out["valid_utf8"]) == (
        body.decode(), False, len(body), True)
    cut = body.index("ü".encode()) + 1  # inside the two bytes of ü
    status, out = await _get(client, f"/v1/admin/jobs/{job_id}/event?max_bytes={cut}")
    assert (out["body"], out["truncated"], out["valid_utf8"]) == (
        body[:cut - 1].decode(), True, True)
    status, out = await _get(client, f"/v1/admin/jobs/{job_id + 99}/event")
    assert (status, out["error"]) == (404, "not_found")
    assert decode_head(b"ok \xff bad", truncated=False) == ("ok \ufffd bad", False)


async def test_supervisor_view_reads_status_json(client, runtime):
    """Without a status file, or with one whose supervisor pid is gone, workers are unknown;
    with one written by a live supervisor, its counts are served."""
    status, out = await _get(client, "/v1/admin/supervisor")
    assert status == 200 and out["known"] is False and STATUS_FILE in out["detail"]

    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()
    write_status(runtime / STATUS_FILE, {"pid": gone.pid, "workers_alive": 2,
                                         "updated_at": time.time()})
    status, out = await _get(client, "/v1/admin/supervisor")
    assert out["known"] is False and str(gone.pid) in out["detail"]

    write_status(runtime / STATUS_FILE, {
        "pid": os.getpid(), "stopping": False, "workers_wanted": 3, "workers_alive": 2,
        "workers_healthy": 1, "slots": {}, "updated_at": time.time() - 5})
    status, out = await _get(client, "/v1/admin/supervisor")
    assert out["known"] is True
    assert (out["workers_wanted"], out["workers_alive"], out["workers_healthy"]) == (3, 2, 1)
    assert 4 < out["age_s"] < 60


async def test_processes_view_reads_the_snapshots_metrics_reads(real_store, runtime):
    """`GET /v1/admin/processes` answers from the per-process snapshots /metrics merges:
    without a supervisor only ingest's own row; with one, children wanted and alive by kind,
    restarts by slot and cause (a slot whose process is gone keeps its count, not its CPU),
    heartbeat ages, and rows in slot order; /metrics shows the same counts."""
    config = Config(admin_token=TOKEN, db=real_store.path, runtime_dir=str(runtime))
    writer = SnapshotWriter(runtime, "ingest", ProcessMetrics())
    app = build_app(real_store, config, snapshots=writer)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        status, out = await _get(client, "/v1/admin/processes")
        assert status == 200
        assert (out["supervised"], out["children"], out["restarts"]) == (False, {}, 0)
        [ingest] = out["processes"]
        assert (ingest["slot"], ingest["running"], ingest["restarts"]) == ("ingest", True, {})
        assert ingest["cpu_s"] > 0 and ingest["resident_memory_bytes"] > 0
        assert abs(ingest["started_at"] - time.time()) < 3600

        supervisor = SupervisorMetrics(runtime)  # written with this (live) process's pid
        supervisor.restarted("worker-1", {"signal": 9}, hung=False)
        supervisor.restarted("worker-1", {"exit_code": 1}, hung=False)
        supervisor.restarted("worker-1", {"signal": 9}, hung=False)
        supervisor.write(time.monotonic(),
                         wanted=["ingest", "worker-1", "worker-2", "worker-10"],
                         alive=["ingest", "worker-2", "worker-10"],
                         heartbeat_ages_s={"ingest": 0.25, "worker-1": 7.5, "worker-2": 0.5,
                                           "worker-10": 1.0})
        gone = await asyncio.create_subprocess_exec("true")
        await gone.wait()
        snapshot_path(runtime, "worker-1").write_text(json.dumps({
            "slot": "worker-1", "pid": gone.pid, "written_at": time.time(),
            "families": {"hookline_process_cpu_seconds_total": [[[], 3.0]]}}))

        status, out = await _get(client, "/v1/admin/processes")
        assert status == 200 and out["supervised"] is True
        assert out["children"] == {"ingest": {"wanted": 1, "alive": 1},
                                   "worker": {"wanted": 3, "alive": 2}}
        assert (out["restarts"], out["clock_steps"]) == (3, 0)
        rows = {row["slot"]: row for row in out["processes"]}
        assert [row["slot"] for row in out["processes"]] == [
            "supervisor", "ingest", "worker-1", "worker-2", "worker-10"]
        assert rows["worker-1"] == {
            "slot": "worker-1", "running": False, "cpu_s": None, "resident_memory_bytes": None,
            "started_at": None, "heartbeat_age_s": 7.5, "restarts": {"signal": 2, "crash": 1}}
        assert rows["supervisor"]["running"] and rows["supervisor"]["heartbeat_age_s"] is None
        assert (rows["ingest"]["heartbeat_age_s"], rows["worker-2"]["heartbeat_age_s"]) == (
            0.25, 0.5)
        assert rows["worker-2"]["running"] is False and rows["worker-2"]["restarts"] == {}

        async with client.get("/metrics", headers=AUTH) as resp:
            text = await resp.text()
        assert 'hookline_child_restarts_total{cause="signal",slot="worker-1"} 2.0' in text
        assert 'hookline_children_alive{kind="worker"} 2.0' in text


async def test_without_an_admin_token_the_page_loads_but_no_data_does(real_store):
    """With no admin_token configured the page is still served (it holds no data) and its
    data routes refuse every request (403 auth_not_configured)."""
    async with TestClient(TestServer(build_app(real_store, Config()), host="127.0.0.1")) as c:
        async with c.get("/") as resp:
            assert resp.status == 200
        async with c.get("/v1/admin/destination-stats", headers=AUTH) as resp:
            assert resp.status == 403
            assert (await resp.json())["error"] == "auth_not_configured"

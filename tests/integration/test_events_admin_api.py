"""The admin API's event lookup, listing, resend and retry now through the real ingest app on
127.0.0.1 and a real SQLite file: answers, refusals and audit lines (the store's SQL runs on
both backends in tests/unit/test_store_events.py; delivery end to end in
tests/acceptance/test_lookup_resend_serve.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Done
from hookline.shared.store import Store
from tests.conftest import execute_db, new_event

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
pytestmark = pytest.mark.sqlite_only


@pytest.fixture
async def client(real_store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(real_store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def _call(client: TestClient[Any, Any], method: str, path: str,
                headers: dict[str, str] | None = None, **kwargs: Any) -> tuple[int, Any]:
    async with client.request(method, path, headers={**AUTH, **(headers or {})},
                              **kwargs) as resp:
        return resp.status, await resp.json()


async def _delivered(store: Store) -> list[int]:
    """Three events to destination `d`, the first two delivered; their job ids."""
    await store.add_destination(name="d", url="http://127.0.0.1:9/", secret="whsec_" + "A" * 32,
                                event_types=["*"], max_in_flight=5)
    await store.add_events([new_event(f"e{i}") for i in range(3)])
    claims = await store.claim("w", 2, 30.0, 5)
    ok = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
    await store.finish([(c, Done(), ok) for c in claims])
    return [j.id for j in sorted(await store.list_jobs(), key=lambda j: j.id)]


async def test_lookup_listing_and_refusals(client, real_store, store_url):
    """Listing pages by id; bad filters and bodies are 400 naming the problem; unknown
    events, jobs and destinations are 404; a pending job's resend, a finished job's retry
    now and a purged body are 409 with the reason."""
    done_1, done_2, pending = await _delivered(real_store)
    status, page = await _call(client, "GET", "/v1/admin/events?limit=2")
    assert status == 200 and [e["source_event_id"] for e in page["events"]] == ["e2", "e1"]
    status, rest = await _call(client, "GET",
                               f"/v1/admin/events?limit=2&before={page['next_before']}")
    assert [e["source_event_id"] for e in rest["events"]] == ["e0"]
    assert rest["next_before"] is None
    status, found = await _call(client, "GET", "/v1/admin/events?status=pending")
    assert [e["jobs"][0]["id"] for e in found["events"]] == [pending]
    assert found["events"][0]["jobs"][0]["next_run_at"] is not None

    for method, path, body, field, words in [
        ("GET", "/v1/admin/events?status=lost", None, "status", "status: must be one of"),
        ("GET", "/v1/admin/events?since=yesterday", None, "since", "since"),
        ("GET", "/v1/admin/events/" + "x" * 600, None, "ref", "1 to 512 characters"),
        ("POST", "/v1/admin/resend", {}, "destination", "destination: is required"),
        ("POST", "/v1/admin/resend", {"destination": "d", "status": "pending"}, "status",
         "done, dead"),
        ("POST", "/v1/admin/retry-now", {"destination": "d", "status": "done"}, "status",
         "status"),
        ("POST", "/v1/admin/resend", {"destination": "d", "limit": 0}, "limit", "limit"),
        ("POST", "/v1/admin/resend", {"destination": "d", "since": "1h", "until": "2h"},
         "until", "until: must be after since"),
        ("POST", "/v1/admin/resend", {"destination": "d", "bogus": 1}, "bogus", "bogus"),
        ("POST", f"/v1/admin/jobs/{done_1}/resend", {"dry_run": "yes"}, "dry_run", "dry_run"),
        ("POST", f"/v1/admin/jobs/{done_1}/resend", {"reason": "x" * 1001}, "reason",
         "reason"),
    ]:
        status, answer = await _call(client, method, path, json=body)
        assert (status, answer["error"]) == (400, "invalid_request"), (path, body, answer)
        assert words in answer["detail"], (path, body, answer)
        assert answer["field"] == field, (path, body, answer)

    for path, body in [("/v1/admin/resend", {"destination": "nope"}),
                       ("/v1/admin/retry-now", {"destination": "nope"}),
                       ("/v1/admin/jobs/999/resend", None), ("/v1/admin/jobs/999/retry-now", None)]:
        status, answer = await _call(client, "POST", path, json=body)
        assert (status, answer["error"]) == (404, "not_found"), path
    status, answer = await _call(client, "GET", "/v1/admin/events/msg_nope")
    assert status == 404 and answer["detail"] == (
        "no event with webhook-id 'msg_nope' or sender's id 'msg_nope' from source 'api' in "
        "any tenant")

    status, answer = await _call(client, "POST", f"/v1/admin/jobs/{pending}/resend")
    assert status == 409 and "use retry now" in answer["detail"]
    status, answer = await _call(client, "POST", f"/v1/admin/jobs/{done_1}/retry-now")
    assert status == 409 and "resend it instead" in answer["detail"]
    await execute_db(store_url, f"UPDATE events SET body = x'', body_purged_at = 1 WHERE id = "
                                f"(SELECT event_id FROM jobs WHERE id = {done_2})")
    status, answer = await _call(client, "POST", f"/v1/admin/jobs/{done_2}/resend")
    assert status == 409 and "purged by retention" in answer["detail"]
    status, answer = await _call(client, "GET", "/v1/admin/events/e1")
    assert (answer["body_stored"], answer["body_bytes"]) == (False, 0)


async def test_resend_and_retry_now_are_audited(client, real_store):
    """A bulk resend and a retry now answer what they changed and log one audit line each
    with the client's address, the X-Hookline-Actor header, the reason and the filters; a
    dry run logs nothing and changes nothing."""
    done_1, done_2, pending = await _delivered(real_store)
    with capture_logs() as logs:
        status, dry = await _call(client, "POST", "/v1/admin/resend",
                                  json={"destination": "d", "dry_run": True})
        assert (status, dry) == (200, {"action": "resend", "count": 2,
                                       "job_ids": [done_1, done_2], "more": False,
                                       "dry_run": True})
        assert [e["jobs"][0]["status"] for e in (await _call(
            client, "GET", "/v1/admin/events"))[1]["events"]] == ["pending", "done", "done"]
        status, resent = await _call(
            client, "POST", "/v1/admin/resend",
            json={"destination": "d", "status": "done", "limit": 1, "reason": "lost"},
            headers={"X-Hookline-Actor": "alice"})
        assert (status, resent["count"], resent["job_ids"], resent["more"]) == (
            200, 1, [done_1], True)
        status, hurried = await _call(client, "POST", f"/v1/admin/jobs/{pending}/retry-now")
        assert (status, hurried["count"]) == (200, 0)  # already due
    audits = [e for e in logs if e["event"] in ("jobs_resent", "jobs_retried_now")]
    assert [(e["event"], e["by"], e["client"], e["actor"], e["reason"], e["filters"],
             e["count"]) for e in audits] == [
        ("jobs_resent", "admin_api", "127.0.0.1", "alice", "lost",
         {"destination": "d", "tenant": "_default", "status": "done", "limit": 1}, 1),
        ("jobs_retried_now", "admin_api", "127.0.0.1", None, None, {"job_id": pending}, 0)]
    story = await real_store.get_job(done_1)
    assert (story.job.status, story.job.attempts, story.replays) == ("pending", 0, 1)
    # The resent job's second budget numbers its attempts from 1 again: its story tells the
    # runs apart.
    claims = await real_store.claim("w", 5, 30.0, 5)  # it and the still pending job
    assert done_1 in {c.job_id for c in claims}
    await real_store.finish([(c, Done(), AttemptResult(started_at=0.0, duration_s=0.01,
                                                       status_code=200)) for c in claims])
    status, told = await _call(client, "GET", f"/v1/admin/jobs/{done_1}")
    assert status == 200, told
    assert [(a["run"], a["attempt"]) for a in told["attempts"]] == [(1, 1), (2, 1)]

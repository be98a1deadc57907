"""Finding an event, resending and retrying now against a running `hookline serve`, on a
SQLite file and on PostgreSQL, through the admin API and the real CLI, with a receiver on
127.0.0.1 checking what arrives.

The workers poll only every 30 s, so a job that goes out within the test's timeouts was woken
by the resend or retry now itself."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from procs import JSON_AUTH, ROOT, child_env, healthy, log_records, start_cli, stop

from hookline.rehearsal.harness import free_port
from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.signing import generate_secret
from tests.conftest import opened_store

SLOW_POLLS = {"HOOKLINE_POLL_INTERVAL_S": "30", "HOOKLINE_RETRY_BASE_S": "3600",
              "HOOKLINE_RETRY_CAP_S": "3600"}


def call(method: str, url: str, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One HTTP request with the admin token; (status, parsed JSON answer)."""
    data = None if body is None else (body if isinstance(body, bytes) else
                                      json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={**JSON_AUTH, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def hookline(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", "--db", db, *args],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT,
                          timeout=60, check=False)


async def until(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await asyncio.to_thread(predicate):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_lookup_resend_and_retry_now_on_a_running_service(store_url: str,
                                                                 tmp_path: Path):
    """Lookup by internal id, webhook-id and the sender's id agree (API and CLI); a dry run
    changes nothing; a delivered job resent reaches the receiver again with the same
    webhook-id and body bytes; a pending job retried now goes out long before its next run;
    both are audited; `hookline logs --event msg_...` finds the event's lines."""
    db = store_url
    secret = generate_secret()
    endpoints = [Endpoint("ok", secret), Endpoint("flaky", secret, parse_behaviour("fail:1"))]
    async with Receiver(endpoints) as receiver:
        async with opened_store(db) as store:
            await store.add_destination(name="ok", url=receiver.url("ok"), secret=secret,
                                        event_types=["push"], max_in_flight=2)
            await store.add_destination(name="flaky", url=receiver.url("flaky"),
                                        secret=secret, event_types=["order.*"],
                                        max_in_flight=2)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "serve.log"
        service = start_cli(["--db", db, "serve", "--workers", "1", "--listen",
                             f"127.0.0.1:{port}"], log, env=SLOW_POLLS)
        try:
            await until(lambda: log.exists() and len(log_records(log, "worker_started")) == 1
                        and healthy(base), "the service to start")
            accepted = await _lookup_and_resend(db, base, receiver)
            await _retry_now(db, base, receiver)
        finally:
            code = await asyncio.to_thread(stop, service)
    assert code == 0
    [audit] = log_records(log, "jobs_resent")
    assert (audit["by"], audit["actor"], audit["client"], audit["reason"], audit["count"]) == (
        "admin_api", "alice", "127.0.0.1", "customer lost it", 1)

    # every reference form is resolved the same way (tests/unit/test_logs_event_ref.py)
    shown = hookline(db, "logs", str(log), "--event", accepted["message_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert {r["event_id"] for r in lines} == {accepted["event_id"]}
    assert {"event_accepted", "job_claimed", "job_done"} <= {r["event"] for r in lines}


def _delivered(base: str, event_id: int) -> bool:
    """Whether every job of the event is done, as the admin API shows it."""
    status, event = call("GET", f"{base}/v1/admin/events/{event_id}")
    return status == 200 and all(job["status"] == "done" for job in event["jobs"])


async def _lookup_and_resend(db: str, base: str, receiver: Receiver) -> dict[str, Any]:
    """Post evt_1, look it up every way, dry-run then resend its delivered job; returns
    ingest's answer to the post."""
    body = b'{"id": "evt_1", "type": "push", "data": {"exact": "bytes \\u00e9"}}'
    status, accepted = await asyncio.to_thread(call, "POST", f"{base}/v1/events", body)
    assert status == 202
    await until(lambda: len(receiver.requests) == 1, "the first delivery")
    # The lookups are compared whole: the worker records the delivery just after the
    # receiver has it, so wait for that first, or one answer may still show it running.
    await until(lambda: _delivered(base, accepted["event_id"]), "the delivery recorded")

    answers = [await asyncio.to_thread(call, "GET", f"{base}/v1/admin/events/{ref}")
               for ref in (accepted["event_id"], accepted["message_id"], "evt_1",
                           "evt_1?source=api")]
    assert [a[0] for a in answers] == [200] * 4
    assert [a[1].pop("matched_by") for a in answers] == [
        "id", "message_id", "source_event_id", "source_event_id"]
    event = answers[0][1]
    assert all(a[1] == event for a in answers)
    assert (event["id"], event["message_id"], event["source_event_id"], event["body_stored"]) \
        == (accepted["event_id"], accepted["message_id"], "evt_1", True)
    [job] = event["jobs"]
    assert (job["destination"], job["status"], job["attempts"]) == ("ok", "done", 1)
    cli = hookline(db, "event", accepted["message_id"], "--json")
    assert cli.returncode == 0 and json.loads(cli.stdout) == {**event, "matched_by": "message_id"}
    status, missing = await asyncio.to_thread(call, "GET", f"{base}/v1/admin/events/evt_1"
                                                           "?source=stripe")
    assert status == 404 and "'evt_1' from source 'stripe'" in missing["detail"]

    status, dry = await asyncio.to_thread(call, "POST", f"{base}/v1/admin/resend",
                                          {"destination": "ok", "dry_run": True})
    assert (status, dry["count"], dry["job_ids"], dry["dry_run"]) == (200, 1, [job["id"]], True)
    status, after_dry = await asyncio.to_thread(call, "GET",
                                                f"{base}/v1/admin/events/{event['id']}")
    assert after_dry == {**event, "matched_by": "id"}  # nothing changed

    status, resent = await asyncio.to_thread(
        call, "POST", f"{base}/v1/admin/jobs/{job['id']}/resend",
        {"reason": "customer lost it"}, {"X-Hookline-Actor": "alice"})
    assert (status, resent["count"], resent["job_ids"]) == (200, 1, [job["id"]])
    await until(lambda: len(receiver.requests) == 2, "the resent delivery")
    first, second = receiver.requests
    assert first.webhook_id == second.webhook_id == accepted["message_id"]
    assert first.body_sha256 == second.body_sha256 == hashlib.sha256(body).hexdigest()
    await until(lambda: call("GET", f"{base}/v1/admin/events/evt_1")[1]["jobs"][0]["status"]
                == "done", "the resent job to be done")
    return accepted


async def _retry_now(db: str, base: str, receiver: Receiver) -> None:
    """Post ord_1, whose first attempt fails and is retried an hour later; the CLI's dry
    run counts it, its retry now sends it within the test's timeout."""
    status, _ = await asyncio.to_thread(
        call, "POST", f"{base}/v1/events", {"id": "ord_1", "type": "order.paid", "data": {}})
    assert status == 202

    def pending_retry() -> dict[str, Any] | None:
        [job] = call("GET", f"{base}/v1/admin/events/ord_1")[1]["jobs"]
        return job if job["status"] == "pending" and job["attempts"] == 1 else None

    await until(pending_retry, "the first attempt to fail")
    job = await asyncio.to_thread(pending_retry)
    assert job is not None and job["next_run_at"] > time.time() + 1000
    status, refused = await asyncio.to_thread(call, "POST",
                                              f"{base}/v1/admin/jobs/{job['id']}/resend")
    assert status == 409 and "retry now" in refused["detail"]

    dry = hookline(db, "retry-now", "--destination", "flaky", "--dry-run", "--json")
    assert dry.returncode == 0 and json.loads(dry.stdout) == {
        "action": "retry_now", "count": 1, "job_ids": [job["id"]], "more": False,
        "dry_run": True}
    assert await asyncio.to_thread(pending_retry) == job  # the dry run changed nothing

    done = hookline(db, "retry-now", str(job["id"]), "--reason", "receiver fixed")
    assert done.returncode == 0 and f"brought forward 1 job(s): {job['id']}" in done.stdout
    [audit] = [json.loads(line) for line in done.stderr.splitlines()
               if "jobs_retried_now" in line]
    assert (audit["by"], audit["reason"], audit["filters"], audit["count"]) == (
        "operator", "receiver fixed", {"job_id": job["id"]}, 1)
    assert audit["os_user"]
    await until(lambda: len([r for r in receiver.requests if r.endpoint == "flaky"]) == 2,
                "the retried delivery")

"""The event-type catalogue against a running `hookline serve`, on a SQLite file and on
PostgreSQL: a type changed by the CLI (another process, straight into the store) takes
effect in the service's ingest within its refresh bound; subscriptions are checked through
the admin API; a rejected event stores nothing while a valid one is delivered, signed, to a
receiver on 127.0.0.1; the tenant API lists the catalogue."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from procs import JSON_AUTH, healthy, log_records, run_cli, start_cli, stop

from hookline.rehearsal.harness import free_port
from hookline.rehearsal.receiver import Endpoint, Receiver
from hookline.shared.signing import generate_secret

SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer", "minimum": 1}},
          "required": ["amount"]}


def call(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    headers = dict(JSON_AUTH)
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def until(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await asyncio.to_thread(predicate):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_catalogue_on_a_running_service(store_url: str, tmp_path: Path):
    secret = generate_secret()
    async with Receiver([Endpoint("billing", secret)]) as receiver:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "serve.log"
        service = start_cli(["--db", store_url, "serve", "--workers", "1", "--listen",
                             f"127.0.0.1:{port}"], log)
        try:
            await until(lambda: log.exists() and len(log_records(log, "worker_started")) == 1
                        and healthy(base), "the service to start")
            good = await asyncio.to_thread(_operate, store_url, base,
                                           receiver.url("billing"), secret, tmp_path)
            await until(lambda: len(receiver.requests) == 1, "the valid event's delivery")
        finally:
            code = await asyncio.to_thread(stop, service)
    assert code == 0
    [delivered] = receiver.requests
    assert delivered.verified and delivered.webhook_id == good


def _publish(base: str, event_id: str, data: Any) -> tuple[int, Any]:
    return call("POST", f"{base}/v1/events",
                {"id": event_id, "type": "invoice.paid", "data": data})


def _operate(db: str, base: str, url: str, secret: str, tmp: Path) -> str:
    """Drive the service; returns the webhook-id of the one event that must be delivered."""
    # Empty catalogue: anything goes, as before.
    assert _publish(base, "before", {"amount": "lots"})[0] == 202
    schema = tmp / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    done = run_cli("--db", db, "event-types", "put", "invoice.paid", "--schema", str(schema),
                    "--validation", "reject")
    assert done.returncode == 0, done.stderr
    # The service's ingest notices the change by itself (it polls the change counter).
    for attempt in range(100):  # at most 10 s; the bound is CATALOGUE_POLL_S (1 s)
        rejected_id = f"bad-{attempt}"
        status, answer = _publish(base, rejected_id, {"amount": 0})
        if status == 400:
            break
        time.sleep(0.1)
    assert (status, answer["error"], answer["pointer"], answer["keyword"]) == (
        400, "schema_mismatch", "/data/amount", "minimum"), answer

    status, refused = call("POST", f"{base}/v1/admin/destinations",
                           {"name": "billing", "url": url, "secret": secret,
                            "event_types": ["invoices.*"]})
    assert (status, refused["error"], refused["nearest"]) == (422, "unknown_event_type",
                                                               "invoice.paid")
    status, _ = call("POST", f"{base}/v1/admin/destinations",
                     {"name": "billing", "url": url, "secret": secret,
                      "event_types": ["invoice.*"]})
    assert status == 201
    status, accepted = _publish(base, "good", {"amount": 5})
    assert status == 202
    # Nothing of the rejected event was stored: its id is free.
    status, _ = call("GET", f"{base}/v1/admin/events/{rejected_id}")
    assert status == 404

    status, minted = call("POST", f"{base}/v1/admin/tenants/_default/tokens", {})
    assert status == 201, minted
    status, listed = call("GET", f"{base}/v1/tenant/event-types", token=minted["token"])
    assert status == 200 and listed["event_types"] == ["invoice.paid"]
    return str(accepted["message_id"])

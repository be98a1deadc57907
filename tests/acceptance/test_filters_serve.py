"""Payload filters and test deliveries against a running `hookline serve` (OS processes, a
receiver on 127.0.0.1 verifying every signature), on SQLite and PostgreSQL: a destination's
filter set through the admin API turns events away at fan-out (no job, counted as filtered
in /metrics and the destination's figures), a tenant's filter reads the tenant's metadata,
filter-test shows which stored events a filter would match, and a test delivery (admin API,
tenant API, CLI) answers with its first attempt's outcome, or with the job's state when the
attempt cannot finish in time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from procs import AUTH, get_json, log_records, run_cli, start_cli, stop

from hookline.rehearsal.harness import free_port
from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.signing import generate_secret


async def _call(session: aiohttp.ClientSession, method: str, url: str,
                body: Any = None, token: str | None = None) -> tuple[int, Any]:
    headers = {"authorization": f"Bearer {token}"} if token else AUTH
    async with session.request(method, url, json=body, headers=headers) as resp:
        return resp.status, await resp.json(content_type=None)


async def _until(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_filters_and_test_deliveries_on_a_running_service(store_url: str,
                                                                tmp_path: Path) -> None:
    secret = generate_secret()
    endpoints = [Endpoint("all", secret), Endpoint("big", secret), Endpoint("eu", secret),
                 Endpoint("broken", secret, parse_behaviour("status:503"))]
    async with Receiver(endpoints) as receiver, aiohttp.ClientSession() as http:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "serve.log"
        service = start_cli(["--db", store_url, "serve", "--workers", "1", "--listen",
                             f"127.0.0.1:{port}"], log)
        try:
            await _until(lambda: len(log_records(log, "worker_started")) == 1
                         and get_json(f"{base}/healthz")[0] == 200, "the service")
            await _operate(http, base, receiver, secret, store_url)
        finally:
            code = await asyncio.to_thread(stop, service)
    assert code == 0
    assert all(r.verified for r in receiver.requests)


async def _operate(http: aiohttp.ClientSession, base: str, receiver: Receiver, secret: str,
                   db: str) -> None:
    admin = f"{base}/v1/admin"

    async def add(name: str, **fields: Any) -> dict[str, Any]:
        status, dest = await _call(http, "POST", f"{admin}/destinations",
                                   {"name": name, "url": receiver.url(name), "secret": secret,
                                    **fields})
        assert status == 201, dest
        return dict(dest)

    await add("all")
    big = await add("big", filter={"data": {"amount": {"$gte": 1000}}})
    assert big["filter"] == {"data": {"amount": {"$gte": 1000}}}
    for n, amount in enumerate((5, 5000, 7)):
        status, answer = await _call(http, "POST", f"{base}/v1/events",
                                     {"id": f"e{n}", "type": "invoice.paid",
                                      "data": {"amount": amount}})
        assert status == 202, answer
        assert answer["jobs"] == (2 if amount >= 1000 else 1)  # no job: filtered
    await _until(lambda: len(receiver.requests) == 4, "4 deliveries")
    assert sorted(r.endpoint for r in receiver.requests) == ["all", "all", "all", "big"]

    status, page = await _call(http, "GET", f"{admin}/metrics/destinations")
    assert {d["name"]: d["filtered"] for d in page["destinations"]} == {"all": 0, "big": 2}
    async with http.get(f"{base}/metrics", headers=AUTH) as resp:
        scraped = await resp.text()
    assert 'hookline_events_filtered_total{destination="big"} 2.0' in scraped

    # The dry run: a new filter over the stored events, then the destination's own.
    status, tried = await _call(http, "POST", f"{admin}/destinations/big/filter-test",
                                {"filter": {"data.amount": {"$lt": 10}}, "last": 10})
    assert status == 200, tried
    assert [(e["event_id"], e["matched"]) for e in tried["events"]] == [
        (3, True), (2, False), (1, True)]
    assert (tried["matched"], tried["filtered"]) == (2, 1)
    status, own = await _call(http, "POST", f"{admin}/destinations/big/filter-test", {})
    assert own["filter"] == big["filter"] and own["matched"] == 1
    status, bad = await _call(http, "PATCH", f"{admin}/destinations/big",
                              {"filter": {"data.amount": {"$between": [1, 2]}}})
    assert (status, bad["field"]) == (400, "filter") and "'$between' at data.amount" in \
        bad["detail"]

    # A test delivery through the normal path: signed, answered with the outcome.
    status, tested = await _call(http, "POST", f"{admin}/destinations/big/test", {})
    assert status == 200, tested
    assert tested["type"] == "hookline.ping" and tested["job_status"] == "done"
    assert tested["attempt"]["outcome"] == "delivered"
    assert tested["attempt"]["status_code"] == 200 and tested["attempt"]["duration_s"] >= 0
    assert receiver.requests[-1].endpoint == "big" and receiver.requests[-1].verified
    await add("broken")
    status, failed = await _call(http, "POST", f"{admin}/destinations/broken/test",
                                 {"type": "invoice.paid"})
    assert status == 200, failed
    assert (failed["attempt"]["outcome"], failed["attempt"]["status_code"]) == ("http_5xx", 503)
    await add("slow", timeout_s=0.5)  # paused: its job waits, the answer is the job's state
    assert (await _call(http, "POST", f"{admin}/destinations/slow/pause", {}))[0] == 200
    status, waiting = await _call(http, "POST", f"{admin}/destinations/slow/test", {})
    assert status == 202 and waiting["attempt"] is None, waiting
    assert (waiting["job_status"], waiting["waited_s"]) == ("pending", 0.0)  # at once

    # A tenant's filter on its metadata; the tenant API's test delivery and filter-test.
    status, _ = await _call(http, "PUT", f"{admin}/tenants/acme",
                            {"metadata": {"region": "eu"}})
    assert status in (200, 201)
    status, minted = await _call(http, "POST", f"{admin}/tenants/acme/tokens", {})
    token = minted["token"]
    on_metadata = {"tenant.metadata.region": "eu", "type": {"$startsWith": "order."}}
    status, refused = await _call(http, "POST", f"{base}/v1/tenant/destinations",
                                  {"name": "eu", "url": receiver.url("eu"), "secret": secret,
                                   "filter": on_metadata}, token=token)
    assert (status, refused["field"]) == (400, "filter")  # the metadata is the operator's
    status, eu = await _call(http, "POST", f"{base}/v1/tenant/destinations",
                             {"name": "eu", "url": receiver.url("eu"), "secret": secret,
                              "filter": {"type": {"$startsWith": "order."}}}, token=token)
    assert status == 201, eu
    status, eu = await _call(http, "PATCH", f"{admin}/destinations/eu?tenant=acme",
                             {"filter": on_metadata})  # the operator's filter may test it
    assert status == 200, eu
    for n, event_type in enumerate(("order.created", "invoice.paid")):
        status, answer = await _call(http, "POST", f"{base}/v1/events",
                                     {"id": f"a{n}", "type": event_type, "tenant": "acme",
                                      "data": {}})
        assert answer["jobs"] == (1 if event_type.startswith("order.") else 0)
    await _until(lambda: any(r.endpoint == "eu" for r in receiver.requests), "acme's delivery")
    status, tried = await _call(http, "POST", f"{base}/v1/tenant/destinations/eu/filter-test",
                                {}, token=token)
    assert [e["matched"] for e in tried["events"]] == [False, True], tried
    status, queued = await _call(http, "POST",
                                 f"{base}/v1/tenant/destinations/eu/test?wait=false", {},
                                 token=token)
    assert status == 202 and "attempt" not in queued
    status, tested = await _call(http, "POST", f"{base}/v1/tenant/destinations/eu/test", {},
                                 token=token)
    assert (status, tested["attempt"]["outcome"]) == (200, "delivered"), tested

    # The CLI's test delivery, through the same store the service reads.
    done = await asyncio.to_thread(run_cli, "--db", db, "destinations", "test", "all", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["attempt"]["status_code"] == 200

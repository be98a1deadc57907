"""`hookline demo`: the whole path end to end on real GitHub payloads, checked.

Starts the receiver fixture (four endpoints that verify signatures and dedupe by
`webhook-id`), registers them as destinations with max_in_flight=1 and different
subscriptions, runs `hookline serve` with N workers as a real process tree, posts every
payload example (plus some repeats, to show ingest dedupe), waits until every job is done or
dead, stops the service with SIGTERM and writes jobs.csv, attempts.csv, receipts.json and
summary.json. One endpoint ("lossy") closes the connection after reading the first request
for each event, before answering: delivery is at least once, and the receiver's dedupe by
`webhook-id` keeps that to one effect per event.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hookline.rehearsal.demo_report import describe
from hookline.rehearsal.github_samples import Sample, as_event_body, load_samples
from hookline.rehearsal.harness import Service, post_events, wait_settled, write_csv
from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.logs import configure_logging
from hookline.shared.signing import generate_secret
from hookline.shared.store import open_store

DEADLINE_S = 50.0


@dataclass(frozen=True, slots=True)
class DemoEndpoint:
    """A destination of the demo: its behaviour at the receiver and its subscriptions."""

    name: str
    behaviour: str
    event_types: tuple[str, ...]
    simulates: str
    """What the endpoint does, in words, for the demo's closing report."""


ENDPOINTS = (
    DemoEndpoint("archive", "ok", ("*",),
                 "takes every event and answers 200 at once: a healthy receiver"),
    DemoEndpoint("ci", "ok", ("check_run.*", "check_suite.*", "workflow_run.*",
                              "workflow_job.*", "status", "push"),
                 "takes only CI events (checks, workflows, statuses, pushes) and answers 200: "
                 "subscriptions decide who gets what"),
    DemoEndpoint("lossy", "drop_first", ("*",),
                 "takes every event, but closes the connection after reading the first "
                 "request for each one, without answering: a response lost on the way back, "
                 "so hookline retries and the receiver dedupes by webhook-id"),
    DemoEndpoint("triage", "fail:1", ("issues.*", "issue_comment.*", "pull_request.*",
                                      "pull_request_review.*"),
                 "takes issue and pull-request events and answers 500 to the first request "
                 "for each one, then 200: a receiver having a bad moment, retried with backoff"),
)

# Fast retries for a demo that ends in seconds: a config choice, not a code path.
DEMO_SETTINGS = {"HOOKLINE_RETRY_BASE_S": "0.2", "HOOKLINE_RETRY_CAP_S": "1.0",
                 "HOOKLINE_MAX_ATTEMPTS": "8", "HOOKLINE_LEASE_S": "10",
                 "HOOKLINE_ATTEMPT_TIMEOUT_S": "5", "HOOKLINE_GRACEFUL_TIMEOUT_S": "5"}


async def demo(out_dir: Path, workers: int, samples: list[Sample]) -> dict[str, Any]:
    """Run the demo with `samples` (the payload examples); returns the summary (see module
    docstring)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()  # the service runs in the checkout, not in our folder
    db = out_dir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    secrets = {e.name: generate_secret() for e in ENDPOINTS}
    receiver = Receiver([Endpoint(e.name, secrets[e.name], parse_behaviour(e.behaviour))
                         for e in ENDPOINTS], requests_log=out_dir / "receiver.jsonl")
    await receiver.start()
    store = open_store(str(db))
    await store.open()
    (out_dir / "service.log").unlink(missing_ok=True)
    service = Service(db, out_dir / "service.log", workers=workers, settings=DEMO_SETTINGS)
    exit_code: int | None = None
    started = time.monotonic()
    try:
        for e in ENDPOINTS:
            await store.add_destination(name=e.name, url=receiver.url(e.name),
                                        secret=secrets[e.name], event_types=e.event_types,
                                        max_in_flight=1)
        await service.start()
        base_url = service.base_url
        bodies = [as_event_body(s) for s in samples]
        statuses = await post_events(base_url, bodies + bodies[:25])  # 25 repeats
        counts = await wait_settled(store, DEADLINE_S)
        jobs = [_row(j) for j in await store.list_jobs(limit=1_000_000)]
        attempts = [_row(a) for a in await store.list_attempts(limit=1_000_000)]
    finally:
        exit_code = service.stop()
        await store.close()
        await receiver.stop()
    elapsed_s = time.monotonic() - started
    write_csv(out_dir / "jobs.csv", jobs)
    write_csv(out_dir / "attempts.csv", attempts)
    (out_dir / "receipts.json").write_text(json.dumps(receiver.receipts(), indent=1))
    summary = _summarise(len(samples), statuses, counts, jobs, attempts, receiver, elapsed_s,
                         exit_code)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _row(record: Any) -> dict[str, Any]:
    return asdict(record) if hasattr(record, "__dataclass_fields__") else dict(record)


def _summarise(events: int, statuses: Counter[int], counts: dict[str, int],
               jobs: list[dict[str, Any]], attempts: list[dict[str, Any]],
               receiver: Receiver, elapsed_s: float, exit_code: int | None) -> dict[str, Any]:
    receiver_summary = receiver.summary()
    effects = Counter((e.endpoint, e.webhook_id) for e in receiver.effects)
    done_pairs = {(j["destination"], j["message_id"]) for j in jobs if j["status"] == "done"}
    attempts_per_job = Counter(a["job_id"] for a in attempts)
    lossy_jobs = [j for j in jobs if j["destination"] == "lossy"]
    per_destination = {name: {"jobs": 0, "attempts": 0} for name in receiver_summary["endpoints"]}
    for job in jobs:
        mine = per_destination.setdefault(job["destination"], {"jobs": 0, "attempts": 0})
        mine["jobs"] += 1
        mine["attempts"] += attempts_per_job[job["id"]]
    retried = sorted(j["id"] for j in jobs if attempts_per_job[j["id"]] > 1)
    checks = {
        "every_job_done_or_dead": counts["pending"] == 0 and counts["running"] == 0,
        "one_effect_per_done_job": all(effects[p] == 1 for p in done_pairs)
        and set(effects) == done_pairs,
        "lossy_endpoint_retried": bool(lossy_jobs)
        and all(attempts_per_job[j["id"]] > 1 for j in lossy_jobs),
        "never_two_concurrent_requests": all(
            s["max_concurrent"] <= 1 for s in receiver_summary["endpoints"].values()),
        "requests_equal_attempts": receiver_summary["totals"]["requests"] == len(attempts),
        "service_stopped_cleanly": exit_code == 0,
    }
    return {
        "events_posted": events, "ingest_statuses": {str(k): v for k, v in statuses.items()},
        "jobs": len(jobs), "jobs_by_status": counts, "attempts": len(attempts),
        "receiver_effects": len(receiver.effects),
        "duplicates_suppressed_by_receiver": receiver_summary["totals"]["duplicates"],
        "max_concurrent_per_endpoint": {n: s["max_concurrent"] for n, s
                                        in receiver_summary["endpoints"].items()},
        "receiver": receiver_summary["endpoints"], "elapsed_s": round(elapsed_s, 2),
        "jobs_and_attempts_by_destination": per_destination,
        "example_retried_job": retried[0] if retried else None,
        "checks": checks, "ok": all(checks.values()),
    }


def run(out_dir: str = "results", workers: int = 3, data: str | None = None) -> int:
    """Run the demo and print its summary.

    Args:
        out_dir: folder for the result files.
        workers: worker processes of the service.
        data: folder of the GitHub payload examples; None: the checkout's
            `rehearsal/data/github/`.

    Returns:
        0 when every check holds, else 1.

    Raises:
        DemoDataMissing: no examples in `data` (checked before anything starts).
    """
    samples = load_samples(None if data is None else Path(data))
    # The receiver's per-request lines would bury the summary; the service logs to a file.
    configure_logging("demo", "warning", stream=sys.stderr)
    summary = asyncio.run(demo(Path(out_dir), workers, samples))
    print("\n".join(describe(summary, ENDPOINTS, out_dir)))
    return 0 if summary["ok"] else 1

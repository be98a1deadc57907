"""The figures /metrics reads (metric_counts, kept by each write transaction in one statement)
equal what the rows say after random sequences of every operation that changes jobs,
attempts or events, on both backends: ingest, claim (with takeovers after lost leases, and
deaths at the attempt cap), finish (done, retry, dead, in batches), hand-back, replay,
resend, retry now, pause, destination removal and retention purge. The gauges are compared
with a recount from the rows by plain SQL, and with what the store's own repair path
(`recount_metrics`) writes; the counters (finished attempts, deliveries) with a model that
remembers what retention deleted."""

from __future__ import annotations

import random
from typing import Any

import pytest

from hookline.shared.models import AttemptResult, Claim, Dead, Done, Retry
from hookline.shared.operator_models import JobSelection
from hookline.shared.report_models import DestinationFigures
from hookline.shared.store.metric_deltas import outcome_class
from tests.conftest import new_event, query_db

LEASE_S = 30.0
MAX_ATTEMPTS = 3
STEPS = 50


class Truth:
    """What the rows say, with what retention deleted remembered (counters never drop)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.finished: dict[int, tuple[str, str]] = {}  # attempt id -> (destination, outcome)
        self.done: set[int] = set()  # jobs done at the last look
        self.ever_done: set[int] = set()  # jobs done at any look
        self.deliveries: dict[str, list[float]] = {}  # destination -> latencies

    async def look(self) -> dict[str, Any]:
        """Read the rows; remember new deliveries and finished attempts."""
        jobs = await query_db(self.url, """
            SELECT j.id, j.status, j.run_at, j.finished_at, j.replays, e.received_at, d.name,
                   d.deleted_at FROM jobs j JOIN destinations d ON d.id = j.destination_id
            JOIN events e ON e.id = j.event_id""")
        for j in jobs:
            # The histogram observes each job's first delivery only: a replayed dead
            # letter's too, not a resent job's again.
            if j["status"] == "done" and j["id"] not in self.ever_done:
                self.deliveries.setdefault(j["name"], []).append(
                    j["finished_at"] - j["received_at"])
        self.done = {j["id"] for j in jobs if j["status"] == "done"}
        self.ever_done |= self.done
        in_flight: dict[str, int] = {}
        for a in await query_db(self.url, """
                SELECT a.id, a.error, a.status_code, d.name FROM attempts a
                JOIN jobs j ON j.id = a.job_id JOIN destinations d ON d.id = j.destination_id"""):
            outcome = outcome_class(a["error"], a["status_code"])
            if outcome == "in_flight":
                in_flight[a["name"]] = in_flight.get(a["name"], 0) + 1
            else:
                self.finished[a["id"]] = (a["name"], outcome)
        events = (await query_db(self.url, "SELECT count(*) AS n FROM events"))[0]["n"]
        return {"jobs": jobs, "in_flight": in_flight, "events": events}


def _expected(name: str, seen: dict[str, Any], truth: Truth, now: float) -> dict[str, Any]:
    mine = [j for j in seen["jobs"] if j["name"] == name]
    jobs: dict[str, int] = {}
    for j in mine:
        jobs[j["status"]] = jobs.get(j["status"], 0) + 1
    due = [j["run_at"] for j in mine if j["status"] == "pending" and j["run_at"] <= now]
    finished: dict[str, int] = {}
    for dest, outcome in truth.finished.values():
        if dest == name:
            finished[outcome] = finished.get(outcome, 0) + 1
    return {"jobs": jobs, "attempts": finished, "in_flight": seen["in_flight"].get(name, 0),
            "oldest": None if not due else now - min(due)}


def _check_one(d: DestinationFigures, seen: dict[str, Any], truth: Truth, now: float) -> None:
    want = _expected(d.name, seen, truth, now)
    assert (d.jobs, d.attempts, d.in_flight) == (
        want["jobs"], want["attempts"], want["in_flight"]), d.name
    assert d.oldest_due_age_s == (None if want["oldest"] is None
                                  else pytest.approx(want["oldest"])), d.name
    latencies = truth.deliveries.get(d.name, [])
    if not latencies:
        assert d.latency is None, d.name
        return
    assert d.latency is not None and d.latency.count == len(latencies), d.name
    assert d.latency.sum_s == pytest.approx(sum(latencies)), d.name
    for bound, n in d.latency.buckets:
        assert n == sum(1 for lat in latencies if lat <= bound), (d.name, bound)


async def _check(store: Any, truth: Truth, now: float) -> None:
    seen = await truth.look()
    page, _ = await store.destination_figures(after_id=0, limit=1000)
    live = {j["name"] for j in seen["jobs"] if j["deleted_at"] is None}
    assert live <= {d.name for d in page}
    for d in page:
        _check_one(d, seen, truth, now)
    # A scrape capped at one destination: it plus `_other` add up to everything stored.
    capped = await store.metric_figures(1)
    assert capped.events == seen["events"]
    assert capped.in_flight == sum(seen["in_flight"].values())
    parts = [*capped.destinations, *([capped.other] if capped.other else [])]
    totals: dict[str, int] = {}
    for d in parts:
        for status, n in d.jobs.items():
            totals[status] = totals.get(status, 0) + n
    by_status: dict[str, int] = {}
    for j in seen["jobs"]:
        by_status[j["status"]] = by_status.get(j["status"], 0) + 1
    assert {k: n for k, n in totals.items() if n} == by_status
    delivered = sum(d.latency.count for d in parts if d.latency is not None)
    assert delivered == sum(len(v) for v in truth.deliveries.values())
    stats = await store.stats()
    assert stats.events == seen["events"]
    assert {k: n for k, n in stats.jobs_by_status.items() if n} == by_status


def _result(kind: str, now: float) -> tuple[Any, AttemptResult]:
    if kind == "done":
        return Done(), AttemptResult(started_at=now, duration_s=0.01, status_code=200)
    if kind == "retry":
        return (Retry(delay_s=5.0, error="HTTP 503"),
                AttemptResult(started_at=now, duration_s=0.01, status_code=503))
    if kind == "transport":
        return (Retry(delay_s=1.0, error="ClientConnectorError"),
                AttemptResult(started_at=now, duration_s=0.01, error="ClientConnectorError"))
    return Dead(error="HTTP 410"), AttemptResult(started_at=now, duration_s=0.01,
                                                  status_code=410)


async def _step(store: Any, rng: random.Random, clock: Any, names: list[str],
                held: list[Claim], serial: list[int]) -> list[Claim]:
    """One random operation; returns the claims still held."""
    step = rng.choice(["ingest", "ingest", "claim", "claim", "finish", "finish", "finish_one",
                       "hand_back", "expire", "replay", "resend", "retry_now", "pause",
                       "purge", "remove"])
    if step == "ingest":
        n = rng.randint(1, 4)
        await store.add_events([new_event(f"e{serial[0] + i}") for i in range(n)])
        serial[0] += n
    elif step == "claim":
        held = held + await store.claim(f"w{rng.randint(1, 2)}", rng.randint(1, 5), LEASE_S,
                                        MAX_ATTEMPTS)
    elif step in ("finish", "finish_one") and held:
        rng.shuffle(held)
        cut = 1 if step == "finish_one" else rng.randint(1, len(held))
        batch, held = held[:cut], held[cut:]
        kinds = ["done"] if rng.random() < 0.3 else ["done", "retry", "transport", "dead"]
        await store.finish([(c, *_result(rng.choice(kinds), clock())) for c in batch])
    elif step == "hand_back" and held:
        await store.hand_back([held.pop()])
    elif step == "expire":
        clock.advance(LEASE_S + 1.0)  # every lease held lapses: a claim takes over
        if rng.random() < 0.5:
            held = []  # the worker is gone; otherwise its late results still come in
    elif step == "replay":
        await store.replay(all_dead=True)
    elif step == "resend":
        await store.resend(JobSelection(destination=rng.choice(names)))
    elif step == "retry_now":
        await store.retry_now(JobSelection(destination=rng.choice(names)))
    elif step == "pause":
        await store.set_paused(rng.choice(names), rng.random() < 0.5, "test")
    elif step == "purge":
        cutoff = clock() - rng.uniform(0.0, 20.0)
        await store.purge(bodies_before_s=cutoff, metadata_before_s=cutoff,
                          dedupe_before_s=cutoff)
    elif step == "remove" and len(names) > 1:
        await store.remove_destination(names.pop())
    return held


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_maintained_figures_equal_the_rows_after_random_operations(
        store, store_url, clock, destination_factory, seed):
    """After each random operation the figures equal a count of the rows (and the model of
    what retention deleted); at the end the repair path changes nothing."""
    rng = random.Random(seed)
    names = ["a", "b", "c"]
    for name in names:
        await destination_factory(name)
    truth = Truth(store_url)
    held: list[Claim] = []
    serial = [0]
    for _ in range(STEPS):
        held = await _step(store, rng, clock, names, held, serial)
        clock.advance(rng.uniform(0.0, 3.0))
        await _check(store, truth, clock())
    before, _ = await store.destination_figures(after_id=0, limit=1000)
    await store.recount_metrics()
    after, _ = await store.destination_figures(after_id=0, limit=1000)
    assert after == before


async def test_the_repair_path_fixes_drifted_gauges(store, store_url, clock,
                                                   destination_factory):
    """Counts that drifted (here: written over by hand) are put right by recount_metrics."""
    await destination_factory("a")
    await store.add_events([new_event(f"e{i}") for i in range(3)])
    await store.claim("w", 1, LEASE_S, MAX_ATTEMPTS)
    [good], _ = await store.destination_figures()
    from tests.conftest import execute_db

    await store.fold_metric_deltas()
    await execute_db(store_url, "UPDATE metric_counts SET n = n + 7 WHERE family = 'jobs'")
    [bad], _ = await store.destination_figures()
    assert bad.jobs != good.jobs
    await store.recount_metrics()
    [fixed], _ = await store.destination_figures()
    assert fixed == good == DestinationFigures(
        name="a", jobs={"pending": 2, "running": 1}, in_flight=1,
        oldest_due_age_s=fixed.oldest_due_age_s)


async def test_the_scrape_shows_the_destinations_that_matter_first(store, clock):
    """The database ranks the destinations a capped scrape shows: paused,
    then the longest failure run, then the longest-waiting due job, then the largest backlog,
    then the name; the rest fold into `_other` with their state summed up."""
    for name, types in (("a-quiet", ["none"]), ("b-paused", ["none"]), ("c-failing", ["f"]),
                        ("d-backlog", ["d"]), ("e-waiting", ["w"])):
        await store.add_destination(name=name, url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "A" * 32, event_types=types,
                                    max_in_flight=5)
    await store.set_paused("b-paused", True, reason="operator")
    await store.add_event(new_event("f1", "f"))
    [failing] = await store.claim("w", 10, lease_s=30, max_attempts=5)
    await store.finish([(failing, Retry(delay_s=3600, error="HTTP 500"),
                         AttemptResult(started_at=clock(), duration_s=0.01, status_code=500))])
    await store.add_event(new_event("w1", "w"))  # e's job waits longest
    clock.advance(5)
    await store.add_events([new_event(f"d{i}", "d") for i in range(3)])  # d: most pending
    clock.advance(1)
    figures = await store.metric_figures(series_max=3)
    assert sorted(f.name for f in figures.destinations) == [
        "b-paused", "c-failing", "e-waiting"]
    assert figures.other is not None and figures.other.folded == 2
    assert figures.other.paused is False and figures.other.failure_streak == 0
    assert figures.oldest_due_age_s is not None and figures.oldest_due_age_s >= 6
    assert figures.other.oldest_due_age_s == 1  # d's, the oldest due of the folded
    fewer = await store.metric_figures(series_max=1)
    assert [f.name for f in fewer.destinations] == ["b-paused"]
    assert fewer.other is not None and fewer.other.failure_streak == 1

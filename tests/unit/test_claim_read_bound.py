"""The claim's bounded first read chooses exactly what reading every offer would.

A claim reads each destination's pending jobs only up to a few more than an even share of
its limit (shared/store/claim_tx.py: _pending_bound), chooses, and reads in full the
destinations whose unread jobs could change the choice (shared/policy/delivery.py:
unsettled_by_more), until none could. These properties model the store's read (pending jobs
oldest first up to the bound, expired leases up to the offer, each destination's candidates
kept to its offer) and compare the final choice with the choice over the full read, under
tenants' turns, late retries, rate limits and the per-tenant share, with many equal due
times (a group commit gives one batch's jobs one run_at).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from hookline.shared.models import AttemptResult, Retry
from hookline.shared.policy.delivery import choose_claims, unsettled_by_more
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store, claim_tx
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields
from tests.conftest import FakeClock, new_event
from tests.pg import fresh_database

Job = tuple[float, int, int, str]  # due since, job id, attempts made, status


def _pending(jobs: list[Job], heap_order: dict[int, int] | None) -> list[Job]:
    """A destination's pending jobs in the order its index gives them: oldest due first,
    equal due times in id order (SQLite: None) or in any order (PostgreSQL's jobs_due does
    not order them by id)."""
    return sorted((j for j in jobs if j[3] == "pending"),
                  key=lambda j: (j[0], j[1] if heap_order is None else heap_order[j[1]]))


def _read(jobs: list[Job], offer: int, pending_limit: int, most: int,
          heap_order: dict[int, int] | None) -> list[Job]:
    """What due_jobs and _read_due keep of one destination: its pending jobs oldest first
    up to `pending_limit` (on PostgreSQL also up to its offer), its expired leases up to
    `most`, then the oldest `offer` of both."""
    if heap_order is not None:
        pending_limit = min(pending_limit, offer)
    pending = _pending(jobs, heap_order)[:pending_limit]
    running = sorted(j for j in jobs if j[3] == "running")[:most]
    return sorted(pending + running)[:offer]


def _choose(read: dict[int, list[Job]], tenant_of: dict[int, str], *, limit: int,
            late_after: int, max_late: int, rates: dict[int, tuple[float, float]],
            per_tenant: int | None) -> tuple[list[int], list[tuple[bool, float, int, int]]]:
    candidates = [(attempts >= late_after, due_at, job_id, destination_id)
                  for destination_id, jobs in read.items()
                  for due_at, job_id, attempts, _ in jobs]
    chosen, _ = choose_claims(candidates, limit=limit, max_late=max_late, rates=rates,
                              now_s=100.0, tenants=tenant_of, per_tenant=per_tenant)
    return chosen, candidates


def _last_read(read: list[Job], heap_order: dict[int, int] | None
               ) -> tuple[float, int | None]:
    """read_short's entry: the last job read, its id only where ties are read in id order."""
    due_at, job_id, _, _ = read[-1]
    return due_at, job_id if heap_order is None else None


# The strategies drawn once per job or per destination, built once: the same examples, a
# third less time drawing them (drawing is nearly all of the property's cost).
_JOBS_PER_DESTINATION = st.integers(0, 12)
_DUE_AT = st.integers(0, 6)  # few values: many ties
_STATUS = st.sampled_from(["pending"] * 5 + ["running"])
_ATTEMPTS = st.integers(0, 4)
_OFFER = st.integers(1, 16)
_RATE = st.sampled_from([0.5, 1.0, 3.0])
_RATE_SINCE = st.integers(99, 103)


@st.composite
def _claims(draw: st.DrawFn) -> dict[str, Any]:
    destinations = draw(st.integers(1, 24))
    tenants = draw(st.integers(1, 6))
    next_id = 1
    jobs: dict[int, list[Job]] = {}
    for destination_id in range(1, destinations + 1):
        jobs[destination_id] = []
        for _ in range(draw(_JOBS_PER_DESTINATION)):
            due_at = float(draw(_DUE_AT))
            status = draw(_STATUS)
            jobs[destination_id].append((due_at, next_id, draw(_ATTEMPTS), status))
            next_id += 1
    ids = list(range(1, next_id))
    tenant = st.integers(0, tenants - 1)
    return {
        "jobs": jobs,
        "heap_order": dict(zip(ids, draw(st.permutations(ids)), strict=True)),
        "tenant_of": {d: f"t{draw(tenant)}" for d in jobs},
        "offers": {d: draw(_OFFER) for d in jobs},
        "limit": draw(st.integers(1, 24)),
        "bound": draw(st.integers(1, 6)),
        "late_after": draw(st.integers(1, 5)),
        "max_late": draw(st.integers(0, 4)),
        "rates": {d: (draw(_RATE), float(draw(_RATE_SINCE)))
                  for d in jobs if draw(st.booleans())},
        "per_tenant": draw(st.none() | st.integers(1, 8)),
    }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(max_examples=400, deadline=None)
@given(claim=_claims())
def test_the_bounded_read_chooses_what_the_full_read_chooses(backend: str, claim: dict[str, Any]
                                                             ) -> None:
    jobs, offers = claim["jobs"], claim["offers"]
    most = max(offers.values())
    options = {k: claim[k] for k in ("limit", "late_after", "max_late", "rates", "per_tenant")}
    heap = claim["heap_order"] if backend == "postgres" else None
    full = {d: _read(jobs[d], offers[d], most, most, heap) for d in jobs}
    expected, _ = _choose(full, claim["tenant_of"], **options)

    bound = min(claim["bound"], most)  # as _read_due caps it
    read = {d: _read(jobs[d], offers[d], bound, most, heap) for d in jobs}
    # read short: the pending read stopped at the bound below the offer
    short = {d: _last_read(_pending(jobs[d], heap)[:bound], heap)
             for d in jobs
             if bound < offers[d] and sum(j[3] == "pending" for j in jobs[d]) >= bound}
    reads = 0
    while True:
        chosen, candidates = _choose(read, claim["tenant_of"], **options)
        more = unsettled_by_more(candidates, chosen, limit=claim["limit"], read_short=short,
                                 tenants=claim["tenant_of"])
        if not more:
            break
        reads += 1
        for d in more:
            read[d] = full[d]
            del short[d]
    note(repr((claim, read, short)))
    assert chosen == expected
    assert reads <= 1 + len(jobs)


def test_a_destination_that_won_every_job_it_offered_is_read_again() -> None:
    """Two destinations of two tenants, limit 4, each read 2 of its 5 pending jobs: tenant
    turns give each 2, all that was read, so both could have won more."""
    candidates = [(False, float(t), job_id, d) for d, ids in ((1, (1, 2)), (2, (3, 4)))
                  for t, job_id in enumerate(ids)]
    chosen, _ = choose_claims(candidates, limit=4, max_late=None, rates={}, now_s=0.0,
                              tenants={1: "a", 2: "b"})
    assert unsettled_by_more(candidates, chosen, limit=4,
                             read_short={1: (1.0, 2), 2: (1.0, 4)},
                             tenants={1: "a", 2: "b"}) == {1, 2}


def test_a_destination_left_with_an_older_job_after_the_cut_is_settled() -> None:
    """Limit 2 over four destinations read 3 jobs each (due 0, 1, 2): each one's first turn
    goes to destinations 1 and 2, and every destination keeps a job due before its last read
    after the cut, so no unread job could be chosen."""
    candidates = [(False, float(t), 10 * d + t, d) for d in (1, 2, 3, 4) for t in range(3)]
    chosen, _ = choose_claims(candidates, limit=2, max_late=None, rates={}, now_s=0.0)
    assert chosen == [10, 20]
    assert unsettled_by_more(candidates, chosen, limit=2,
                             read_short={d: (2.0, None) for d in (1, 2, 3, 4)}) == set()
    # the same when the limit was not reached: anything unread might have been chosen
    assert unsettled_by_more(candidates, chosen, limit=20, read_short={3: (2.0, None)}) == {3}


def test_equal_due_times_settle_only_when_read_in_id_order() -> None:
    """Destination 2 read jobs 20 and 21, both due at 0, and won neither: an unread job due
    at 0 too sorts after 21 when ties are read in id order, but may have a lower id (and
    take a turn before the cut) when they are not."""
    candidates = [(False, 0.0, 10, 1), (False, 0.0, 20, 2), (False, 0.0, 21, 2)]
    chosen, _ = choose_claims(candidates, limit=1, max_late=None, rates={}, now_s=0.0)
    assert chosen == [10]
    assert unsettled_by_more(candidates, chosen, limit=1, read_short={2: (0.0, 21)}) == set()
    assert unsettled_by_more(candidates, chosen, limit=1, read_short={2: (0.0, None)}) == {2}


@pytest.fixture
def twin_urls(store_url: str, tmp_path: Path, request: pytest.FixtureRequest
              ) -> Iterator[tuple[str, str]]:
    """Two fresh databases of one backend (each backend in turn)."""
    if not store_url.startswith("postgresql://"):
        yield store_url, str(tmp_path / "twin.db")
        return
    with fresh_database(request.getfixturevalue("pg_server")) as twin:
        yield store_url, twin


def _open(url: str, clock: FakeClock) -> Store:
    if url.startswith("postgresql://"):
        from hookline.shared.store.postgres import PostgresStore

        return PostgresStore(url, clock=clock)
    return SqliteStore(url, clock=clock)


async def _claims_of_a_busy_window(url: str, full_read: bool) -> list[list[int]]:
    """Tenant `a` with one destination, `b` with 23, each destination with 7 pending jobs
    (5 due at instants of their own, 2 of one group commit), some of them retried; the job
    ids of 4 successive claims of 8 with the workers' caps, read with the bound (or,
    `full_read`, each destination's whole offer). Tenants take turns, so `a`'s destination
    wins 4 of a claim, more than its first read of 3: only the second read finds the 4th."""
    clock = FakeClock()
    store = _open(url, clock)
    await store.open()
    try:
        for tenant, destinations in (("a", 1), ("b", 23)):
            await store.put_tenant(tenant, TenantFields())
            for n in range(destinations):
                await store.add_destination(
                    name=f"d{n}", url="http://127.0.0.1:9/", secret=generate_secret(),
                    event_types=["*"], max_in_flight=16, tenant=tenant)
        for k in range(6):
            await store.add_events([new_event(f"{tenant}-{k}-{i}", tenant=tenant)
                                    for i in range(1 if k < 5 else 2) for tenant in "ab"])
            clock.advance(1)
        # a few retries: claimed, failed, due again (late retries past late_after=1)
        retried = await store.claim("w0", 6, lease_s=30, max_attempts=9)
        await store.finish([(claim, Retry(delay_s=1.0, error="HTTP 500"), AttemptResult(
            started_at=clock(), duration_s=0.01, status_code=500)) for claim in retried])
        clock.advance(5)
        bound = None if full_read else claim_tx._pending_bound
        with mock.patch.object(claim_tx, "_pending_bound",
                               bound or (lambda limit, offers: None)):
            return [[c.job_id for c in await store.claim(
                f"w{i}", 8, lease_s=30, max_attempts=9, late_after=1, max_late=2,
                per_destination=8, per_tenant=6)] for i in range(1, 5)]
    finally:
        await store.close()


async def test_a_real_store_claims_what_the_full_read_claims(twin_urls: tuple[str, str]
                                                             ) -> None:
    """On each backend, the same claims with the bounded first read and with every
    destination's whole offer read take the same jobs in the same order (the bound applies
    here: 24 destinations offer 8 each to a claim of 8, so each first read stops at 3)."""
    assert claim_tx._pending_bound(8, {d: 8 for d in range(24)}) == 3
    assert claim_tx._pending_bound(8, {d: 5 for d in range(24)}) is None  # 2 x 3 > 5
    bounded = await _claims_of_a_busy_window(twin_urls[0], full_read=False)
    full = await _claims_of_a_busy_window(twin_urls[1], full_read=True)
    assert bounded == full
    # `a` has 7 jobs: the third claim takes its last one, the fourth only `b`'s share
    assert [len(claim) for claim in bounded] == [8, 8, 7, 6]

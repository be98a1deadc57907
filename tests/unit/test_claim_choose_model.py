"""The claim's choice loop itself (ClaimOperations._choose: the bounded first read, then
reads in full) against an in-memory model of its two queries (`due_jobs` on either backend's
terms, `takeovers_among`), compared with the same code reading every offer in full.

Beyond tests/unit/test_claim_read_bound.py: expired leases among the candidates, takeovers
(with and without `may_take_over`, and the `waiting` flag), the per-destination and
per-tenant caps with what the worker holds, ordered destinations' heads. A pending job to be
taken over (a replay of a job whose worker was lost) is left out: one beyond a destination's
first read is found once it is read (docs/architecture.md), so there the two may differ.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from hookline.shared.models import ClaimRequest
from hookline.shared.store import claim_tx
from hookline.shared.store.ops import Finished, Query, advance

NOW = 100.0
Job = tuple[int, float, int, str]  # id, due since, attempts made, status


def drive(claim: dict[str, Any], backend: str, full: bool
          ) -> tuple[list[int], dict[int, float], bool]:
    """(chosen job ids, next_send, waiting) of one claim over the modelled jobs."""
    jobs, heap, takeovers = claim["jobs"], claim["heap"], claim["takeovers"]
    pg = backend == "postgres"

    def key(j: Job) -> tuple[float, int]:  # index order: equal due times by id on SQLite
        return (j[1], heap[j[0]] if pg else j[0])

    def answer(q: Query) -> list[dict[str, Any]]:
        if q.name == "due_jobs":
            out = []
            for d, most in q.params["offers"].rows:
                pend = sorted((j for j in jobs[d] if j[3] == "pending"), key=key)
                run = sorted((j for j in jobs[d] if j[3] == "running"), key=key)
                pl = min(most, q.params["pending_limit"]) if pg else q.params["pending_limit"]
                rl = min(most, q.params["limit"]) if pg else q.params["limit"]
                for j in pend[:pl] + run[:rl]:
                    out.append({"destination_id": d, "id": j[0], "due_at": j[1],
                                "attempts": j[2], "replays": 0, "status": j[3]})
            return out
        if q.name == "takeovers_among":
            return [{"job_id": i, "open_attempts": 1} for i in q.params["job_ids"]
                    if i in takeovers]
        raise AssertionError(q)

    ops = claim_tx.ClaimOperations()
    ops.DUE_TIES_IN_ID_ORDER = not pg
    due = {d: [h] for d, h in claim["ordered_heads"].items()}
    bound = (lambda limit, offers: None) if full else claim_tx._pending_bound
    reads = 0
    with mock.patch.object(claim_tx, "_pending_bound", bound):
        tx = ops._choose(claim["request"], due, claim["offers"], claim["tenant_of"],
                         rates=claim["rates"], now=NOW, per_tenant=claim["per_tenant"])
        step = advance(tx, None)
        while not isinstance(step, Finished):
            assert isinstance(step, Query)
            reads += step.name == "due_jobs"
            assert reads < 100, "loops"
            step = advance(tx, answer(step))
    chosen, next_send, waiting, _, _ = step.value
    return chosen, next_send, waiting


# The strategies drawn once per job or per destination, built once: the same examples, a
# third less time drawing them (drawing is nearly all of the property's cost).
_TENANT = [st.integers(0, n - 1) for n in range(1, 5)]  # by the number of tenants
_ONE_IN_8 = st.integers(0, 7)
_JOBS_PER_DESTINATION = st.integers(0, 14)
_STATUS = st.sampled_from(["pending"] * 4 + ["running"])
_DUE_SINCE = st.integers(0, 5)
_ATTEMPTS = st.integers(0, 4)
_HELD = st.integers(0, 3)
_HELD_BY_TENANT = st.integers(0, 4)
_FREE = st.integers(0, 16)
_ONE_IN_4 = st.integers(0, 3)
_RATE = st.sampled_from([0.5, 1.0, 3.0])
_RATE_SINCE = st.integers(99, 103)


@st.composite
def claims(draw: st.DrawFn) -> dict[str, Any]:
    """Up to 20 destinations of up to 4 tenants, some ordered, with up to 14 jobs each
    (pending, or running with an expired lease, some of those takeovers; due times of few
    values: many ties), caps, held slots, rate limits and the offers the claim computes."""
    n = draw(st.integers(1, 20))
    ntenants = draw(st.integers(1, 4))
    tenant_of = {d: f"t{draw(_TENANT[ntenants - 1])}" for d in range(1, n + 1)}
    next_id = 1
    jobs: dict[int, list[Job]] = {}
    takeovers: set[int] = set()  # expired leases whose worker was lost
    ordered = {d for d in range(1, n + 1) if draw(_ONE_IN_8) == 0}
    ordered_heads: dict[int, Job] = {}
    for d in range(1, n + 1):
        jobs[d] = []
        for _ in range(draw(_JOBS_PER_DESTINATION)):
            status = draw(_STATUS)
            j = (next_id, float(draw(_DUE_SINCE)), draw(_ATTEMPTS), status)
            if status == "running" and draw(st.booleans()):
                takeovers.add(next_id)
            jobs[d].append(j)
            next_id += 1
        if d in ordered and jobs[d]:
            ordered_heads[d] = min(jobs[d], key=lambda j: j[0])
    limit = draw(st.integers(1, 24))
    per_destination = draw(st.none() | st.integers(1, 8))
    held = {d: draw(_HELD) for d in range(1, n + 1) if draw(st.booleans())}
    per_tenant = draw(st.none() | st.integers(1, 10))
    held_tenants = {t: draw(_HELD_BY_TENANT) for t in set(tenant_of.values())
                    if draw(st.booleans())}
    request = ClaimRequest(worker="w", limit=limit, lease_s=30, max_attempts=9,
                           late_after=draw(st.none() | st.integers(1, 4)),
                           max_late=draw(st.none() | st.integers(0, 4)),
                           per_destination=per_destination, held=held,
                           may_take_over=draw(st.booleans()), per_tenant=per_tenant,
                           held_tenants=held_tenants)
    offers = {}
    for d in range(1, n + 1):
        if d in ordered:
            continue
        room = limit if per_destination is None else min(limit, per_destination - held.get(d, 0))
        if per_tenant is not None:
            room = min(room, per_tenant - held_tenants.get(tenant_of[d], 0))
        free = draw(_FREE)
        if free > 0 and room > 0:
            offers[d] = min(free, room)
    ids = list(range(1, next_id))
    return {
        "jobs": jobs, "takeovers": takeovers, "tenant_of": tenant_of,
        "heap": dict(zip(ids, draw(st.permutations(ids)), strict=True)),
        "ordered_heads": {d: h for d, h in ordered_heads.items()},
        "offers": offers, "request": request, "per_tenant": per_tenant,
        "rates": {d: (draw(_RATE), float(draw(_RATE_SINCE)))
                  for d in range(1, n + 1) if draw(_ONE_IN_4) == 0},
    }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(max_examples=400, deadline=None)
@given(claim=claims())
def test_the_choice_loop_claims_what_the_full_read_claims(backend: str,
                                                         claim: dict[str, Any]) -> None:
    note(repr(claim))
    assert drive(claim, backend, False) == drive(claim, backend, True)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_expired_lease_past_the_first_read_is_read_in_full(backend: str) -> None:
    """Destination 1 offers 4: pending jobs 1, 2, 3, 4, 6 and a lost worker's expired lease
    on job 5, all due at once. Its first read (3 pending) keeps job 5 among its 4 candidates,
    where the full read keeps 1 to 4; so without reading it in full the claim would report a
    takeover waiting (and its worker stop claiming to take it over) that the full read does
    not see. Every destination sends one request per claim (rate limits), so the claim's 6
    jobs are each destination's first."""
    jobs = {1: [(i, 0.0, 0, "running" if i == 5 else "pending") for i in range(1, 7)],
            **{d: [(8 + d, 0.0, 0, "pending")] for d in range(2, 7)}}
    ids = [j[0] for js in jobs.values() for j in js]
    offers = {1: 4, 2: 1, 3: 1, 4: 1, 5: 1, 6: 6}
    claim: dict[str, Any] = {"jobs": jobs, "takeovers": {5}, "tenant_of": {d: "t" for d in jobs},
             "heap": {i: i for i in ids}, "ordered_heads": {},
             "offers": offers,
             "request": ClaimRequest(worker="w", limit=6, lease_s=30, max_attempts=9,
                                     may_take_over=False),
             "per_tenant": None, "rates": {d: (0.5, 99.0) for d in jobs}}
    assert claim_tx._pending_bound(6, offers) == 3
    full = drive(claim, backend, True)
    assert full == ([1, 10, 11, 12, 13, 14], {d: 102.0 for d in jobs}, False)
    assert drive(claim, backend, False) == full

"""A claim advances each rate-limited destination's next send by the jobs it leased
(claim_tx._next_sends), not by those the choice chose: on PostgreSQL the lease may skip a
chosen job. When every chosen job is leased, the two must agree exactly, or the rate a
destination gets would depend on which path computed it."""

from __future__ import annotations

import random

from hookline.shared.models import ClaimRequest
from hookline.shared.policy.delivery import choose_with_takeovers
from hookline.shared.store.claim_tx import _next_sends

NOW_S = 100.0


def test_leasing_every_chosen_job_advances_as_the_choice_did():
    """800 drawn claims (fixed seed): takeovers, late retries and their reservation, the
    per-destination share, two tenants, destinations with and without a rate; leasing what
    was chosen gives the choice's own next sends, and never touches one without a rate."""
    draw = random.Random(7)
    advanced = 0
    for _ in range(800):
        destinations = list(range(1, draw.randint(2, 6)))
        rates = {d: (draw.choice([0.1, 0.5, 2.0, 7.0, 100.0]), draw.uniform(90.0, 110.0))
                 for d in destinations if draw.random() < 0.6}
        candidates = [(draw.random() < 0.2, draw.uniform(0.0, 100.0), job, draw.choice(
            destinations)) for job in range(1, draw.randint(2, 30))]
        takeovers = {c[2] for c in candidates if draw.random() < 0.1}
        request = ClaimRequest(worker="w", limit=draw.randint(1, 12), lease_s=30.0,
                               max_attempts=5, max_late=draw.choice([None, 1, 3]),
                               per_destination=draw.choice([None, 2, 5]),
                               may_take_over=draw.random() < 0.5)
        chosen, next_send, _ = choose_with_takeovers(
            candidates, takeovers, request, rates=rates, now_s=NOW_S,
            tenants={d: draw.choice("ab") for d in destinations})
        destination_of = {c[2]: c[3] for c in candidates}
        leased = [{"destination_id": destination_of[job]} for job in chosen]
        assert _next_sends(rates, leased, NOW_S) == next_send
        advanced += bool(next_send)
    assert advanced > 200  # the draw reaches rate-limited destinations often


def test_a_chosen_job_left_unleased_costs_its_destination_no_interval():
    """Two jobs chosen on a destination of 1 per second, one leased: its next send moves on
    by one interval from the stored value (or from now, when that is past), not two."""
    rates = {1: (1.0, 95.0), 2: (1.0, 105.0)}
    leased = [{"destination_id": 1}, {"destination_id": 2}, {"destination_id": 3}]
    assert _next_sends(rates, leased, NOW_S) == {1: NOW_S + 1.0, 2: 106.0}
    assert _next_sends(rates, [], NOW_S) == {}

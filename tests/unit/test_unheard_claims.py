"""workers/unheard.py on a real store (each backend in turn): a claim that lands after its
worker gave up on it is still handed back by a later look within the window, a claim let go
with no result (a crashed attempt) is not, and none is looked for outside the window."""

from __future__ import annotations

import asyncio

from hookline.shared.models import ClaimRequest
from hookline.workers.unheard import UnheardClaims
from tests.conftest import new_event


async def test_a_claim_landing_late_is_found_by_a_later_look(store, destination_factory,
                                                             clock):
    await destination_factory(max_in_flight=10)
    await store.add_events([new_event(f"e{n}") for n in range(3)])
    unheard = UnheardClaims(store, "w1", lease_s=1.2)  # a look every 0.2 s, for 1.2 s
    request = ClaimRequest(worker="w1", limit=1, lease_s=30, max_attempts=5,
                           token_tag=unheard.tag)

    _, [known], _ = await store.finish_and_claim([], None, request)
    unheard.given([known])
    assert not unheard.due()  # nothing failed yet: no look, no cost
    unheard.claim_failed()
    assert unheard.due()
    await unheard.hand_back([known.lease_token])  # nothing landed yet
    assert not unheard.due()  # the next look waits its turn

    clock.advance(1)  # the store's clock: a later claim's token sorts after
    _, [crashed], _ = await store.finish_and_claim([], None, request)  # given, then let go
    unheard.given([crashed])
    unheard.abandoned(crashed.lease_token)  # its attempt crashed: left to the quarantine
    clock.advance(1)
    _, [late], _ = await store.finish_and_claim([], None, request)  # lands unheard
    await asyncio.sleep(0.25)
    assert unheard.due()
    await unheard.hand_back([known.lease_token])
    jobs = {j.id: j for j in await store.list_jobs()}
    assert (jobs[late.job_id].status, jobs[late.job_id].attempts) == ("pending", 0)
    assert jobs[known.job_id].status == jobs[crashed.job_id].status == "running"

    await asyncio.sleep(1.25)  # the window has closed
    assert not unheard.due()

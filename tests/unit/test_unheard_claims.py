"""workers/unheard.py on a real store (each backend in turn): a claim that lands after its
worker gave up on it is still handed back by a later look within the window, a claim let go
with no result (a crashed attempt) is not, and none is looked for outside the window."""

from __future__ import annotations

import asyncio

from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Claim, ClaimRequest, Outcome
from hookline.shared.store.sqlite import SqliteStore
from hookline.workers.unheard import UnheardClaims
from hookline.workers.writer import Writer
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


async def test_a_worker_whose_attempt_crashed_in_a_window_leaves_it_to_the_quarantine(
        tmp_path):
    """A real Writer on a real SQLite file, a claim failure having opened the window: the
    job it then claims, whose attempt crashes, is not handed back by a look (it stays leased,
    to expire and be taken over in quarantine)."""
    async with SqliteStore(str(tmp_path / "w.db")) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "A" * 32, event_types=["*"],
                                    max_in_flight=5)
        await store.add_events([new_event("e1")])

        async def crash(claim: Claim) -> tuple[Outcome, AttemptResult]:
            raise RuntimeError("a bug in one attempt")

        writer = Writer(store, Config(), "w1", crash)
        writer.unheard.claim_failed()  # as after a claim that failed unheard
        writer.start()
        deadline = asyncio.get_running_loop().time() + 10
        while writer.held() or (await store.list_jobs())[0].status != "running":
            assert asyncio.get_running_loop().time() < deadline, "never claimed and crashed"
            await asyncio.sleep(0.02)
        await writer.unheard.hand_back(writer.held())
        [job] = await store.list_jobs()
        assert (job.status, job.attempts) == ("running", 1)
        await writer.stop()
        assert (await store.list_jobs())[0].status == "running"

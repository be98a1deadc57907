"""A wake-up that comes while the worker's claim is in flight is not lost: the claim read
before the new work committed and came back short, and the writer claims again at once
instead of at its next poll. A real Writer on a real SQLite file; the store holds the claim's
answer back until the test has committed an event and delivered the wake-up (the race a
loaded machine opens: stop 60's CI met it as a 5 s wait)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Claim, ClaimRequest, Done, Outcome
from hookline.shared.store.sqlite import SqliteStore
from hookline.workers.writer import Writer
from tests.conftest import new_event


class AnswerHeldBack(SqliteStore):
    """A SQLite store whose next claim, once armed, answers only when released."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.armed = False
        self.claimed_short = asyncio.Event()  # the held claim has read, and found nothing
        self.release = asyncio.Event()

    async def finish_and_claim(self, items: Sequence[Any], breaker: Any,
                               request: ClaimRequest) -> tuple[list[bool], list[Claim], bool]:
        answer = await super().finish_and_claim(items, breaker, request)
        if self.armed:
            self.armed = False
            self.claimed_short.set()
            await self.release.wait()
        return answer


async def test_a_wake_up_during_a_claim_is_claimed_at_once(tmp_path: Path) -> None:
    store = AnswerHeldBack(str(tmp_path / "w.db"))
    await store.open()
    sent: list[float] = []

    async def deliver(claim: Claim) -> tuple[Outcome, AttemptResult]:
        sent.append(time.monotonic())
        return Done(), AttemptResult(started_at=time.time(), duration_s=0.0, status_code=200)

    try:
        await store.add_destination(name="d", url="http://127.0.0.1:9/x",
                                    secret="whsec_" + "A" * 32, event_types=["*"],
                                    max_in_flight=5)
        writer = Writer(store, replace(Config(), poll_interval_s=5.0), "w1", deliver)
        store.armed = True
        writer.start()  # its first claim finds nothing, and is held
        await asyncio.wait_for(store.claimed_short.wait(), 5)
        await store.add_events([new_event("e1")])
        committed_at = time.monotonic()
        writer.look()  # the commit's wake-up, while the claim's answer is on its way
        store.release.set()
        deadline = committed_at + 3  # well before the 5 s poll
        while not sent:
            assert time.monotonic() < deadline, "the wake-up was lost: nothing claimed"
            await asyncio.sleep(0.01)
        await writer.stop()
    finally:
        await store.close()

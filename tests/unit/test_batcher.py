"""The ingest write batcher (ingest/batcher.py): batching, failure fan-out, stop, and the
min_interval_s spacing of writes under a steady trickle."""

from __future__ import annotations

import asyncio
import time

import pytest

from hookline.ingest.batcher import FILLED_ENOUGH, Batcher, BatcherStopped, WriteTimedOut


class Recorder:
    """A write function that records each batch and when it started (monotonic seconds)."""

    def __init__(self, fail_with: Exception | None = None) -> None:
        self.batches: list[list[int]] = []
        self.started: list[float] = []
        self.fail_with = fail_with

    async def __call__(self, items: list[int]) -> list[int]:
        self.started.append(time.monotonic())
        self.batches.append(list(items))
        await asyncio.sleep(0.001)  # a commit takes a moment
        if self.fail_with is not None:
            raise self.fail_with
        return [item * 10 for item in items]


async def test_concurrent_submits_share_batches_and_get_their_own_results():
    write = Recorder()
    batcher = Batcher(write, max_batch=4, name="t")
    batcher.start()
    results = await asyncio.gather(*(batcher.submit(i) for i in range(10)))
    await batcher.stop()
    assert results == [i * 10 for i in range(10)]
    assert all(len(b) <= 4 for b in write.batches) and len(write.batches) < 10
    assert batcher.written == 10 and batcher.batches == len(write.batches)


async def test_a_failed_write_reaches_every_waiter_of_its_batch_only():
    write = Recorder(fail_with=RuntimeError("disk full"))
    batcher = Batcher(write, max_batch=8, name="t")
    batcher.start()
    outcomes = await asyncio.gather(*(batcher.submit(i) for i in range(3)),
                                    return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    write.fail_with = None
    assert await batcher.submit(7) == 70  # the next batch is unaffected
    await batcher.stop()
    with pytest.raises(BatcherStopped):
        await batcher.submit(1)


async def test_min_interval_spaces_writes_under_a_trickle_but_not_when_idle():
    """Items arriving every 5 ms with min_interval_s=50 ms are written in batches at least
    50 ms apart (several items each, fewer than FILLED_ENOUGH); with min_interval_s=500 ms,
    a lone item, first or after a quiet spell longer than the interval, is written at
    once."""
    write = Recorder()
    batcher = Batcher(write, max_batch=100, name="t", min_interval_s=0.05)
    batcher.start()
    waiters = []
    trickle_started = time.monotonic()
    for i in range(60):
        waiters.append(asyncio.ensure_future(batcher.submit(i)))
        await asyncio.sleep(0.005)
    await asyncio.gather(*waiters)
    trickle_s = time.monotonic() - trickle_started
    await batcher.stop()
    gaps = [b - a for a, b in zip(write.started, write.started[1:], strict=False)]
    assert min(gaps) >= 0.045, gaps
    # About 8 writes; the bound follows the trickle, which a loaded machine stretches.
    assert len(write.batches) <= trickle_s / 0.05 + 2, (len(write.batches), trickle_s)
    assert max(len(b) for b in write.batches) >= 5

    idle = Recorder()
    lone = Batcher(idle, max_batch=100, name="t", min_interval_s=0.5)
    lone.start()
    for item in (98, 99):
        submitted = time.monotonic()
        assert await lone.submit(item) == item * 10
        assert idle.started[-1] - submitted < 0.2  # idle: not held for the 500 ms
        await asyncio.sleep(0.6)
    await lone.stop()

    unpaced = Recorder()
    plain = Batcher(unpaced, max_batch=100, name="t")
    plain.start()
    waiters = []
    for i in range(60):
        waiters.append(asyncio.ensure_future(plain.submit(i)))
        await asyncio.sleep(0.005)
    await asyncio.gather(*waiters)
    await plain.stop()
    assert len(unpaced.batches) > 2 * len(write.batches)  # the spacing is what batched them


async def test_a_batch_filled_enough_is_written_without_waiting_out_the_interval():
    """With min_interval_s=1 s, FILLED_ENOUGH items queued behind a write go in the next
    write at once: flat out, the spacing adds no latency."""
    write = Recorder()
    batcher = Batcher(write, max_batch=100, name="t", min_interval_s=1.0)
    batcher.start()
    first = asyncio.ensure_future(batcher.submit(0))
    await asyncio.sleep(0)  # the first write starts
    rest = await asyncio.wait_for(
        asyncio.gather(*(batcher.submit(i) for i in range(1, FILLED_ENOUGH + 1))), 0.5)
    assert rest == [i * 10 for i in range(1, FILLED_ENOUGH + 1)] and await first == 0
    assert [len(b) for b in write.batches] == [1, FILLED_ENOUGH]
    await batcher.stop()


async def test_a_batch_that_fills_during_the_wait_is_written_at_once():
    """With min_interval_s=1 s, items arriving one by one after a write end the wait as
    soon as FILLED_ENOUGH of them are queued."""
    write = Recorder()
    batcher = Batcher(write, max_batch=100, name="t", min_interval_s=1.0)
    batcher.start()
    assert await batcher.submit(0) == 0
    waiters = []
    for i in range(1, FILLED_ENOUGH + 1):
        waiters.append(asyncio.ensure_future(batcher.submit(i)))
        await asyncio.sleep(0.002)
    await asyncio.wait_for(asyncio.gather(*waiters), 0.5)  # 1 s when the wait held
    assert [len(b) for b in write.batches] == [1, FILLED_ENOUGH]
    await batcher.stop()


async def test_a_stuck_write_answers_its_waiters_and_those_behind_it_within_timeout_s():
    """A write that never returns (a database behind a silent network): its item and the
    items queued behind it each get WriteTimedOut once timeout_s has passed since their own
    submit, the stuck write is abandoned, the next write goes through, and failing_since
    marks the failure until a write succeeds."""
    stuck = asyncio.Event()
    calls: list[list[int]] = []

    async def write(items: list[int]) -> list[int]:
        calls.append(list(items))
        while not stuck.is_set():  # hangs until the test lets writes through
            await asyncio.sleep(0.01)
        return [item * 10 for item in items]

    batcher = Batcher(write, max_batch=8, name="t", timeout_s=1.0)
    batcher.start()
    first = asyncio.create_task(batcher.submit(1))
    # behind's own timeout ends 400 ms after first's: the time it has to be written.
    await asyncio.sleep(0.4)
    behind = asyncio.create_task(batcher.submit(2))  # queued while write 1 is stuck
    with pytest.raises(WriteTimedOut, match="outcome is unknown"):
        await first
    assert batcher.failing_since is not None and "WriteTimedOut" in batcher.last_error
    stuck.set()
    # Item 2 waited behind the stuck write but never longer than its own timeout_s.
    assert await behind == 20
    assert batcher.failing_since is None
    assert calls == [[1], [2]]
    await batcher.stop()


async def test_a_crowd_is_written_in_two_halves_that_take_turns():
    """64 callers at once on an idle batcher: the first batch takes half of them and the
    second the other half (whole-queue batches would take all 64 in one write, leaving
    nothing to read and answer while it runs); 8 callers, fewer than FILLED_ENOUGH, are
    still written together."""
    write = Recorder()
    batcher = Batcher(write, max_batch=512, name="t", timeout_s=5.0)
    batcher.start()
    results = await asyncio.gather(*(batcher.submit(i) for i in range(64)))
    assert results == [i * 10 for i in range(64)]
    assert [len(b) for b in write.batches] == [32, 32]
    await batcher.stop()
    small = Recorder()
    batcher = Batcher(small, max_batch=512, name="t")
    batcher.start()
    await asyncio.gather(*(batcher.submit(i) for i in range(8)))
    assert [len(b) for b in small.batches] == [8]
    await batcher.stop()


async def test_a_cancelled_caller_is_not_written():
    """A caller that stops waiting while its item is queued (its client went away) is
    skipped: nobody was answered for it."""
    stuck = asyncio.Event()
    write_calls: list[list[int]] = []

    async def write(items: list[int]) -> list[int]:
        write_calls.append(list(items))
        await stuck.wait()
        return [item * 10 for item in items]

    batcher = Batcher(write, max_batch=8, name="t", timeout_s=5.0)
    batcher.start()
    first = asyncio.create_task(batcher.submit(1))
    await asyncio.sleep(0.01)  # item 1 is being written
    gone = asyncio.create_task(batcher.submit(2))
    kept = asyncio.create_task(batcher.submit(3))
    await asyncio.sleep(0.01)
    gone.cancel()
    stuck.set()
    assert await first == 10 and await kept == 30
    assert write_calls == [[1], [3]]
    await batcher.stop()


async def test_a_burst_split_in_two_is_written_without_waiting_out_the_interval():
    """20 callers after a quiet spell: the first batch takes 16 (half the burst, at least
    FILLED_ENOUGH) and the 4 left over go next at once, not min_interval_s after the
    first write (they are load, not a trickle)."""
    write = Recorder()
    batcher = Batcher(write, max_batch=512, name="t", min_interval_s=0.5)
    batcher.start()
    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(batcher.submit(i) for i in range(20))), 5)
    assert [len(b) for b in write.batches] == [16, 4]
    assert time.monotonic() - started < 0.25  # 0.5 s when the remainder waited
    await batcher.stop()

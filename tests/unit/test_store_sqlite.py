"""The store contract on both backends (the `store` fixture runs each test on a SQLite file
and on a PostgreSQL database): fan-out, dedupe, claims, leases, fencing, cap."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace

import pytest

from hookline.shared.errors import Conflict, NotFound
from hookline.shared.models import (
    Accepted,
    AttemptResult,
    Claim,
    ClaimRequest,
    Dead,
    Done,
    Duplicate,
    Retry,
)
from tests.conftest import new_event

OK = AttemptResult(started_at=0.0, duration_s=0.01, status_code=200)
FAILED = AttemptResult(started_at=0.0, duration_s=0.01, status_code=503)


async def test_fan_out_creates_one_job_per_subscribed_destination(store, destination_factory):
    """An event gets a job for `*`, exact and `prefix.*` subscribers, none for others."""
    await destination_factory("all", event_types=("*",))
    await destination_factory("exact", event_types=("pull_request.opened",))
    await destination_factory("prefix", event_types=("pull_request.*",))
    await destination_factory("other", event_types=("issues.*", "push"))
    [result] = await store.add_events([new_event("e1", "pull_request.opened")])
    assert isinstance(result, Accepted) and len(result.job_ids) == 3
    jobs = await store.list_jobs()
    assert sorted(j.destination for j in jobs) == ["all", "exact", "prefix"]
    assert {j.status for j in jobs} == {"pending"}


async def test_duplicate_event_creates_nothing(store, destination_factory):
    """The same (source, id) again is a Duplicate with the first message id and no new job;
    the same id from another source is a different event."""
    await destination_factory()
    [first] = await store.add_events([new_event("e1")])
    [again, same_batch] = await store.add_events([new_event("e1"), new_event("e1")])
    [other_source] = await store.add_events([new_event("e1", source="github")])
    assert isinstance(again, Duplicate) and again.message_id == first.message_id
    assert isinstance(same_batch, Duplicate)
    assert isinstance(other_source, Accepted)
    assert (await store.stats()).events == 2
    assert len(await store.list_jobs()) == 2


async def test_fan_out_is_one_transaction(store, destination_factory, tmp_path):
    """When the transaction fails mid-batch, neither the events nor any of their jobs remain."""
    await destination_factory()
    await destination_factory()
    if not hasattr(store, "path"):  # PostgreSQL: the same failure, as a PL/pgSQL trigger
        import asyncpg

        raw = await asyncpg.connect(store.dsn)
        await raw.execute(
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.event_id >= 2 THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$; "
            "CREATE TRIGGER boom BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION boom()")
        with pytest.raises(asyncpg.RaiseError):
            await store.add_events([new_event("a"), new_event("b")])
        await raw.execute("DROP TRIGGER boom ON jobs")
        await raw.close()
        stats = await store.stats()
        assert stats.events == 0 and sum(stats.jobs_by_status.values()) == 0
        return
    # A trigger makes the 3rd job insert fail after the first event and its jobs were written.
    raw = sqlite3.connect(tmp_path / "hookline.db")
    raw.execute("CREATE TRIGGER boom BEFORE INSERT ON jobs WHEN NEW.event_id >= 2 "
                "BEGIN SELECT RAISE(ABORT, 'boom'); END")
    raw.commit()
    with pytest.raises(sqlite3.IntegrityError):
        await store.add_events([new_event("a"), new_event("b")])
    raw.execute("DROP TRIGGER boom")
    raw.commit()
    raw.close()
    stats = await store.stats()
    assert stats.events == 0 and sum(stats.jobs_by_status.values()) == 0


async def test_claim_counts_attempt_and_gives_unique_tokens(store, destination_factory):
    """Each claim counts one attempt at claim time and gets its own lease token."""
    await destination_factory()
    await store.add_events([new_event(f"e{i}") for i in range(5)])
    claims = await store.claim("w1", 10, lease_s=30, max_attempts=5)
    assert len(claims) == 5
    assert len({c.lease_token for c in claims}) == 5
    assert all(c.attempt == 1 and c.lease_owner == "w1" for c in claims)
    assert await store.claim("w2", 10, lease_s=30, max_attempts=5) == []
    assert {j.status for j in await store.list_jobs()} == {"running"}


async def test_lease_tokens_sort_by_claim_time(store, destination_factory, clock):
    """A later claim's tokens sort after an earlier claim's (the claim's instant leads the
    token), so the attempts' unique token index grows at its end; each is still unique."""
    await destination_factory(max_in_flight=100)
    await store.add_events([new_event(f"e{i}") for i in range(12)])
    earlier = await store.claim("w1", 6, lease_s=30, max_attempts=5)
    clock.now_s += 0.001
    later = await store.claim("w2", 6, lease_s=30, max_attempts=5)
    assert len(earlier) == len(later) == 6
    tokens = [c.lease_token for c in earlier + later]
    assert len(set(tokens)) == 12 and all(len(t) == 32 for t in tokens)
    assert max(c.lease_token for c in earlier) < min(c.lease_token for c in later)


async def test_claim_respects_max_in_flight(store, destination_factory):
    """No more than max_in_flight unexpired leases per destination; finishing frees a slot."""
    await destination_factory("one", max_in_flight=1)
    await destination_factory("two", max_in_flight=2)
    await store.add_events([new_event(f"e{i}") for i in range(4)])
    claims = await store.claim("w1", 100, lease_s=30, max_attempts=5)
    assert sorted(c.destination_name for c in claims) == ["one", "two", "two"]
    assert await store.claim("w2", 100, lease_s=30, max_attempts=5) == []
    one = next(c for c in claims if c.destination_name == "one")
    assert await store.finish([(one, Done(), OK)]) == [True]
    [next_one] = await store.claim("w2", 100, lease_s=30, max_attempts=5)
    assert next_one.destination_name == "one"


async def test_finish_and_claim_frees_slots_and_claims_into_them(store, destination_factory):
    """A batch of finishes claims for the slots it frees, in one call: the finished jobs are
    done, stale items stay fenced, and the destination's max_in_flight still holds."""
    await destination_factory("one", max_in_flight=2)
    await store.add_events([new_event(f"e{i}") for i in range(5)])
    first = await store.claim("w1", 10, lease_s=30, max_attempts=5)
    assert len(first) == 2  # max_in_flight
    request = ClaimRequest(worker="w1", limit=10, lease_s=30, max_attempts=5)
    kept, claims, waiting = await store.finish_and_claim([(c, Done(), OK) for c in first],
                                                         None, request)
    assert kept == [True, True] and not waiting
    assert len(claims) == 2 and {c.job_id for c in claims}.isdisjoint(c.job_id for c in first)
    assert all(c.attempt == 1 and c.lease_owner == "w1" for c in claims)
    # The finish of an already finished claim (a write retried after its commit's answer
    # was lost) counts as written, changes nothing and claims no more than the free slots
    # (none: both are held).
    counted = await store.stats()
    kept, more, _ = await store.finish_and_claim([(first[0], Done(), OK)], None, request)
    assert kept == [True] and more == [] and await store.stats() == counted
    statuses = sorted(j.status for j in await store.list_jobs())
    assert statuses == ["done", "done", "pending", "running", "running"]


async def test_a_batch_of_deliveries_is_fenced_item_by_item(store, destination_factory,
                                                            clock):
    """A batch of 2xx completions (the one-statement path) keeps each claim's fence: the
    stale claim of a taken-over job changes nothing while the other finishes, and both
    attempt rows are completed (the stale request happened too)."""
    await destination_factory(max_in_flight=5)
    await store.add_events([new_event("e1"), new_event("e2")])
    [stale] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    clock.advance(31)
    [taker] = await store.claim("w2", 5, lease_s=30, max_attempts=5)  # a takeover: alone
    [fresh] = await store.claim("w2", 5, lease_s=30, max_attempts=5)
    assert taker.job_id == stale.job_id and fresh.job_id != stale.job_id
    delivered = AttemptResult(started_at=5.0, duration_s=0.25, status_code=204,
                              response_excerpt="ok")
    assert await store.finish([(stale, Done(), delivered), (fresh, Done(), delivered)]) == [
        False, True]
    jobs = {j.id: j.status for j in await store.list_jobs()}
    assert jobs == {stale.job_id: "running", fresh.job_id: "done"}
    recorded = {a.lease_token: a for a in await store.list_attempts()}
    for claim in (stale, fresh):
        attempt = recorded[claim.lease_token]
        assert (attempt.status_code, attempt.duration_s, attempt.started_at) == (204, 0.25, 5.0)


async def test_a_job_finished_when_its_answer_arrived_not_when_it_was_written(
        store, destination_factory, clock):
    """The worker's result carries how long it waited before the write (waited_s): each
    job's finished_at is the write's instant less that, on the one-statement path of a
    batch of deliveries and one by one (a delivery next to a failure, a dead letter);
    updated_at stays the write's instant."""
    await destination_factory(max_in_flight=10)
    await store.add_events([new_event(f"e{i}") for i in range(5)])
    claims = await store.claim("w1", 5, lease_s=30, max_attempts=1)
    now = clock.now_s
    batch = [(claims[0], Done(), replace(OK, waited_s=2.5)), (claims[1], Done(), OK)]
    assert await store.finish(batch) == [True, True]  # every item a 2xx: one statement
    one_by_one = [(claims[2], Done(), replace(OK, waited_s=0.75)),
                  (claims[3], Dead(error="HTTP 503"), replace(FAILED, waited_s=1.25)),
                  (claims[4], Done(), OK)]
    assert await store.finish(one_by_one) == [True, True, True]
    jobs = {j.id: j for j in await store.list_jobs()}
    waited = {claims[0].job_id: 2.5, claims[1].job_id: 0.0, claims[2].job_id: 0.75,
              claims[3].job_id: 1.25, claims[4].job_id: 0.0}
    for job_id, waited_s in waited.items():
        assert jobs[job_id].finished_at == pytest.approx(now - waited_s, abs=1e-6), job_id
        assert jobs[job_id].updated_at == pytest.approx(now, abs=1e-6)
    assert jobs[claims[3].job_id].status == "dead"


async def test_finish_and_claim_with_no_limit_only_finishes(store, destination_factory):
    """limit 0: the finishes are recorded and nothing is claimed."""
    await destination_factory()
    await store.add_events([new_event(f"e{i}") for i in range(2)])
    [claim] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    request = ClaimRequest(worker="w1", limit=0, lease_s=30, max_attempts=5)
    assert await store.finish_and_claim([(claim, Done(), OK)], None, request) == (
        [True], [], False)
    assert sorted(j.status for j in await store.list_jobs()) == ["done", "pending"]


async def test_expired_lease_is_taken_over_and_stale_finish_is_fenced(store, destination_factory,
                                                                     clock):
    """After the lease expires another worker claims the job with a new token; the first
    worker's late finish changes nothing (returns False) and the taker's finish wins."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    [stale] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    clock.advance(31)
    [taker] = await store.claim("w2", 1, lease_s=30, max_attempts=5)
    assert taker.job_id == stale.job_id and taker.lease_token != stale.lease_token
    assert taker.taken_over and taker.attempt == 2
    assert await store.finish([(stale, Dead(error="late"), FAILED)]) == [False]
    assert (await store.list_jobs())[0].status == "running"
    assert await store.finish([(taker, Done(), OK)]) == [True]
    job = (await store.list_jobs())[0]
    assert job.status == "done" and job.attempts == 2
    attempts = await store.list_attempts(job.id)
    assert [a.worker for a in attempts] == ["w1", "w2"]


async def test_extend_keeps_lease_and_reports_lost(store, destination_factory, clock):
    """Extending pushes lease_until so no takeover happens; a superseded claim is reported."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    [claim] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    clock.advance(20)
    assert await store.extend([claim], lease_s=30) == []
    clock.advance(20)  # 40 s after the claim, 20 s after the extension
    assert await store.claim("w2", 1, lease_s=30, max_attempts=5) == []
    clock.advance(31)
    [taker] = await store.claim("w2", 1, lease_s=30, max_attempts=5)
    assert await store.extend([claim, taker], lease_s=30) == [claim]


async def test_retry_schedules_run_at(store, destination_factory, clock):
    """A Retry outcome makes the job pending again, claimable only once run_at has come."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    [claim] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    await store.finish([(claim, Retry(delay_s=60, error="HTTP 503"), FAILED)])
    job = (await store.list_jobs())[0]
    assert job.status == "pending" and job.last_error == "HTTP 503"
    assert await store.claim("w1", 1, lease_s=30, max_attempts=5) == []
    clock.advance(61)
    [again] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    assert again.attempt == 2


async def test_worker_lost_on_last_attempt_makes_job_dead(store, destination_factory, clock):
    """A job whose worker dies on its final attempt is dead ("worker lost") at the next
    claim instead of being sent again: attempts are counted at claim (invariant 3)."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    for _ in range(2):
        await store.claim("w1", 1, lease_s=30, max_attempts=2)
        clock.advance(31)
    assert await store.claim("w2", 1, lease_s=30, max_attempts=2) == []
    job = (await store.list_jobs())[0]
    assert job.status == "dead" and "worker lost" in job.last_error and job.attempts == 2


async def test_hand_back_does_not_charge_an_attempt(store, destination_factory, clock):
    """A handed-back job is pending and due again with its attempt count restored, and keeps
    its place in the line: it is claimed before a job that came due while it was held."""
    await destination_factory()
    await store.add_events([new_event("e1")])
    due_at = (await store.list_jobs())[0].run_at
    [claim] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    clock.advance(10)
    await store.add_events([new_event("e2")])  # due 10 s after e1's job
    clock.advance(10)
    assert await store.hand_back([claim]) == 1
    assert await store.hand_back([claim]) == 0  # fenced: the token is gone
    job = next(j for j in await store.list_jobs() if j.id == claim.job_id)
    assert (job.status, job.attempts, job.run_at) == ("pending", 0, due_at)
    [again] = await store.claim("w2", 1, lease_s=30, max_attempts=5)
    assert (again.job_id, again.attempt) == (claim.job_id, 1)


async def test_hand_back_unheld_returns_only_the_leases_of_a_lost_answer(
        store, destination_factory, clock):
    """The jobs leased to a worker process (its identity and its tokens' tag) under tokens
    newer than the newest it was given, and not held by it (a claim whose answer it never
    heard), go back pending and uncharged, their attempts closed `handed back (claim answer
    lost)`. Left running: its older leases, the ones it holds, another process's with the
    same identity (another tag), another worker's, and a takeover (its quarantine)."""
    await destination_factory(max_in_flight=50)
    await store.add_events([new_event(f"e{n}") for n in range(7)])

    async def claim(worker: str, tag: str, limit: int) -> list[Claim]:
        clock.advance(1)
        _, claims, _ = await store.finish_and_claim([], None, ClaimRequest(
            worker=worker, limit=limit, lease_s=30, max_attempts=5, token_tag=tag))
        return claims

    [older] = await claim("w1", "0000000a", 1)
    [given] = await claim("w1", "0000000a", 1)
    lost = await claim("w1", "0000000a", 2)
    [twin] = await claim("w1", "0000000b", 1)  # another process with the same identity
    [other] = await claim("w2", "0000000a", 1)
    assert len(lost) == 2 and lost[0].lease_token[16:24] == "0000000a"

    # Newer than `older` (the newest it knew of), not held: `given` is held.
    handed = await store.hand_back_unheld("w1", "0000000a", older.lease_token,
                                          [given.lease_token])
    assert sorted(h.job_id for h in handed) == sorted(c.job_id for c in lost)
    assert {(h.event_id, h.lease_token, h.destination, h.tenant) for h in handed} == {
        (c.event_id, c.lease_token, c.destination_name, c.tenant_id) for c in lost}
    jobs = {j.id: j for j in await store.list_jobs()}
    assert {(jobs[c.job_id].status, jobs[c.job_id].attempts) for c in lost} == {("pending", 0)}
    assert {jobs[c.job_id].status for c in (older, given, twin, other)} == {"running"}
    story = await store.get_job(lost[0].job_id)
    assert [a.error for a in story.attempts] == ["handed back (claim answer lost)"]
    assert await store.hand_back_unheld("w1", "0000000a", given.lease_token, []) == []
    with pytest.raises(ValueError, match="tag must be 8 lowercase hex digits"):
        await store.hand_back_unheld("w1", "", "", [])

    # A takeover whose claim's answer was lost is left to expire: taken over again, alone.
    clock.advance(31)  # every lease above has expired; the jobs handed back are due
    [first, *rest] = await claim("w1", "0000000a", 10)
    assert first.taken_over and rest == []
    assert await store.hand_back_unheld("w1", "0000000a", given.lease_token, []) == []
    clock.advance(31)
    [again] = await claim("w3", "", 10)
    assert again.job_id == first.job_id and again.taken_over


async def test_paused_destination_is_not_claimed(store, destination_factory):
    """Jobs of a paused destination are not claimed (nor charged) until it is resumed."""
    await destination_factory("p")
    await store.add_events([new_event("e1")])
    await store.set_paused("p", True, reason="operator")
    assert await store.claim("w1", 1, lease_s=30, max_attempts=5) == []
    assert (await store.list_jobs())[0].attempts == 0
    await store.set_paused("p", False)
    assert len(await store.claim("w1", 1, lease_s=30, max_attempts=5)) == 1
    with pytest.raises(NotFound):
        await store.set_paused("missing", True)


async def test_new_waiter_wakes_at_once_for_work_committed_before_it_listened(
        store, destination_factory):
    """Wake-ups reach only waiters already listening: a job committed before the first
    wait_for_jobs woke nobody, so that first wait returns True at once instead of sleeping
    its whole timeout (a worker starting, or reconnecting its LISTEN, beside ingest)."""
    await destination_factory()
    await store.add_events([new_event("e1")])  # no one is listening yet
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await store.wait_for_jobs(5.0) is True
    assert loop.time() - t0 < 1.0


async def test_new_waiter_sleeps_when_only_paused_work_waits(store, destination_factory):
    """The first wait_for_jobs wakes early only for claimable work: a paused destination's
    job does not count, so it sleeps its timeout and returns False."""
    await destination_factory("p")
    await store.add_events([new_event("e1")])
    await store.set_paused("p", True, reason="operator")
    assert await store.wait_for_jobs(0.2) is False


async def test_destination_names_are_unique(store, destination_factory):
    """Adding a second destination with a taken name is a Conflict, nothing changes."""
    await destination_factory("a")
    with pytest.raises(Conflict):
        await destination_factory("a")
    assert [d.name for d in await store.list_destinations()] == ["a"]


async def test_body_bytes_are_stored_exactly(store, destination_factory):
    """The claimed body is byte-for-byte the accepted one (non-ASCII, odd spacing)."""
    await destination_factory()
    body = '{ "b":1,  "a": "é\\u00e9 ✓" }'.encode()
    await store.add_events([new_event("e1", body=body)])
    [claim] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    assert claim.body == body


async def test_reopen_keeps_schema_and_data(tmp_path, clock):
    """Opening an existing file applies no migration twice and keeps its rows; file is 0600."""
    from hookline.shared.store.sqlite import SqliteStore

    path = tmp_path / "x.db"
    async with SqliteStore(str(path), clock=clock) as s:
        await s.add_destination(name="a", url="http://h/", secret="whsec_" + "A" * 32,
                                event_types=["*"], max_in_flight=1)
    async with SqliteStore(str(path), clock=clock) as s:
        assert [d.name for d in await s.list_destinations()] == ["a"]
    assert path.stat().st_mode & 0o777 == 0o600

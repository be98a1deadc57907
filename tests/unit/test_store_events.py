"""Event lookup, event listing, resend and retry now in the store, on each backend in turn
(a SQLite file, then PostgreSQL), on the fake clock."""

from __future__ import annotations

import pytest

from hookline.shared.errors import ConfigError, Conflict, NotFound
from hookline.shared.models import AttemptResult, Dead, Done, Retry
from hookline.shared.operator_models import EventFilter, JobSelection
from hookline.shared.tenant_models import TenantFields
from tests.conftest import execute_db, new_event

LEASE_S = 30.0


async def _finish(store, clock, outcome) -> list[int]:
    """Claim every due job and finish it with `outcome`; returns the job ids."""
    claims = await store.claim("w1", 100, LEASE_S, 5)
    result = AttemptResult(started_at=clock(), duration_s=0.01, status_code=200)
    await store.finish([(c, outcome, result) for c in claims])
    return sorted(c.job_id for c in claims)


async def test_find_event_by_each_reference(store, destination_factory):
    """An event is found by its internal id, its webhook-id and the sender's id (in `api` by
    default, or in a named source), with its jobs; a whole number that is no internal id
    falls back to the sender's id; nothing matching is NotFound naming what was tried."""
    await destination_factory("a")
    await destination_factory("b")
    [first, numeric, sourced] = await store.add_events([
        new_event("evt_1"), new_event("123456"), new_event("evt_1", source="github")])

    by_id = await store.find_event(str(first.event_id))
    by_msg = await store.find_event(first.message_id)
    by_sender = await store.find_event("evt_1")
    assert (by_id.matched_by, by_msg.matched_by, by_sender.matched_by) == (
        "id", "message_id", "source_event_id")
    assert by_id.event == by_msg.event == by_sender.event
    event = by_id.event
    assert (event.id, event.message_id, event.source, event.source_event_id, event.type) == (
        first.event_id, first.message_id, "api", "evt_1", "push")
    assert event.body_bytes == len(b'{"n": "evt_1"}') and event.body_purged_at is None
    assert [(j.destination, j.status, j.attempts) for j in event.jobs] == [
        ("a", "pending", 0), ("b", "pending", 0)]
    assert [j.id for j in event.jobs] == sorted(first.job_ids)

    assert (await store.find_event("evt_1", source="github")).event.id == sourced.event_id
    fallback = await store.find_event("123456")
    assert fallback.event.id == numeric.event_id and fallback.matched_by == "source_event_id"
    with pytest.raises(NotFound, match=r"webhook-id 'msg_nope'.*sender's id 'msg_nope'"):
        await store.find_event("msg_nope")
    with pytest.raises(NotFound, match="from source 'stripe'"):
        await store.find_event("evt_1", source="stripe")
    with pytest.raises(ConfigError):
        await store.find_event("")


async def test_list_events_filters_and_pages(store, clock, destination_factory):
    """Newest first; filtered by type, a job's destination and status, and received time;
    `before_id` pages by id."""
    await destination_factory("a", event_types=("push",))
    await destination_factory("b")
    await store.add_events([new_event("e1", "push"), new_event("e2", "issues")])
    clock.advance(100)
    await store.add_events([new_event("e3", "push")])
    await _finish(store, clock, Done())  # e1..e3's jobs all done
    await store.add_events([new_event("e4", "issues")])

    def ids(events):
        return [e.source_event_id for e in events]

    assert ids(await store.list_events(EventFilter())) == ["e4", "e3", "e2", "e1"]
    assert ids(await store.list_events(EventFilter(type="issues"))) == ["e4", "e2"]
    assert ids(await store.list_events(EventFilter(destination="a"))) == ["e3", "e1"]
    assert ids(await store.list_events(EventFilter(status="pending"))) == ["e4"]
    assert ids(await store.list_events(EventFilter(destination="a", status="pending"))) == []
    assert ids(await store.list_events(EventFilter(since_s=clock() - 50))) == ["e4", "e3"]
    assert ids(await store.list_events(EventFilter(until_s=clock() - 50))) == ["e2", "e1"]
    page = await store.list_events(EventFilter(limit=2))
    assert ids(page) == ["e4", "e3"] and [j.destination for j in page[1].jobs] == ["a", "b"]
    assert ids(await store.list_events(EventFilter(limit=2, before_id=page[-1].id))) == [
        "e2", "e1"]
    with pytest.raises(ConfigError):
        await store.list_events(EventFilter(status="lost"))


async def test_resend_done_and_dead_jobs(store, store_url, clock, destination_factory):
    """A done job resent is pending, due now, with a fresh budget and its history kept, and
    goes out with the same webhook-id and body; a dry run changes nothing; a pending job, a
    purged body and a removed destination are refused with the reason; bulk selects by
    destination, status and time, skipping what cannot be resent."""
    await destination_factory("a")
    await destination_factory("b")
    body = b'{"exact": "bytes \\u00e9"}'
    [accepted] = await store.add_events([new_event("e1", body=body)])
    first = {c.destination_name: c for c in await store.claim("w1", 10, LEASE_S, 5)}
    result = AttemptResult(started_at=clock(), duration_s=0.01, status_code=200)
    await store.finish([(first["a"], Done(), result), (first["b"], Dead(error="410"), result)])
    clock.advance(60)
    job_a = first["a"].job_id

    dry = await store.resend(JobSelection(destination="a"), dry_run=True)
    assert (dry.count, dry.job_ids, dry.more, dry.dry_run) == (1, (job_a,), False, True)
    assert (await store.get_job(job_a)).job.status == "done"

    done = await store.resend(JobSelection(job_id=job_a))
    assert (done.count, done.job_ids, done.dry_run) == (1, (job_a,), False)
    story = await store.get_job(job_a)
    assert (story.job.status, story.job.attempts, story.job.run_at, story.replays) == (
        "pending", 0, clock(), 1)
    assert len(story.attempts) == 1  # the first delivery stays in the history
    [again] = await store.claim("w1", 10, LEASE_S, 5)
    assert (again.job_id, again.message_id, again.body, again.attempt) == (
        job_a, accepted.message_id, body, 1)
    with pytest.raises(Conflict, match=r"running.*retry now"):
        await store.resend(JobSelection(job_id=job_a))
    await store.finish([(again, Done(), result)])

    assert (await store.resend(JobSelection(destination="b", status="done"))).count == 0
    assert (await store.resend(JobSelection(destination="b", since_s=clock()))).count == 0
    assert (await store.resend(JobSelection(destination="b", status="dead"))).count == 1
    with pytest.raises(NotFound):
        await store.resend(JobSelection(job_id=9999))
    with pytest.raises(ConfigError):
        await store.resend(JobSelection(destination="a", status="pending"))
    with pytest.raises(ConfigError):
        await store.resend(JobSelection(job_id=job_a, destination="a"))

    await execute_db(store_url, "UPDATE events SET body_purged_at = 1, body = ''")
    with pytest.raises(Conflict, match="purged by retention"):
        await store.resend(JobSelection(job_id=job_a))
    assert (await store.resend(JobSelection(destination="a"))).count == 0


async def test_retry_now_brings_pending_jobs_forward(store, clock, destination_factory):
    """A pending job scheduled far ahead becomes due now with its attempt count kept; a dry
    run changes nothing; bulk takes only not-yet-due pending jobs of the destination and
    says when more matched than the limit; a finished job is refused (resend it)."""
    await destination_factory("a")
    await store.add_events([new_event(f"e{i}") for i in range(3)])
    far = clock() + 3600
    ids = await _finish(store, clock, Retry(delay_s=3600, error="HTTP 503"))
    assert await store.claim("w1", 10, LEASE_S, 5) == []

    dry = await store.retry_now(JobSelection(destination="a", limit=2), dry_run=True)
    assert (dry.count, dry.job_ids, dry.more) == (2, tuple(ids[:2]), True)
    assert {j.run_at for j in await store.list_jobs()} == {far}

    one = await store.retry_now(JobSelection(job_id=ids[0]))
    assert one.count == 1
    [claim] = await store.claim("w1", 10, LEASE_S, 5)
    assert (claim.job_id, claim.attempt) == (ids[0], 2)
    with pytest.raises(Conflict, match="running, not pending"):
        await store.retry_now(JobSelection(job_id=ids[0]))
    await store.finish([(claim, Done(), AttemptResult(started_at=clock(), duration_s=0.01,
                                                      status_code=200))])
    with pytest.raises(Conflict, match=r"done, not pending; .*resend"):
        await store.retry_now(JobSelection(job_id=ids[0]))

    rest = await store.retry_now(JobSelection(destination="a"))
    assert (rest.count, rest.job_ids, rest.more) == (2, tuple(ids[1:]), False)
    assert sorted(c.job_id for c in await store.claim("w1", 10, LEASE_S, 5)) == ids[1:]
    with pytest.raises(ConfigError):
        await store.retry_now(JobSelection(destination="a", status="dead"))


async def _billing_of(store, tenant: str) -> None:
    """Tenant `tenant` (created unless the default) with a destination `billing`."""
    if tenant != "_default":
        await store.put_tenant(tenant, TenantFields())
    await store.add_destination(name="billing", url="http://127.0.0.1:9/b",
                                secret="whsec_" + "B" * 32, event_types=["*"],
                                max_in_flight=10, tenant=tenant)


async def test_resume_brings_waiting_retries_forward(store, clock):
    """Resuming a destination makes its pending jobs waiting for a later retry due at once
    (attempt count kept) and says how many; a job already due keeps its run_at; another
    tenant's destination of the same name, paused too, keeps its retries' schedule."""
    for tenant in ("acme", "globex"):
        await _billing_of(store, tenant)
    await store.add_events([new_event("a1", tenant="acme"), new_event("g1", tenant="globex")])
    retried = await _finish(store, clock, Retry(delay_s=60, error="HTTP 500"))
    far = clock() + 60
    for tenant in ("acme", "globex"):
        assert await store.set_paused("billing", True, "receiver down", tenant=tenant) == 0
    clock.advance(5)
    [queued] = await store.add_events([new_event("a2", tenant="acme")])
    queued_at = clock()
    clock.advance(5)

    assert await store.set_paused("billing", False, tenant="acme") == 1
    by_id = {j.id: j for j in await store.list_jobs()}
    acme_retry, globex_retry = sorted(retried)
    assert by_id[acme_retry].run_at == clock()
    assert by_id[queued.job_ids[0]].run_at == queued_at  # already due: keeps its place
    assert by_id[globex_retry].run_at == far  # another tenant's: untouched
    claims = await store.claim("w1", 10, LEASE_S, 5)
    assert sorted((c.job_id, c.attempt) for c in claims) == [
        (acme_retry, 2), (queued.job_ids[0], 1)]
    assert await store.set_paused("billing", False, tenant="globex") == 1


async def test_resume_keeps_max_in_flight_and_takes_every_batch(store, clock, monkeypatch):
    """However many retries a resume brings forward (here in batches of 2), the claim still
    sends at most `max_in_flight` at once, the oldest first."""
    monkeypatch.setattr("hookline.shared.store.operator_tx.BULK_MAX_LIMIT", 2)
    await _billing_of(store, "_default")
    await store.update_destination("billing", max_in_flight=1)
    await store.add_events([new_event(f"e{i}") for i in range(5)])
    ids = []
    for _ in range(5):
        ids += await _finish(store, clock, Retry(delay_s=3600, error="HTTP 500"))
    await store.set_paused("billing", True, "receiver down")

    assert await store.set_paused("billing", False) == 5
    assert {j.run_at for j in await store.list_jobs()} == {clock()}
    [claim] = await store.claim("w1", 10, LEASE_S, 5)
    assert claim.job_id == min(ids)


async def test_resume_of_an_ordered_destination_sends_its_oldest_job_first(store, clock):
    """An ordered destination's retries brought forward by a resume still go out one at a
    time, the oldest first: the claim decides, the resume only changes run_at."""
    await _billing_of(store, "_default")
    await store.add_events([new_event(f"e{i}") for i in range(3)])
    ids = await _finish(store, clock, Retry(delay_s=3600, error="HTTP 500"))
    await store.set_paused("billing", True, "receiver down")
    await store.update_destination("billing", ordered=True)

    assert await store.set_paused("billing", False) == 3
    [claim] = await store.claim("w1", 10, LEASE_S, 5)
    assert claim.job_id == min(ids)

"""Operator store methods on a real SQLite file: update, remove, dead listing, replay, purge,
job story and extended stats."""

from __future__ import annotations

import pytest

from hookline.shared.errors import ConfigError, Conflict, NotFound
from hookline.shared.models import AttemptResult, Dead, Done
from hookline.shared.operator_models import JobSelection
from hookline.shared.tenant_models import TenantFields
from tests.conftest import execute_db, new_event

LEASE_S = 30.0


async def _kill(store, clock, count: int = 1, error: str = "HTTP 410") -> list[int]:
    """Claim and finish `count` due jobs as dead; returns their ids."""
    claims = await store.claim("w1", count, LEASE_S, 5)
    result = AttemptResult(started_at=clock(), duration_s=0.01, status_code=410)
    await store.finish([(c, Dead(error=error), result) for c in claims])
    return [c.job_id for c in claims]


async def test_update_destination_changes_allowed_fields_only(store, destination_factory):
    """update_destination stores url, event_types and max_in_flight; unknown fields, bad
    values and unknown names are refused without changing the row."""
    await destination_factory("a")
    dest = await store.update_destination("a", url="https://example.com/h",
                                          event_types=["invoice.*"], max_in_flight=1)
    assert (dest.url, dest.event_types, dest.max_in_flight) == (
        "https://example.com/h", ("invoice.*",), 1)
    with pytest.raises(ConfigError, match=r"unknown field\(s\) .secretz."):
        await store.update_destination("a", secretz="x")
    with pytest.raises(ConfigError, match="max_in_flight"):
        await store.update_destination("a", max_in_flight=0)
    with pytest.raises(ConfigError, match="url"):
        await store.update_destination("a", url="ftp://x")
    with pytest.raises(NotFound):
        await store.update_destination("nope", max_in_flight=2)
    assert (await store.get_destination("a")).max_in_flight == 1


async def test_remove_destination_kills_pending_and_frees_name(store, destination_factory):
    """Removing a destination ends its pending jobs dead ("destination removed"), stops new
    fan-out to it, and lets the name be registered again."""
    await destination_factory("gone")
    await store.add_events([new_event("e1"), new_event("e2")])
    assert await store.remove_destination("gone") == 2
    jobs = await store.list_jobs()
    assert {j.status for j in jobs} == {"dead"}
    assert {j.last_error for j in jobs} == {"destination removed"}
    assert jobs[0].destination.startswith("gone~removed-")
    with pytest.raises(NotFound):
        await store.get_destination("gone")
    accepted = (await store.add_events([new_event("e3")]))[0]
    assert accepted.job_ids == ()
    await destination_factory("gone")  # the name is free again
    with pytest.raises(NotFound):
        await store.remove_destination("never")
    # dead jobs of a removed destination are not replayable
    assert await store.replay(all_dead=True) == 0
    with pytest.raises(Conflict, match="removed"):
        await store.replay(job_id=jobs[0].id)


async def test_replay_dry_run_then_fresh_budget_same_event(store, clock, destination_factory):
    """Dry-run counts without changing anything; replay makes dead jobs pending and due with
    attempts 0; the claim then carries the same message_id and body bytes as the first one."""
    await destination_factory("a")
    await destination_factory("b")
    body = b'{"exact": "bytes \\u00e9", "n": 1}'
    await store.add_events([new_event("e1", body=body)])
    first = {c.destination_name: c for c in await store.claim("w1", 10, LEASE_S, 5)}
    result = AttemptResult(started_at=clock(), duration_s=0.01, status_code=500)
    await store.finish([(c, Dead(error="attempt cap"), result) for c in first.values()])
    clock.advance(3600)

    assert await store.replay(all_dead=True, dry_run=True) == 2
    assert await store.replay(all_dead=True, destination="a", dry_run=True) == 1
    assert await store.replay(all_dead=True, since_s=clock() - 60, dry_run=True) == 0
    assert {j.status for j in await store.list_jobs()} == {"dead"}
    assert len(await store.list_dead(destination="a")) == 1

    assert await store.replay(all_dead=True, destination="a") == 1
    job_a = next(j for j in await store.list_jobs() if j.destination == "a")
    assert (job_a.status, job_a.attempts, job_a.run_at, job_a.last_error) == (
        "pending", 0, clock(), None)
    again = await store.claim("w1", 10, LEASE_S, 5)
    assert len(again) == 1 and again[0].attempt == 1
    assert again[0].message_id == first["a"].message_id
    assert again[0].body == first["a"].body == body
    story = await store.get_job(job_a.id)
    assert story.replays == 1 and len(story.attempts) == 2
    assert story.attempts[0].status_code == 500  # the old error stays in the history


async def test_a_replayed_dead_letters_delivery_is_observed_once_a_resend_is_not(
        store, clock, destination_factory):
    """The delivery-latency histogram observes each job's first delivery: a dead letter
    replayed and then delivered is counted, from its event's acceptance (an incident's late
    deliveries reach the top buckets); a delivered job resent is not counted again."""
    await destination_factory("a")
    await store.add_events([new_event("e1")])
    accepted_at = clock()
    [claim] = await store.claim("w1", 10, LEASE_S, 5)
    assert claim.received_at == accepted_at
    failed = AttemptResult(started_at=clock(), duration_s=0.01, status_code=500)
    await store.finish([(claim, Dead(error="attempt cap"), failed)])
    assert (await store.stats()).delivery_latency.count == 0
    clock.advance(7200)
    assert await store.replay(all_dead=True) == 1
    [replayed] = await store.claim("w1", 10, LEASE_S, 5)
    assert replayed.received_at == accepted_at  # never delivered: its first delivery
    ok = AttemptResult(started_at=clock(), duration_s=0.01, status_code=200)
    await store.finish([(replayed, Done(), ok)])
    latency = (await store.stats()).delivery_latency
    assert latency.count == 1 and latency.sum_s == pytest.approx(7200, abs=1)
    resent = await store.resend(JobSelection(job_id=replayed.job_id))
    assert resent.count == 1
    [again] = await store.claim("w1", 10, LEASE_S, 5)
    assert again.received_at is None  # delivered before: not observed again
    await store.finish([(again, Done(), ok)])
    assert (await store.stats()).delivery_latency.count == 1


async def test_replay_single_job_errors(store, clock, destination_factory):
    """Replaying an unknown job is NotFound, a pending one is a Conflict, and exactly one of
    job_id / all_dead is required."""
    await destination_factory("a")
    await store.add_events([new_event("e1")])
    job_id = (await store.list_jobs())[0].id
    with pytest.raises(NotFound):
        await store.replay(job_id=9999)
    with pytest.raises(Conflict, match="pending"):
        await store.replay(job_id=job_id)
    with pytest.raises(ConfigError):
        await store.replay()
    with pytest.raises(ConfigError):
        await store.replay(job_id=job_id, all_dead=True)
    await _kill(store, clock)
    assert await store.replay(job_id=job_id, dry_run=True) == 1
    assert await store.replay(job_id=job_id) == 1


async def test_purge_keeps_what_it_must(store, store_url, clock, destination_factory):
    """Purge empties old delivered bodies, deletes old job/attempt metadata, and deletes an
    event row only past the dedupe window; pending work, recent events and the bodies of dead
    jobs (a dead letter stays replayable while it is listed) are untouched; replay of an
    event whose body an older version purged is refused."""
    await destination_factory("a")
    day = 86400.0
    await store.add_events([new_event("old_dead"), new_event("old_done")])
    claims = await store.claim("w1", 10, LEASE_S, 5)
    ok = AttemptResult(started_at=clock(), duration_s=0.01, status_code=200)
    bad = AttemptResult(started_at=clock(), duration_s=0.01, status_code=410)
    dead_claim = next(c for c in claims if c.body == new_event("old_dead").body)
    done_claim = next(c for c in claims if c is not dead_claim)
    await store.finish([(dead_claim, Dead(error="410"), bad), (done_claim, Done(), ok)])
    clock.advance(10 * day)
    await store.add_events([new_event("fresh")])  # pending, recent
    now = clock()

    result = await store.purge(bodies_before_s=now - 7 * day, metadata_before_s=now - 30 * day,
                               dedupe_before_s=now - 90 * day)
    assert (result.bodies, result.jobs, result.attempts, result.events) == (1, 0, 0, 0)
    story = await store.get_job(dead_claim.job_id)
    assert story.body_bytes > 0 and story.body_purged_at is None  # the dead letter's body
    assert (await store.get_job(done_claim.job_id)).body_bytes == 0
    assert await store.replay(all_dead=True, dry_run=True) == 1
    # A dead job whose body an older version purged cannot be replayed.
    await execute_db(store_url, "UPDATE events SET body_purged_at = 1 WHERE id = "
                                f"{dead_claim.event_id}")
    with pytest.raises(Conflict, match="purged"):
        await store.replay(job_id=dead_claim.job_id)
    assert await store.replay(all_dead=True, dry_run=True) == 0
    fresh = [c for c in await store.claim("w1", 10, LEASE_S, 5)]
    assert len(fresh) == 1 and fresh[0].body == new_event("fresh").body

    clock.advance(25 * day)  # old jobs finished 35 days ago
    now = clock()
    result = await store.purge(bodies_before_s=now - 7 * day, metadata_before_s=now - 30 * day,
                               dedupe_before_s=now - 90 * day)
    assert (result.jobs, result.attempts, result.events) == (2, 2, 0)
    with pytest.raises(NotFound):
        await store.get_job(dead_claim.job_id)
    # the dedupe key survives: the same (source, id) is still a duplicate
    assert (await store.add_events([new_event("old_dead")]))[0].duplicate

    clock.advance(60 * day)
    now = clock()
    result = await store.purge(bodies_before_s=now - 7 * day, metadata_before_s=now - 30 * day,
                               dedupe_before_s=now - 90 * day)
    assert result.events == 2
    assert not (await store.add_events([new_event("old_dead")]))[0].duplicate
    with pytest.raises(ConfigError):
        await store.purge(bodies_before_s=now - 30 * day, metadata_before_s=now - 7 * day,
                          dedupe_before_s=now - 90 * day)


async def test_purge_forgets_previous_secrets_past_their_overlap(store, clock,
                                                                 destination_factory):
    """The retention round forgets a previous secret once its overlap is over (it signs no
    more), and keeps one whose overlap still runs."""
    await destination_factory("ended")
    await destination_factory("running")
    await store.rotate_secret("ended", "whsec_" + "E" * 43 + "=", overlap_s=60)
    await store.rotate_secret("running", "whsec_" + "R" * 43 + "=", overlap_s=3600)
    far = clock() - 365 * 86400.0  # purges nothing else
    kept = await store.purge(bodies_before_s=far, metadata_before_s=far, dedupe_before_s=far)
    assert kept.previous_secrets == 0
    clock.advance(61)
    far = clock() - 365 * 86400.0
    result = await store.purge(bodies_before_s=far, metadata_before_s=far, dedupe_before_s=far)
    assert result.previous_secrets == 1
    ended, running = (await store.get_destination("ended"),
                      await store.get_destination("running"))
    assert (ended.previous_secret, ended.previous_secret_until) == (None, None)
    assert running.previous_secret is not None and running.previous_secret_until is not None


async def test_stats_per_destination_paused_and_outcomes(store, clock, destination_factory):
    """stats() reports jobs per destination and status, paused destinations with reasons,
    attempts by outcome and the delivery latency of done jobs."""
    await destination_factory("a")
    await destination_factory("b")
    await store.add_events([new_event("e1")])
    await store.set_paused("b", True, "maintenance")
    clock.advance(2.0)
    (claim,) = await store.claim("w1", 10, LEASE_S, 5)
    await store.finish([(claim, Done(), AttemptResult(started_at=clock(), duration_s=0.1,
                                                      status_code=204))])
    st = await store.stats()
    assert st.jobs_by_destination == {"a": {"done": 1}, "b": {"pending": 1}}
    assert st.paused_destinations == {"b": "maintenance"}
    assert st.attempts_by_outcome == {"delivered": 1}
    assert st.delivery_latency is not None and st.delivery_latency.count == 1
    assert st.delivery_latency.sum_s == pytest.approx(2.0)
    assert dict(st.delivery_latency.buckets)[1.0] == 0
    assert dict(st.delivery_latency.buckets)[2.5] == 1


async def test_stats_per_destination_are_one_tenants_so_names_never_collide(store):
    """Two tenants each with a destination `billing`: stats() counts and lists each one's
    own (the default tenant's unless named), never one tenant's figures under the other's
    name; the totals stay the whole service's."""
    for tenant in ("acme", "globex"):
        await store.put_tenant(tenant, TenantFields())
        await store.add_destination(name="billing", url="https://example.com/h",
                                    secret="whsec_" + "B" * 32, event_types=["*"],
                                    max_in_flight=2, tenant=tenant)
    await store.add_events([new_event(f"a{i}", tenant="acme") for i in range(3)]
                           + [new_event("g1", tenant="globex")])
    await store.set_paused("billing", True, "acme's maintenance", tenant="acme")
    acme, globex, default = (await store.stats("acme"), await store.stats("globex"),
                             await store.stats())
    assert (acme.tenant, acme.jobs_by_destination, acme.paused_destinations) == (
        "acme", {"billing": {"pending": 3}}, {"billing": "acme's maintenance"})
    assert (globex.jobs_by_destination, globex.paused_destinations) == (
        {"billing": {"pending": 1}}, {})
    assert (default.tenant, default.jobs_by_destination, default.paused_destinations) == (
        "_default", {}, {})
    assert acme.jobs_by_status["pending"] == globex.jobs_by_status["pending"] == 4
    assert acme.paused_count == globex.paused_count == default.paused_count == 1


async def test_dead_letters_page_by_before_each_exactly_once(store, clock, destination_factory):
    """Paging list_dead with before_id (the last row of the page before) returns every dead
    letter exactly once, in the one-page order, also across jobs that died at the same
    instant (a removal kills a destination's jobs at once: the id breaks the tie); a cursor
    that is no longer dead is NotFound, not a silent restart or end."""
    for name in ("a", "b", "c"):
        await destination_factory(name, max_in_flight=100)
    await store.add_events([new_event(f"e{n}") for n in range(5)])  # 15 jobs
    died = await _kill(store, clock, count=4)  # four at one instant
    clock.advance(10)
    await store.remove_destination("c")  # c's unfinished ones at another
    clock.advance(10)
    died += await _kill(store, clock, count=100)  # the rest
    whole = [d.job.id for d in await store.list_dead(limit=1000)]
    assert len(whole) == 15 and set(died) <= set(whole)

    paged: list[int] = []
    before = None
    while True:
        page = [d.job.id for d in await store.list_dead(limit=4, before_id=before)]
        paged += page
        if len(page) < 4:
            break
        before = page[-1]
    assert paged == whole
    one_tenant = await store.list_dead(limit=2, tenant="_default", before_id=whole[5])
    assert [d.job.id for d in one_tenant] == whole[6:8]

    assert await store.replay(job_id=whole[3]) == 1
    with pytest.raises(NotFound, match=f"job {whole[3]} is not a dead letter"):
        await store.list_dead(before_id=whole[3])


async def test_jobs_page_by_before_id(store, destination_factory):
    """list_jobs with before_id pages newest first by id, each job once."""
    await destination_factory("a")
    await store.add_events([new_event(f"e{n}") for n in range(7)])
    whole = [j.id for j in await store.list_jobs(limit=100)]
    paged = [j.id for j in await store.list_jobs(limit=3)]
    while len(paged) % 3 == 0:
        page = [j.id for j in await store.list_jobs(limit=3, before_id=paged[-1])]
        paged += page
        if not page:
            break
    assert paged == whole and len(whole) == 7

"""The operator's selections never mix up same-named destinations of different tenants, on
both backends: a destination NAME means the default tenant's unless a tenant is given (event
listing, lookup by the sender's id, dead letters, replay, resend, retry now), and a tenant
alone narrows to its events and destinations."""

from __future__ import annotations

import pytest

from hookline.shared.errors import InvalidInput, NotFound
from hookline.shared.models import DEFAULT_TENANT, AttemptResult, Dead, Retry
from hookline.shared.operator_models import EventFilter, JobSelection
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

SECRET = "whsec_" + "A" * 32


async def _two_tenants_same_name(store: Store) -> None:
    """`hooks` in the default tenant and in `acme`, one event each (same sender's id)."""
    await store.put_tenant("acme", TenantFields())
    for tenant in (DEFAULT_TENANT, "acme"):
        await store.add_destination(name="hooks", url="http://127.0.0.1:9/x", secret=SECRET,
                                    event_types=["*"], max_in_flight=5, tenant=tenant)
    await store.add_event(new_event("e1"))
    await store.add_event(new_event("e1", tenant="acme"))


async def _finish_all(store: Store, clock, outcome) -> None:
    claims = await store.claim("w1", 100, 30.0, 5)
    result = AttemptResult(started_at=clock(), duration_s=0.01, status_code=500)
    await store.finish([(c, outcome, result) for c in claims])


async def test_event_listing_and_lookup_by_tenant(store):
    await _two_tenants_same_name(store)

    def tenants_of(events):
        return [e.id for e in events]

    every = await store.list_events(EventFilter())
    assert len(every) == 2
    default_only = await store.list_events(EventFilter(destination="hooks"))
    acme_only = await store.list_events(EventFilter(destination="hooks", tenant="acme"))
    assert len(default_only) == len(acme_only) == 1
    assert default_only[0].id != acme_only[0].id
    assert tenants_of(await store.list_events(EventFilter(tenant="acme"))) == tenants_of(
        acme_only)
    assert tenants_of(await store.list_events(EventFilter(tenant=DEFAULT_TENANT))) == (
        tenants_of(default_only))
    assert await store.list_events(EventFilter(tenant="nobody")) == []
    # The sender's id is looked up within a tenant (the default one unless named).
    assert (await store.find_event("e1")).event.id == default_only[0].id
    assert (await store.find_event("e1", tenant="acme")).event.id == acme_only[0].id
    with pytest.raises(NotFound):
        await store.find_event("e1", tenant="nobody")
    with pytest.raises(InvalidInput) as bad:
        await store.list_events(EventFilter(tenant="no spaces"))
    assert bad.value.field == "tenant"


async def test_a_sender_id_no_default_event_has_is_found_in_the_one_tenant_that_has_it(store):
    """Without a tenant, a sender's id the default tenant has not is the event of the one
    other tenant that has it; of several, the answer names them (the first three, and how
    many more), and nothing is found; a tenant's own lookup never looks elsewhere."""
    for tenant in ("acme", "globex", "initech", "umbrella", "wayne"):
        await store.put_tenant(tenant, TenantFields())
    [only] = await store.add_events([new_event("only-acme", tenant="acme")])
    assert (await store.find_event("only-acme")).event.id == only.event_id
    with pytest.raises(NotFound, match="in tenant globex's events"):
        await store.find_event("only-acme", tenant="globex")
    for tenant in ("wayne", "globex", "umbrella", "initech", "acme"):
        await store.add_event(new_event("shared-id", tenant=tenant))
    with pytest.raises(NotFound) as several:
        await store.find_event("shared-id")
    assert str(several.value).endswith(
        "in the default tenant's events; tenants acme, globex, initech and 2 more have one: "
        "name the tenant (--tenant, tenant= or the dashboard's Tenant box)")
    with pytest.raises(NotFound, match=r"from source 'api' in any tenant$"):
        await store.find_event("nobody-has-it")


async def test_dead_letters_and_replay_by_tenant(store, clock):
    await _two_tenants_same_name(store)
    await _finish_all(store, clock, Dead(error="gave up"))
    both = await store.list_dead()
    assert len(both) == 2
    default_dead = await store.list_dead(destination="hooks")
    acme_dead = await store.list_dead(destination="hooks", tenant="acme")
    assert len(default_dead) == len(acme_dead) == 1
    assert default_dead[0].job.id != acme_dead[0].job.id
    assert [d.job.id for d in await store.list_dead(tenant="acme")] == [acme_dead[0].job.id]

    assert await store.replay(all_dead=True, destination="hooks", dry_run=True) == 1
    assert await store.replay(all_dead=True, tenant="acme", dry_run=True) == 1
    assert await store.replay(all_dead=True, destination="hooks", tenant="acme") == 1
    assert [d.job.id for d in await store.list_dead()] == [default_dead[0].job.id]


async def test_resend_and_retry_now_by_tenant(store, clock):
    await _two_tenants_same_name(store)
    await _finish_all(store, clock, Retry(delay_s=3600, error="HTTP 500"))
    acme = JobSelection(destination="hooks", tenant="acme")
    result = await store.retry_now(acme)
    assert result.count == 1
    acme_job = result.job_ids[0]
    default_result = await store.retry_now(JobSelection(destination="hooks"), dry_run=True)
    assert default_result.count == 1 and default_result.job_ids[0] != acme_job
    await _finish_all(store, clock, Dead(error="gave up"))  # only acme's job was due
    assert (await store.resend(JobSelection(destination="hooks"), dry_run=True)).count == 0
    assert (await store.resend(acme)).job_ids == (acme_job,)
    # A tenant beside a job id scopes the job: another tenant's job is not found.
    with pytest.raises(NotFound):
        await store.resend(JobSelection(job_id=acme_job, tenant=DEFAULT_TENANT))


async def test_destinations_listed_per_tenant(store):
    await _two_tenants_same_name(store)
    assert [d.tenant for d in await store.list_destinations()] == [DEFAULT_TENANT, "acme"]
    assert [d.tenant for d in await store.list_destinations("acme")] == ["acme"]
    assert await store.list_destinations("nobody") == []

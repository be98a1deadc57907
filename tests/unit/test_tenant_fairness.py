"""Fairness across tenants: tenants with due work take turns in a claim (within a tenant its
destinations do), and while destinations of more than one tenant exist no tenant holds more
than its share of a worker's slots. The choice is a pure function (properties checked with
hypothesis); the store-level tests run the real claim transaction on both backends."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.policy.delivery import choose_claims, tenant_slots
from hookline.shared.store import Store
from hookline.shared.tenant_models import TenantFields
from tests.conftest import FakeClock, new_event

SECRET = "whsec_" + "A" * 32
NOW = 1_000.0

# (late?, due since, job id, destination id) with unique job ids, destinations 0..11.
_candidates = st.lists(
    st.tuples(st.booleans(), st.floats(0.0, 900.0), st.integers(0, 11)),
    max_size=60,
).map(lambda rows: [(late, due, job_id, dest) for job_id, (late, due, dest) in enumerate(rows)])
_tenant_maps = st.dictionaries(st.integers(0, 11), st.sampled_from(["a", "b", "c"]),
                               min_size=12, max_size=12)


def test_tenants_take_turns_before_a_deep_backlog_over_many_destinations():
    """Tenant A has 40 destinations with old jobs (due since 1-400 s); B's two fresh jobs
    come in the first turns of a claim of 4, not after A's 40 oldest."""
    backlog = [(False, float(n), n, n % 40) for n in range(1, 401)]
    fresh = [(False, 950.0, 1001, 100), (False, 951.0, 1002, 101)]
    tenants = {**{d: "a" for d in range(40)}, 100: "b", 101: "b"}
    chosen, _ = choose_claims(backlog + fresh, limit=4, max_late=None, rates={}, now_s=NOW,
                              tenants=tenants)
    assert chosen == [1, 1001, 2, 1002]  # A's oldest, B's oldest, A's next destination, ...
    # Without tenants (one tenant for all) the destinations' turns alone put B last.
    alone, _ = choose_claims(backlog + fresh, limit=4, max_late=None, rates={}, now_s=NOW)
    assert alone == [1, 2, 3, 4]


def test_a_tenant_is_held_to_its_share_counting_the_slots_it_holds():
    """A holds 3 of its 4 slots (hanging endpoints): it gets 1 more, B all it offers, and the
    claim stays short rather than exceed A's share."""
    hanging = [(False, float(n), n, n % 20) for n in range(1, 101)]
    b_jobs = [(False, 500.0 + n, 1000 + n, 50) for n in range(3)]
    tenants = {**{d: "a" for d in range(20)}, 50: "b"}
    chosen, _ = choose_claims(hanging + b_jobs, limit=10, max_late=None, rates={}, now_s=NOW,
                              tenants=tenants, per_tenant=4, held_tenants={"a": 3})
    assert sorted(chosen) == [1, 1000, 1001, 1002]
    full, _ = choose_claims(hanging, limit=10, max_late=None, rates={}, now_s=NOW,
                            tenants=tenants, per_tenant=4, held_tenants={"a": 4})
    assert full == []


def test_tenant_slots_is_a_rounded_up_share_of_at_least_one():
    assert tenant_slots(64, 0.5) == 32 and tenant_slots(5, 0.5) == 3
    assert tenant_slots(1, 0.1) == 1 and tenant_slots(10, 0.3) == 3


@settings(max_examples=300, deadline=None)
@given(_candidates, st.integers(0, 70), st.sampled_from([None, 0, 3, 20]))
def test_one_tenant_for_all_chooses_as_without_tenants(candidates, limit, max_late):
    """Every destination in the same tenant: exactly the destinations-only choice."""
    everyone = {dest: DEFAULT_TENANT for dest in range(12)}
    without = choose_claims(candidates, limit=limit, max_late=max_late, rates={}, now_s=NOW)
    with_one = choose_claims(candidates, limit=limit, max_late=max_late, rates={}, now_s=NOW,
                             tenants=everyone)
    assert with_one == without


@settings(max_examples=300, deadline=None)
@given(_candidates, _tenant_maps, st.integers(0, 70),
       st.one_of(st.none(), st.integers(1, 10)), st.one_of(st.none(), st.integers(1, 20)))
def test_every_tenant_with_due_work_gets_its_turn_and_caps_hold(candidates, tenants, limit,
                                                                per_destination, per_tenant):
    """Whatever is offered: each job at most once, at most `limit`; no destination or tenant
    beyond its cap; and (no late retries here) each tenant gets at least its equal part of
    the claim, min(what it could take, limit // tenants offering), so no tenant's backlog
    takes another's turn."""
    fresh = [(False, due, job_id, dest) for _, due, job_id, dest in candidates]
    chosen, _ = choose_claims(fresh, limit=limit, max_late=None, rates={}, now_s=NOW,
                              per_destination=per_destination, tenants=tenants,
                              per_tenant=per_tenant)
    assert len(chosen) == len(set(chosen)) <= limit
    destination_of = {job_id: dest for _, _, job_id, dest in fresh}
    per_dest = Counter(destination_of[job_id] for job_id in chosen)
    per_ten = Counter(tenants[destination_of[job_id]] for job_id in chosen)
    if per_destination is not None:
        assert max(per_dest.values(), default=0) <= per_destination
    if per_tenant is not None:
        assert max(per_ten.values(), default=0) <= per_tenant
    offering = {tenants[dest] for _, _, _, dest in fresh}
    for tenant in offering:
        offered = Counter(dest for _, _, _, dest in fresh if tenants[dest] == tenant)
        could = sum(min(n, per_destination or n) for n in offered.values())
        could = min(could, per_tenant or could)
        assert per_ten[tenant] >= min(could, limit // len(offering)), (tenant, chosen)


async def _destination(store: Store, name: str, tenant: str, type_: str) -> int:
    return (await store.add_destination(name=name, url="http://127.0.0.1:9/x", secret=SECRET,
                                        event_types=[type_], max_in_flight=1000,
                                        tenant=tenant)).id


async def test_tenant_b_is_claimed_while_tenant_a_has_a_backlog_over_many_destinations(
        store: Store, clock: FakeClock):
    """Through the claim transaction: A has 400 due jobs over 40 destinations, B publishes 2
    events later; a claim of 8 takes B's 2 among A's. With A holding its share of the
    worker (the hanging endpoints case), a claim takes B's jobs only."""
    for tenant in ("a", "b"):
        await store.put_tenant(tenant, TenantFields())
    a_ids = {await _destination(store, f"a{i}", "a", f"a{i}.x") for i in range(40)}
    b_id = await _destination(store, "b0", "b", "b.x")
    await store.add_events([new_event(f"a{n}", f"a{n % 40}.x", tenant="a")
                            for n in range(400)])
    clock.advance(5.0)
    await store.add_events([new_event(f"b{n}", "b.x", tenant="b") for n in range(2)])
    claims = await store.claim("w1", 8, 30.0, 5, per_destination=32, per_tenant=32)
    per_tenant = Counter(c.tenant_id for c in claims)
    assert per_tenant == {"a": 6, "b": 2}
    assert {c.destination_id for c in claims if c.tenant_id == "a"} <= a_ids
    assert {c.destination_id for c in claims if c.tenant_id == "b"} == {b_id}
    # A already holds its 4 slots of this worker: only B's work (none left) may be claimed.
    await store.add_events([new_event(f"b{n}", "b.x", tenant="b") for n in range(2, 5)])
    capped = await store.claim("w1", 8, 30.0, 5, per_destination=32, per_tenant=4,
                               held_tenants={"a": 4})
    assert [c.tenant_id for c in capped] == ["b", "b", "b"]


async def test_the_tenant_share_does_not_apply_to_a_single_tenant(store: Store):
    """An installation without tenants (every destination in `_default`) keeps every slot:
    per_tenant is ignored while one tenant has destinations."""
    for i in range(4):
        await _destination(store, f"d{i}", DEFAULT_TENANT, f"d{i}.x")
    await store.add_events([new_event(f"e{n}", f"d{n % 4}.x") for n in range(12)])
    claims = await store.claim("w1", 10, 30.0, 5, per_tenant=2,
                               held_tenants={DEFAULT_TENANT: 2})
    assert len(claims) == 10 and {c.tenant_id for c in claims} == {DEFAULT_TENANT}

"""The claim's bounded window (StoreLogic._claim_window): a claim considers at most
`CLAIM_WINDOW` destinations that offer work, walked in id order from where the previous claim
stopped, so its cost follows the work it can take, not the destinations that exist. These
tests shrink the window to a few destinations to check what the bound must not cost: no
destination with due work starves, the caps still hold, and on PostgreSQL a claim does not
touch (lock, or wait on) the destinations of a tenant at its share."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.store import Store
from hookline.shared.store.postgres import PostgresStore
from hookline.shared.tenant_models import TenantFields
from tests.conftest import FakeClock, new_event

SECRET = "whsec_" + "A" * 32
WINDOW = 4


async def _destination(store: Store, name: str, tenant: str, max_in_flight: int = 1000) -> int:
    return (await store.add_destination(name=name, url="http://127.0.0.1:9/x", secret=SECRET,
                                        event_types=[f"{name}.x"], max_in_flight=max_in_flight,
                                        tenant=tenant)).id


async def test_no_destination_with_due_work_starves_when_the_window_is_smaller(
        store: Store, clock: FakeClock):
    """13 destinations of two tenants, 10 due jobs each, the oldest and deepest backlog on the
    last one; the window holds 4 destinations and each claim takes 4 jobs (nothing finishes,
    so every destination keeps due work). Every claim reads at most 4 destinations, and
    within two turns of the ring (8 claims) every destination has been served."""
    store.CLAIM_WINDOW = WINDOW  # type: ignore[attr-defined]  (the class default is 64)
    for tenant in ("a", "b"):
        await store.put_tenant(tenant, TenantFields())
    names = [f"d{i}" for i in range(13)]
    ids = {name: await _destination(store, name, "b" if i % 3 == 0 else "a")
           for i, name in enumerate(names)}
    await store.add_events([new_event(f"old{n}", "d12.x", tenant="b") for n in range(30)])
    clock.advance(5.0)
    await store.add_events([new_event(f"{name}-{n}", f"{name}.x",
                                      tenant="b" if i % 3 == 0 else "a")
                            for n in range(10) for i, name in enumerate(names)])
    served: Counter[int] = Counter()
    for _ in range(8):
        claims = await store.claim("w1", WINDOW, 30.0, 5)
        assert len(claims) == WINDOW
        assert len({c.destination_id for c in claims}) <= WINDOW
        served.update(c.destination_id for c in claims)
    assert set(served) == set(ids.values()), sorted(set(ids.values()) - set(served))


async def test_the_window_skips_what_the_claim_could_not_take(store: Store):
    """Destinations a claim could not take from do not use up its window: five of a tenant
    at its share, one full for this worker, one at its max_in_flight, one paused, all with
    lower ids. The window of 4 still holds the 4 destinations that offer work."""
    store.CLAIM_WINDOW = WINDOW  # type: ignore[attr-defined]
    for tenant in ("a", "b"):
        await store.put_tenant(tenant, TenantFields())
    for i in range(5):
        await _destination(store, f"a{i}", "a")
    full = await _destination(store, "b-full", "b")
    busy = await _destination(store, "b-busy", "b", max_in_flight=1)
    paused = await _destination(store, "b-paused", "b")
    offering = [await _destination(store, f"b{i}", "b") for i in range(4)]
    await store.add_events([new_event("busy-0", "b-busy.x", tenant="b")])
    [running] = await store.claim("other", 1, 30.0, 5)  # b-busy's only slot, held elsewhere
    assert running.destination_id == busy
    await store.add_events([new_event(f"a{i}-{n}", f"a{i}.x", tenant="a")
                            for i in range(5) for n in range(2)])
    await store.add_events([new_event(f"{name}-{n}", f"{name}.x", tenant="b") for n in range(2)
                            for name in ("b-full", "b-busy", "b-paused", "b0", "b1", "b2",
                                         "b3")])
    await store.set_paused("b-paused", True, tenant="b")
    claims = await store.claim("w1", 8, 30.0, 5, per_destination=2, held={full: 2},
                               per_tenant=8, held_tenants={"a": 8})
    assert Counter(c.destination_id for c in claims) == {d: 2 for d in offering}
    assert paused not in offering


async def test_paused_destinations_with_backlogs_do_not_hide_the_live_ones(store: Store):
    """Most destinations paused with backlogs and removed ones between: the walk steps over
    them (destinations_live), and the live destinations after them are claimed."""
    store.CLAIM_WINDOW = WINDOW  # type: ignore[attr-defined]
    names = [f"d{i}" for i in range(12)]
    ids = {name: await _destination(store, name, DEFAULT_TENANT) for name in names}
    await store.add_events([new_event(f"{name}-{n}", f"{name}.x") for n in range(3)
                            for name in names])
    for name in names[:9]:
        await store.set_paused(name, True)
    await store.remove_destination("d9")
    claims = await store.claim("w1", 8, 30.0, 5)
    assert Counter(c.destination_id for c in claims) == {ids["d10"]: 3, ids["d11"]: 3}


async def test_a_claim_does_not_wait_on_the_destinations_of_a_tenant_at_its_share(pg_url):
    """PostgreSQL: another transaction holds row locks on every destination of tenant a (as
    a slow claim of another host would); a claim whose worker holds a's share takes b's job
    without waiting, because it neither locks nor reads a's destinations (the fairness
    scenario's tenant b waited behind a's 40 destinations there)."""
    import asyncpg

    async with PostgresStore(pg_url) as store:
        for tenant in ("a", "b"):
            await store.put_tenant(tenant, TenantFields())
        for i in range(3):
            await _destination(store, f"a{i}", "a")
        b_id = await _destination(store, "b0", "b")
        await store.add_events([new_event(f"a{i}-{n}", f"a{i}.x", tenant="a")
                                for i in range(3) for n in range(4)])
        await store.add_events([new_event("b-1", "b0.x", tenant="b")])
        locker = await asyncpg.connect(pg_url)
        try:
            async with locker.transaction():
                await locker.fetch("SELECT id FROM destinations WHERE tenant_id = 'a' "
                                   "FOR NO KEY UPDATE")
                claims = await asyncio.wait_for(
                    store.claim("w1", 8, 30.0, 5, per_tenant=2, held_tenants={"a": 2}),
                    timeout=20.0)
        finally:
            await locker.close()
        assert [c.destination_id for c in claims] == [b_id]


@pytest.mark.parametrize("analyzed", [False, True], ids=["no_statistics", "analyzed"])
async def test_the_window_reads_only_destinations_with_pending_jobs(pg_url, analyzed):
    """PostgreSQL: 300 live destinations, 2 holding pending jobs (4,000 between them): the
    window's and the probe's scans return at most a few rows each, and claim_window walks 2
    destinations, not 300, with or without table statistics."""
    import asyncpg

    from hookline.shared.store.postgres import _query  # the named SQL itself

    async with PostgresStore(pg_url) as store:
        for i in range(300):
            await store.add_destination(name=f"d{i}", url="http://127.0.0.1:9/",
                                        event_types=[f"d{i}.x"], secret=SECRET,
                                        max_in_flight=50)
        for batch in range(8):
            await store.add_events([new_event(f"e{batch}-{i}", f"d{150 + i % 2}.x")
                                    for i in range(500)])
    conn = await asyncpg.connect(pg_url)
    try:
        if analyzed:
            await conn.execute("ANALYZE")
        values = {"after": 0, "upto": 2**62, "window": 64, "expired": True,
                  "full_destinations": [], "capped_tenants": [], "test_now_s": None}
        sql, names = _query("claim_window")
        [[plan]] = await conn.fetch("EXPLAIN (ANALYZE, FORMAT JSON) " + sql,
                                    *[values[n] for n in names])
        scans = _scan_rows(json.loads(plan)[0]["Plan"])
        assert scans and max(rows for _, rows in scans) <= 3, scans
        found = await conn.fetch(sql, *[values[n] for n in names])
        assert sorted(r["id"] for r in found) == [151, 152]
        # the claim's probe walks the same way, stopping at the first due job
        sql, names = _query("claim_probe")
        probe_values = {"max_attempts": 5, "test_now_s": None}
        [[plan]] = await conn.fetch("EXPLAIN (ANALYZE, FORMAT JSON) " + sql,
                                    *[probe_values[n] for n in names])
        scans = _scan_rows(json.loads(plan)[0]["Plan"])
        assert scans and max(rows for _, rows in scans) <= 3, scans
        assert await conn.fetchval(sql, *[probe_values[n] for n in names]) is True
    finally:
        await conn.close()


def _scan_rows(plan: dict) -> list[tuple[str, int]]:  # type: ignore[type-arg]
    """(node type, actual rows per loop) of every scan node in an EXPLAIN (ANALYZE, FORMAT
    JSON) plan tree."""
    found = [(plan["Node Type"], plan["Actual Rows"])] if "Scan" in plan["Node Type"] else []
    for child in plan.get("Plans", []):
        found += _scan_rows(child)
    return found

"""Tenants in the store, on both backends: fan-out through the subscription index reaches
only the event's tenant's subscribed destinations, honours every destination change committed
before the event, and (tenant, source, id) is the idempotency key; tenant CRUD, limits,
refusals and deletion."""

from __future__ import annotations

import asyncio
import sys

import pytest

from hookline.shared.errors import Conflict, InvalidInput, NotFound
from hookline.shared.models import DEFAULT_TENANT, Accepted, Duplicate, TenantRefused
from hookline.shared.process.spawn import child_import_env
from hookline.shared.store import Store, fan_out_view
from hookline.shared.store.fan_out_view import subscription_patterns
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

SECRET = "whsec_" + "A" * 32


async def add(store: Store, name: str, types: list[str], tenant: str = DEFAULT_TENANT) -> int:
    return (await store.add_destination(name=name, url="http://127.0.0.1:9/x", secret=SECRET,
                                        event_types=types, max_in_flight=5, tenant=tenant)).id


async def reached(store: Store, event_id: str, type_: str, tenant: str = DEFAULT_TENANT,
                  ) -> list[str]:
    """Names of the destinations one new event's jobs went to."""
    result = await store.add_event(new_event(event_id, type_, tenant=tenant))
    assert isinstance(result, Accepted), result
    names = {j.id: j.destination for j in await store.list_jobs(limit=10_000)}
    return sorted(names[job_id] for job_id in result.job_ids)


def test_candidate_patterns_are_the_type_its_prefixes_and_star():
    assert subscription_patterns("a.b.c") == ["a.b.c", "*", "a.*", "a.b.*"]
    assert subscription_patterns("push") == ["push", "*"]
    assert subscription_patterns("a.") == ["a.", "*", "a.*"]


async def test_fan_out_reaches_only_the_tenants_subscribed_destinations(store):
    for tenant in ("acme", "globex"):
        await store.put_tenant(tenant, TenantFields())
    await add(store, "all", ["*"], "acme")
    await add(store, "invoices", ["invoice.*"], "acme")
    await add(store, "paid", ["invoice.paid"], "acme")
    await add(store, "deep", ["invoice.paid.*"], "acme")
    await add(store, "all", ["*"], "globex")  # same name, other tenant
    await add(store, "default-all", ["*"])
    assert await reached(store, "e1", "invoice.paid", "acme") == ["all", "invoices", "paid"]
    assert await reached(store, "e2", "invoice.paid.late", "acme") == [
        "all", "deep", "invoices"]
    assert await reached(store, "e3", "user.created", "acme") == ["all"]
    assert await reached(store, "e4", "invoice.paid", "globex") == ["all"]
    assert await reached(store, "e5", "invoice.paid") == ["default-all"]
    # The same (source, id) is a new event for another tenant, a duplicate for the same one.
    assert isinstance(await store.add_event(new_event("e1", tenant="globex")), Accepted)
    assert isinstance(await store.add_event(new_event("e1", tenant="acme")), Duplicate)


async def test_fan_out_honours_changes_committed_just_before_the_event(store):
    await store.put_tenant("acme", TenantFields())
    await add(store, "a", ["x.*"], "acme")
    assert await reached(store, "e1", "x.y", "acme") == ["a"]
    await store.update_destination("a", tenant="acme", event_types=["z"])
    assert await reached(store, "e2", "x.y", "acme") == []
    assert await reached(store, "e3", "z", "acme") == ["a"]
    await store.set_paused("a", True, tenant="acme")  # paused: its jobs wait, still made
    assert await reached(store, "e4", "z", "acme") == ["a"]
    await store.remove_destination("a", tenant="acme")
    assert await reached(store, "e5", "z", "acme") == []
    await add(store, "a", ["z"], "acme")  # the freed name, a new destination
    assert await reached(store, "e6", "z", "acme") == ["a"]


# Another process's store: it reads one destination change per line on stdin, commits it,
# and answers "ok" once committed (its other output lines are logs).
_CHANGER = """
import asyncio, sys
from hookline.shared.store import open_store
from hookline.shared.tenant_models import TenantFields

async def main():
    store = open_store(sys.argv[1])
    await store.open()
    for line in sys.stdin:
        verb, name, *types = line.split()
        if verb == "add":
            await store.add_destination(name=name, url="http://127.0.0.1:9/x", tenant="acme",
                                        secret="whsec_" + "A" * 32, event_types=types,
                                        max_in_flight=5)
        elif verb == "types":
            await store.update_destination(name, tenant="acme", event_types=types)
        elif verb == "pause":
            await store.set_paused(name, True, tenant="acme")
        elif verb == "remove":
            await store.remove_destination(name, tenant="acme")
        elif verb == "filter":
            await store.update_destination(name, tenant="acme", filter={"data.absent": 1})
        elif verb == "disable":
            await store.put_tenant(name, TenantFields(disabled=True))
        print("ok", flush=True)
    await store.close()

asyncio.run(main())
"""


@pytest.mark.parametrize("index_limit", [fan_out_view.WHOLE_INDEX_LIMIT, 0],
                         ids=["whole-index", "key-by-key"])
async def test_fan_out_honours_changes_another_process_committed_just_before(
        store, store_url, index_limit, monkeypatch):
    """A change committed by another process (another host, on PostgreSQL) reaches the very
    next event, although this store remembers fan-out's answers between events (the
    version it reads in each ingest transaction moved): created, subscriptions changed,
    paused (jobs still made), removed, a payload filter set, the tenant disabled. Each
    event repeats a type published before the change, so the remembered answer is the
    stale one. Both ways of remembering: the whole index, and key by key (an index past
    the limit)."""
    monkeypatch.setattr(fan_out_view, "WHOLE_INDEX_LIMIT", index_limit)
    await store.put_tenant("acme", TenantFields())
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHANGER, store_url, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, env=child_import_env())

    async def change(line: str) -> None:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(line.encode() + b"\n")
        await child.stdin.drain()
        while (answer := await asyncio.wait_for(child.stdout.readline(), 30)) != b"ok\n":
            assert answer, "the other process ended"  # else a log line: read on

    try:
        assert await reached(store, "e0", "x.y", "acme") == []
        await change("add a x.*")
        await change("add b x.y")
        assert await reached(store, "e1", "x.y", "acme") == ["a", "b"]
        await change("types a *")
        assert await reached(store, "e2", "z", "acme") == ["a"]
        await change("types b z.*")
        assert await reached(store, "e3", "x.y", "acme") == ["a"]
        await change("pause a")
        assert await reached(store, "e4", "z.q", "acme") == ["a", "b"]
        await change("remove a")
        assert await reached(store, "e5", "z.q", "acme") == ["b"]
        await change("filter b")
        assert await reached(store, "e6", "z.q", "acme") == []
        await change("add c x.y")
        assert await reached(store, "e7", "x.y", "acme") == ["c"]
        await change("disable acme")
        refused = await store.add_event(new_event("e8", "x.y", tenant="acme"))
        assert isinstance(refused, TenantRefused) and refused.reason == "tenant_disabled"
    finally:
        assert child.stdin is not None
        child.stdin.close()
        await asyncio.wait_for(child.wait(), 30)


async def test_unknown_and_disabled_tenants_are_refused_in_a_mixed_batch(store):
    await store.put_tenant("acme", TenantFields())
    await store.put_tenant("off", TenantFields(disabled=True))
    await add(store, "a", ["*"], "acme")
    results = await store.add_events([new_event("e1", tenant="acme"),
                                      new_event("e2", tenant="nobody"),
                                      new_event("e3", tenant="off"),
                                      new_event("e4", tenant="acme")])
    assert [type(r) for r in results] == [Accepted, TenantRefused, TenantRefused, Accepted]
    assert [r.reason for r in results if isinstance(r, TenantRefused)] == [
        "tenant_not_found", "tenant_disabled"]
    assert (await store.stats()).events == 2  # nothing of the refused ones is stored
    created = await store.add_event(new_event("e5", tenant="newco"), create_tenants=True)
    assert isinstance(created, Accepted) and created.job_ids == ()
    assert (await store.get_tenant("newco")).disabled is False


async def test_tenant_crud_limits_and_delete(store):
    tenant, created = await store.put_tenant("acme", TenantFields(
        name="Acme", metadata='{"plan":"gold"}', max_destinations=1))
    assert created and tenant.metadata == {"plan": "gold"} and tenant.max_destinations == 1
    tenant, created = await store.put_tenant("acme", TenantFields(name="Acme Inc"))
    assert not created and tenant.name == "Acme Inc" and tenant.max_destinations == 1
    with pytest.raises(InvalidInput):
        await store.put_tenant("_mine", TenantFields())
    await add(store, "a", ["*"], "acme")
    with pytest.raises(Conflict):  # max_destinations
        await add(store, "b", ["*"], "acme")
    await store.put_tenant("acme", TenantFields(clear_max_destinations=True))
    await add(store, "b", ["*"], "acme")
    with pytest.raises(NotFound):
        await add(store, "a", ["*"], "nobody")
    for i in range(3):
        await store.put_tenant(f"t{i}", TenantFields())
    ids = [t.id for t in await store.list_tenants(limit=2)]
    assert ids == [DEFAULT_TENANT, "acme"]
    assert [t.id for t in await store.list_tenants(after="acme", limit=10)] == ["t0", "t1", "t2"]
    assert [t.id for t in await store.list_tenants(prefix="t")] == ["t0", "t1", "t2"]
    epoch = (await store.get_tenant("acme")).token_epoch
    assert (await store.revoke_tenant_tokens("acme")).token_epoch != epoch
    # Disabling revokes the tokens (enabling again does not bring them back); other edits,
    # disabling twice and enabling keep the epoch.
    before = (await store.get_tenant("t0")).token_epoch
    assert (await store.put_tenant("t0", TenantFields(name="T")))[0].token_epoch == before
    off = (await store.put_tenant("t0", TenantFields(disabled=True)))[0].token_epoch
    assert off != before
    assert (await store.put_tenant("t0", TenantFields(disabled=True)))[0].token_epoch == off
    assert (await store.put_tenant("t0", TenantFields(disabled=False)))[0].token_epoch == off

    await store.add_events([new_event("e1", tenant="acme"), new_event("e2", tenant="acme")])
    plan = await store.delete_tenant("acme", dry_run=True)
    assert (plan.destinations, plan.unfinished_jobs) == (2, 4)
    assert len(await store.list_destinations("acme")) == 2
    done = await store.delete_tenant("acme")
    assert (done.destinations, done.unfinished_jobs, done.dry_run) == (2, 4, False)
    assert await store.list_destinations("acme") == []
    assert {j.status for j in await store.list_jobs()} == {"dead"}
    with pytest.raises(NotFound, match="it was deleted, so it has no destinations or stats "
                                       "and nothing can be changed for it; its events and "
                                       "jobs are kept"):
        await store.get_tenant("acme")  # says how its kept history is found
    with pytest.raises(NotFound, match=r"^no tenant 'nobody'$"):
        await store.get_tenant("nobody")
    # A listing may name it: its history is kept (read-only); an id never used may not.
    assert await store.tenant_was_deleted("acme") is True
    assert await store.tenant_was_deleted("t0") is False
    assert await store.tenant_was_deleted(DEFAULT_TENANT) is False
    with pytest.raises(NotFound, match=r"^no tenant 'nobody'$"):
        await store.tenant_was_deleted("nobody")
    assert await store.deleted_tenants(["t0", "acme", "nobody", DEFAULT_TENANT, "acme"]) == {
        "acme", "nobody"}
    assert await store.deleted_tenants([]) == set()
    with pytest.raises(Conflict):
        await store.delete_tenant(DEFAULT_TENANT)
    # Its events stay for their history: a tenant under the same id would be shown them (the
    # tenant views read by tenant id), so the id is not taken again, nor created by a publish.
    with pytest.raises(Conflict, match="was deleted"):
        await store.put_tenant("acme", TenantFields())
    published = await store.add_event(new_event("e9", tenant="acme"), create_tenants=True)
    assert isinstance(published, TenantRefused) and published.reason == "tenant_not_found"
    with pytest.raises(NotFound):
        await store.get_tenant("acme")
    # Unless the operator says it is the same customer (an accidental delete undone).
    await store.put_tenant("undone", TenantFields())
    await store.add_event(new_event("u1", tenant="undone"))
    await store.delete_tenant("undone")
    with pytest.raises(Conflict, match="adopt_history"):
        await store.put_tenant("undone", TenantFields(name="Undone"))
    back, created = await store.put_tenant("undone", TenantFields(adopt_history=True))
    assert created and back.id == "undone"
    far = await store.now_s() + 10
    await store.purge(bodies_before_s=far, metadata_before_s=far, dedupe_before_s=far)
    with pytest.raises(NotFound, match=r"^no tenant 'acme'$"):  # no history left to list
        await store.tenant_was_deleted("acme")
    # Once retention purged them, created again, it starts empty and its predecessor's
    # tokens do not carry over.
    again, created = await store.put_tenant("acme", TenantFields())
    assert created and again.token_epoch != epoch
    # A test delivery is counted as ingest counts an event; every figure /metrics reads
    # equals a count of the rows after all of the above (nothing for the repair to fix).
    await add(store, "c", ["*"], "acme")
    await store.send_test_event("c", tenant="acme")
    assert await store.recount_metrics() == []

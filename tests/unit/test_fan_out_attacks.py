"""Attacks on the fan-out memory (shared/store/fan_out_view.py), written by a reviewer asked
to break it: a store that remembers must fan every event out exactly as a transaction that
remembers nothing would, whatever another store (another process) committed before the event
or during it, and remembering must not make ingest wait on other writers."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from hookline.shared.errors import Conflict, NotFound
from hookline.shared.models import DEFAULT_TENANT, Accepted, NewEvent, TenantRefused
from hookline.shared.store import Store, fan_out_view
from hookline.shared.store.ingest_tx import add_events_tx
from hookline.shared.tenant_models import TenantFields
from tests.conftest import opened_store, query_db

SECRET = "whsec_" + "A" * 32
TENANTS = [DEFAULT_TENANT, "acme", "globex", "initech"]
TYPES = ["a", "a.b", "a.b.c", "x.y", "hookline.destination.paused"]
PATTERNS = ["*", "a.*", "a.b", "a.b.*", "a.b.c", "x.*", "x.y", "a",
            "hookline.destination.paused", "hookline.*"]
FILTERS: list[Any] = [None, {"data.k": 1}, {"data.k": {"$neq": 1}},
                      {"tenant.metadata.plan": "pro"}, {"type": {"$startsWith": "a"}}]


async def _outcome(store_url: str, result: Any) -> Any:
    if isinstance(result, TenantRefused):
        return ("refused", result.reason)
    assert isinstance(result, Accepted), result
    if not result.job_ids:
        return ("accepted", [])
    found = await query_db(store_url, "SELECT destination_id FROM jobs WHERE id IN ("
                           + ", ".join(str(j) for j in result.job_ids) + ")")
    return ("accepted", sorted(int(r["destination_id"]) for r in found))


@pytest.mark.parametrize("index_limit", [50_000, 0, 6], ids=["whole", "key-by-key", "switch"])
@pytest.mark.parametrize("seed", [1, 2])
async def test_remembering_store_fans_out_as_one_that_remembers_nothing(
        store: Store, store_url: str, index_limit: int, seed: int,
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(fan_out_view, "WHOLE_INDEX_LIMIT", index_limit)
    monkeypatch.setattr(fan_out_view, "MAX_REMEMBERED", 12)
    rng = random.Random(seed)
    names: dict[str, set[str]] = {t: set() for t in TENANTS}
    counter = 0
    async with opened_store(store_url) as other:
        for step in range(150):
            changer = rng.choice([other, other, store])
            op = rng.randrange(9)
            tenant = rng.choice(TENANTS)
            try:
                if op == 0 and tenant != DEFAULT_TENANT:
                    plan = rng.choice(["pro", "free"])
                    await changer.put_tenant(tenant, TenantFields(
                        disabled=rng.choice([None, False, True]),
                        metadata=json.dumps({"plan": plan})))
                elif op == 1 and tenant != DEFAULT_TENANT and rng.random() < 0.4:
                    await changer.delete_tenant(tenant)
                    names[tenant].clear()
                elif op in (2, 3):
                    name = f"d{step}"
                    await changer.add_destination(
                        name=name, url="http://127.0.0.1:9/x", secret=SECRET,
                        event_types=rng.sample(PATTERNS, rng.randint(1, 3)), max_in_flight=5,
                        tenant=tenant, filter=rng.choice(FILTERS))
                    names[tenant].add(name)
                elif op == 4 and names[tenant]:
                    await changer.update_destination(
                        rng.choice(sorted(names[tenant])), tenant=tenant,
                        event_types=rng.sample(PATTERNS, rng.randint(1, 3)))
                elif op == 5 and names[tenant]:
                    await changer.update_destination(
                        rng.choice(sorted(names[tenant])), tenant=tenant,
                        filter=rng.choice(FILTERS))
                elif op == 6 and names[tenant]:
                    name = rng.choice(sorted(names[tenant]))
                    await changer.remove_destination(name, tenant=tenant)
                    names[tenant].discard(name)
                elif op == 7 and names[tenant]:
                    await changer.set_paused(rng.choice(sorted(names[tenant])),
                                             rng.random() < 0.5, tenant=tenant)
            except (NotFound, Conflict):
                pass
            for _ in range(rng.randint(1, 2)):
                create = rng.random() < 0.3
                specs = [(rng.choice(TYPES), rng.choice(TENANTS),
                          json.dumps({"k": rng.randint(0, 1)}).encode())
                         for _ in range(rng.randint(1, 4))]
                counter += 1
                mine = [NewEvent(source="api", source_event_id=f"m{counter}.{i}", type=kind,
                                 body=body, tenant=publisher)
                        for i, (kind, publisher, body) in enumerate(specs)]
                got = [await _outcome(store_url, r)
                       for r in await store.add_events(mine, create_tenants=create)]
                theirs = [NewEvent(source="api", source_event_id=f"t{counter}.{i}", type=kind,
                                   body=body, tenant=publisher)
                          for i, (kind, publisher, body) in enumerate(specs)]
                truth = await other._transact(  # type: ignore[attr-defined]
                    add_events_tx(theirs, create_tenants=create, memory=None), write=False)
                expected = [await _outcome(store_url, r) for r in truth]
                assert got == expected, (step, specs, create)


@pytest.mark.parametrize("remembering", [True, False], ids=["memory", "no-memory"])
async def test_pg_a_change_committed_between_the_two_reads_loses_the_event(
        pg_url: str, remembering: bool, monkeypatch: pytest.MonkeyPatch):
    """PostgreSQL, key by key: when the version moved since the memory's label, read_fan_out
    reads what the memory lacked in one statement and what it held in a second one; under
    READ COMMITTED each has its own snapshot. A destination that moves from `x.y.*` to
    `x.y.w` between them is subscribed to `x.y.w` before and after, yet the event reaches
    it in neither statement: fan-out sees a state that never existed."""
    from hookline.shared.store import postgres

    monkeypatch.setattr(fan_out_view, "WHOLE_INDEX_LIMIT", 0)
    hook: list[Any] = []
    run = postgres._Tx.run

    async def run_then_commit_a_change(self: Any, op: Any) -> Any:
        answer = await run(self, op)
        if op.name == "fan_out_view" and hook:
            await hook.pop()()
        return answer

    monkeypatch.setattr(postgres._Tx, "run", run_then_commit_a_change)
    async with opened_store(pg_url) as store, opened_store(pg_url) as other:
        await other.put_tenant("acme", TenantFields())
        for name, types in (("d", ["x.y.*"]), ("e", ["q"])):
            await other.add_destination(name=name, url="http://127.0.0.1:9/x", secret=SECRET,
                                        event_types=types, max_in_flight=5, tenant="acme")
        first = await store.add_event(NewEvent(source="api", source_event_id="e1",
                                               type="x.y.z", body=b"{}", tenant="acme"))
        assert isinstance(first, Accepted) and len(first.job_ids) == 1  # learnt x.y.z's keys
        await other.update_destination("e", tenant="acme", event_types=["r"])  # unrelated
        hook.append(lambda: other.update_destination("d", tenant="acme",
                                                     event_types=["x.y.w"]))
        event = NewEvent(source="api", source_event_id="e2", type="x.y.w", body=b"{}",
                         tenant="acme")
        memory = getattr(store, "fan_out_memory") if remembering else None  # noqa: B009
        [second] = await store._transact(  # type: ignore[attr-defined]
            add_events_tx([event], memory=memory), write=False)
        assert not hook  # the change was committed between the two statements
        assert isinstance(second, Accepted)
        # `d` took x.y.w before the change (x.y.*) and after it (x.y.w): one job either way.
        assert len(second.job_ids) == 1, second


@pytest.mark.parametrize("index_limit", [50_000, 0], ids=["whole", "key-by-key"])
async def test_concurrent_ingest_never_labels_an_answer_with_a_version_it_was_not_read_at(
        store_url: str, index_limit: int, monkeypatch: pytest.MonkeyPatch):
    """Many ingest transactions of one store at once (the pool), destination and tenant
    changes committed by another store in between: whenever the memory's label is the
    database's version, every answer it holds is the database's."""
    import asyncio

    monkeypatch.setattr(fan_out_view, "WHOLE_INDEX_LIMIT", index_limit)
    rng = random.Random(7)
    counter = 0
    async with opened_store(store_url) as store, opened_store(store_url) as other:
        for t in TENANTS[1:]:
            await other.put_tenant(t, TenantFields())
        names: list[tuple[str, str]] = []
        memory: Any = getattr(store, "fan_out_memory")  # noqa: B009
        checked = 0
        for round_ in range(40):
            async def publish() -> None:
                nonlocal counter
                counter += 1
                events = [NewEvent(source="api", source_event_id=f"c{counter}.{i}",
                                   type=rng.choice(TYPES), body=b'{"k": 1}',
                                   tenant=rng.choice(TENANTS)) for i in range(3)]
                await store.add_events(events, create_tenants=rng.random() < 0.2)

            async def change(i: int, round_: int = round_) -> None:
                tenant = rng.choice(TENANTS)
                try:
                    if rng.random() < 0.5 or not names:
                        name = f"r{round_}.{i}"
                        await other.add_destination(
                            name=name, url="http://127.0.0.1:9/x", secret=SECRET,
                            event_types=rng.sample(PATTERNS, 2), max_in_flight=5,
                            tenant=tenant, filter=rng.choice(FILTERS))
                        names.append((tenant, name))
                    elif rng.random() < 0.5:
                        t, name = rng.choice(names)
                        await other.update_destination(name, tenant=t,
                                                       event_types=rng.sample(PATTERNS, 2))
                    elif tenant != DEFAULT_TENANT:
                        await other.put_tenant(tenant, TenantFields(
                            disabled=rng.random() < 0.3))
                except (NotFound, Conflict):
                    pass

            await asyncio.gather(*[publish() for _ in range(8)], *[change(i) for i in range(2)])
            await asyncio.gather(*[publish() for _ in range(4)])
            label = memory.version
            keys, tenants = set(memory.subscriptions), set(memory.tenants)
            version, truth = await other._transact(  # type: ignore[attr-defined]
                fan_out_view._read(keys, tenants), write=False)
            if version != label or memory.version != label:
                continue
            checked += 1
            for key in keys:
                assert memory.subscriptions[key] == truth.view.subscriptions[key], key
            for t in tenants:
                assert memory.tenants[t] == truth.tenants[t], t
        assert checked


async def test_migrate_store_under_an_open_postgres_store_is_honoured(
        pg_url: str, tmp_path: Any):
    """`hookline migrate-store` into a PostgreSQL database a store already remembers (empty):
    the copied tenants and destinations reach the store's next events."""
    from hookline.shared.store.copy import copy_sqlite_to_postgres
    from hookline.shared.store.sqlite import SqliteStore

    source = str(tmp_path / "src.db")
    async with SqliteStore(source) as old:
        await old.put_tenant("acme", TenantFields())
        await old.add_destination(name="d", url="http://127.0.0.1:9/x", secret=SECRET,
                                  event_types=["*"], max_in_flight=5, tenant="acme")
        await old.add_destination(name="z", url="http://127.0.0.1:9/x", secret=SECRET,
                                  event_types=["push"], max_in_flight=5)
    async with opened_store(pg_url) as store:
        refused = await store.add_event(NewEvent(source="api", source_event_id="a",
                                                 type="push", body=b"{}", tenant="acme"))
        assert isinstance(refused, TenantRefused)  # remembered: no acme, nothing subscribed
        memory: Any = getattr(store, "fan_out_memory")  # noqa: B009
        assert memory.recall((), ())[1] is not None  # the whole (empty) index
        await copy_sqlite_to_postgres(source, pg_url)
        second = await store.add_event(NewEvent(source="api", source_event_id="b",
                                                type="push", body=b"{}"))
        assert isinstance(second, Accepted) and len(second.job_ids) == 1
        third = await store.add_event(NewEvent(source="api", source_event_id="c",
                                               type="push", body=b"{}", tenant="acme"))
        assert isinstance(third, Accepted) and len(third.job_ids) == 1


@pytest.mark.parametrize("index_limit", [50_000, 0], ids=["whole", "key-by-key"])
async def test_pg_a_tenant_created_disabled_by_another_host_between_statements(
        pg_url: str, index_limit: int, monkeypatch: pytest.MonkeyPatch):
    """create_tenants: fan-out's view says the tenant is missing; another host creates it,
    disabled, before this transaction's create_tenants statement: the event is refused, and
    so is the next one."""
    from hookline.shared.store import postgres

    monkeypatch.setattr(fan_out_view, "WHOLE_INDEX_LIMIT", index_limit)
    hook: list[Any] = []
    run = postgres._Tx.run

    async def run_then_commit_a_change(self: Any, op: Any) -> Any:
        answer = await run(self, op)
        if op.name in ("fan_out_view", "fan_out_index") and hook:
            await hook.pop()()
        return answer

    monkeypatch.setattr(postgres._Tx, "run", run_then_commit_a_change)
    async with opened_store(pg_url) as store, opened_store(pg_url) as other:
        await store.add_event(NewEvent(source="api", source_event_id="e0", type="a",
                                       body=b"{}", tenant="acme"), create_tenants=True)
        hook.append(lambda: other.put_tenant("globex", TenantFields(disabled=True)))
        first = await store.add_event(NewEvent(source="api", source_event_id="e1", type="a",
                                               body=b"{}", tenant="globex"),
                                      create_tenants=True)
        assert not hook
        assert isinstance(first, TenantRefused) and first.reason == "tenant_disabled", first
        again = await store.add_event(NewEvent(source="api", source_event_id="e2", type="a",
                                               body=b"{}", tenant="globex"),
                                      create_tenants=True)
        assert isinstance(again, TenantRefused) and again.reason == "tenant_disabled", again


async def test_a_process_whose_index_once_passed_the_limit_learns_key_by_key_after(
        store: Store, monkeypatch: pytest.MonkeyPatch):
    """Once the index exceeded WHOLE_INDEX_LIMIT, the process learns key by key until it
    restarts, as documented (reading a large index whole after every change would cost
    more), and fans out right when the index shrinks again."""
    monkeypatch.setattr(fan_out_view, "WHOLE_INDEX_LIMIT", 3)
    for i in range(4):
        await store.add_destination(name=f"d{i}", url="http://127.0.0.1:9/x", secret=SECRET,
                                    event_types=["a"], max_in_flight=5)
    first = await store.add_event(NewEvent(source="api", source_event_id="e0", type="a",
                                           body=b"{}"))
    assert isinstance(first, Accepted) and len(first.job_ids) == 4
    memory: Any = getattr(store, "fan_out_memory")  # noqa: B009
    assert memory.too_big
    for i in range(3):
        await store.remove_destination(f"d{i}")
    second = await store.add_event(NewEvent(source="api", source_event_id="e1", type="a",
                                            body=b"{}"))
    assert isinstance(second, Accepted) and len(second.job_ids) == 1
    assert memory.too_big and memory.recall((), ())[1] is None


async def test_pg_auto_creating_a_tenant_waits_for_any_unrelated_destination_change(
        pg_url: str):
    """PostgreSQL: every change a memory depends on updates the one fan_out_version row, so
    it holds that row's lock until it commits. An ingest that auto-creates a tenant
    (create_tenants) must not update the row (a tenant's creation does not move the
    version), or it would wait for any uncommitted destination change of any tenant. Here:
    another tenant's destination edit stays uncommitted for 1 s (an ingest takes
    milliseconds; one that waited would wait for the whole of it); the ingest of an event for
    a new tenant does not wait for it."""
    import asyncio
    import time

    import asyncpg

    async with opened_store(pg_url) as store:
        await store.put_tenant("globex", TenantFields())
        await store.add_destination(name="g", url="http://127.0.0.1:9/x", secret=SECRET,
                                    event_types=["a"], max_in_flight=5, tenant="globex")
        conn = await asyncpg.connect(pg_url)
        try:
            tx = conn.transaction()
            await tx.start()
            await conn.execute("UPDATE destinations SET event_types = '[\"b\"]' "
                               "WHERE name = 'g'")
            started = time.monotonic()
            task = asyncio.create_task(store.add_event(
                NewEvent(source="api", source_event_id="e1", type="a", body=b"{}",
                         tenant="acme"), create_tenants=True))
            await asyncio.sleep(1)
            blocked = not task.done()
            await tx.rollback()
            await task
            waited = time.monotonic() - started
        finally:
            await conn.close()
        assert not blocked, f"the ingest of an unrelated new tenant waited {waited:.1f} s"

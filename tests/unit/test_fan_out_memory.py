"""The fan-out answers a store remembers between ingest transactions
(shared/store/fan_out_view.py): they are used while the database's fan-out version stands,
every change fan-out depends on moves it (on both backends), and the memory stays bounded.
How a change made by another process reaches the next event is tested with the tenants
(tests/unit/test_store_tenants.py)."""

from __future__ import annotations

from typing import Any

import pytest

from hookline.shared.store import Store, fan_out_view
from hookline.shared.store.fan_out_view import MAX_REMEMBERED, FanOutMemory, FanOutView
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

SECRET = "whsec_" + "A" * 32


async def _version(store: Store) -> int:
    memory: Any = getattr(store, "fan_out_memory")  # noqa: B009  (both stores have it)
    label = memory.version
    assert isinstance(label, int)
    return label


@pytest.mark.parametrize("index_limit", [fan_out_view.WHOLE_INDEX_LIMIT, 0],
                         ids=["whole-index", "key-by-key"])
async def test_the_memory_is_labelled_with_the_version_each_change_moves(
        store: Store, index_limit: int, monkeypatch: pytest.MonkeyPatch):
    """After an event, the memory holds the answers at the database's version (the whole
    index, or the keys asked) and the tenants known to exist; each change to what it
    remembers gives the next event another version, and changes it does not remember
    (pausing, renaming a tenant, creating one) keep it."""
    monkeypatch.setattr(fan_out_view, "WHOLE_INDEX_LIMIT", index_limit)
    await store.put_tenant("acme", TenantFields())
    await store.add_destination(name="a", url="http://127.0.0.1:9/x", secret=SECRET,
                                event_types=["x.*"], max_in_flight=5, tenant="acme")
    seen: list[int] = []

    async def publish(n: int) -> None:
        await store.add_event(new_event(f"e{n}", "x.y", tenant="acme"))
        seen.append(await _version(store))

    memory: Any = getattr(store, "fan_out_memory")  # noqa: B009
    await publish(0)
    whole = memory.recall((), ())[1] is not None
    assert whole is bool(index_limit) and memory.too_big is not bool(index_limit)
    assert memory.subscriptions[("acme", "x.*")][0][1] is None  # (destination id, filter)
    assert memory.tenants == {"acme": False}
    assert (("acme", "x.y") in memory.subscriptions) is not whole  # asked, found none
    await publish(1)
    await store.set_paused("a", True, tenant="acme")
    await store.put_tenant("acme", TenantFields(name="Acme"))
    await store.put_tenant("globex", TenantFields())
    await publish(2)
    assert seen[0] == seen[1] == seen[2]  # nothing remembered changed
    await store.update_destination("a", tenant="acme", event_types=["x.y"])
    await publish(3)
    await store.update_destination("a", tenant="acme", filter={"data.n": 1})
    await publish(4)
    await store.put_tenant("acme", TenantFields(disabled=True))
    await publish(5)
    await store.put_tenant("acme", TenantFields(disabled=False))
    await publish(6)
    await store.delete_tenant("globex")
    await publish(7)
    assert len(set(seen[2:])) == 6, seen  # each change moved it


def test_a_memory_forgets_everything_on_another_version_and_past_its_bound():
    memory = FanOutMemory()
    memory.absorb(1, {("t", "a"): ((1, None),)}, {"t": False, "gone": None})
    memory.absorb(1, {("t", "b"): ()}, {})
    assert memory.recall([("t", "a"), ("t", "b"), ("t", "c")], ["t", "u", "gone"]) == (
        1, None, {("t", "a"): ((1, None),), ("t", "b"): ()}, {"t": False})  # absent: asked
    memory.absorb(2, {("t", "c"): ()}, {})
    assert memory.recall([("t", "a"), ("t", "c")], ["t"]) == (2, None, {("t", "c"): ()}, {})
    many: dict[tuple[str, str], tuple[tuple[int, str | None], ...]] = {
        ("t", str(i)): () for i in range(MAX_REMEMBERED)}
    memory.absorb(2, many, {})
    assert len(memory.subscriptions) == MAX_REMEMBERED and ("t", "c") not in memory.subscriptions
    tenants: dict[str, bool | None] = {f"n{i}": False for i in range(MAX_REMEMBERED)}
    memory.absorb(2, {}, tenants)
    memory.absorb(2, {}, {"late": True})  # past the bound: the tenants start over
    assert memory.tenants == {"late": True} and len(memory.subscriptions) == MAX_REMEMBERED
    whole = FanOutView({("t", "a"): ((1, None),)})
    memory.replace(3, whole)
    memory.absorb(3, {("t", "z"): ((9, None),)}, {"t": True})  # a whole memory asks no key
    assert memory.recall([("t", "z")], ["t"]) == (3, whole, {}, {"t": True})
    memory.absorb(3, {}, tenants)  # many tenants: they start over, the whole index stays
    memory.absorb(3, {}, {"u": False})
    assert memory.recall([], ["u", "t"]) == (3, whole, {}, {"u": False})
    assert whole.reach("t", "a") == ((1, None),) and whole.reach("t", "q") == ()
    memory.absorb(4, {}, {})
    assert memory.recall([("t", "a")], ["t"]) == (4, None, {}, {})

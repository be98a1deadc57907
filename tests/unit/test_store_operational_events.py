"""Operational events (shared/store/notify_tx.py) on both backends: one event per state
change of a destination, decided in the transaction that changes it, delivered to the
destinations subscribed to the `hookline.` namespace of the same tenant and of the default
tenant, never about the operator's notification destinations, and about a tenant's to the
operator's only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hookline.shared.models import AttemptResult, Dead, Done, Retry
from hookline.shared.operator_models import EventFilter
from hookline.shared.policy.delivery import BreakerPolicy
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

SECRET = "whsec_" + "A" * 32
URL = "http://127.0.0.1:9/x"
BREAKER = BreakerPolicy(failures=4, min_span_s=0.0, window_s=0.0)
POLICY = NotifyPolicy(failing_streak=2, failing_after_s=0.0, dead_letters_step=2,
                      dead_letters_interval_s=0.0)


async def add(store: Any, name: str, patterns: list[str], tenant: str = "_default") -> None:
    await store.add_destination(name=name, url=URL, secret=SECRET, event_types=patterns,
                                max_in_flight=10, tenant=tenant)


async def attempt(store: Any, clock: Any, status: int, *, dead: bool = False,
                  watchers_status: int = 200) -> list[tuple[str, str, dict[str, Any]]]:
    """One round: claim every due job; notification destinations (names `ops*`) and the
    catch-all `all` answer `watchers_status`, every other one `status` (a failure is
    retried at once, or dies).
    Returns (receiver, type, data) of each operational event delivered this round."""
    claims = await store.claim("w", 50, lease_s=30, max_attempts=100)
    items, got = [], []
    for claim in claims:
        code = watchers_status if claim.destination_name.startswith(("ops", "all")) else status
        result = AttemptResult(started_at=clock(), duration_s=0.01, status_code=code)
        if 200 <= code < 300:
            outcome: Any = Done()
        else:
            outcome = Dead(error=f"HTTP {code}") if dead else Retry(delay_s=0.0,
                                                                      error=f"HTTP {code}")
        items.append((claim, outcome, result))
        if claim.event_type.startswith("hookline."):
            body = json.loads(claim.body)
            got.append((claim.destination_name, body["type"], body["data"]))
    if items:
        await store.finish(items, breaker=BREAKER)
    clock.advance(1.0)
    return got


async def rounds(store: Any, clock: Any, statuses: list[int], **kw: Any
                 ) -> list[tuple[str, str, dict[str, Any]]]:
    got = []
    for status in statuses:
        got += await attempt(store, clock, status, **kw)
    for _ in range(2):  # the last one's success, then what it announced
        got += await attempt(store, clock, 200, **kw)
    return got


def kinds(got: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    return [(receiver, kind, data["destination"]) for receiver, kind, data in got]


async def test_failing_paused_recovered_once_each(store, clock):
    store.notify = POLICY
    await add(store, "ops", ["hookline.*"])
    await add(store, "all", ["*"])  # a catch-all does not get operational events
    await add(store, "d", ["push"])
    await store.add_event(new_event("e1"))
    got = await rounds(store, clock, [500, 500, 500, 500, 500])  # streak 4: the breaker
    assert kinds(got) == [("ops", "hookline.destination.failing", "d"),
                          ("ops", "hookline.destination.paused", "d")]
    failing, paused = got[0][2], got[1][2]
    assert failing["failure_streak"] == 2 and failing["last_status_code"] == 500
    assert failing["tenant"] == "_default"
    assert failing["dashboard_url"] == "/#/destinations?tenant=_default"
    assert failing["thresholds"] == {"failure_streak": 2, "failing_after_s": 0.0}
    assert paused["reason"] == "breaker" and paused["failure_streak"] == 4
    assert paused["paused_reason"].startswith("circuit breaker:")
    await store.set_paused("d", False)
    got = await rounds(store, clock, [200])
    assert kinds(got) == [("ops", "hookline.destination.recovered", "d")]
    assert got[0][2]["previous_state"] == "paused"
    await store.add_event(new_event("e2"))
    assert await rounds(store, clock, [200, 200]) == []  # healthy: nothing more
    figures = await store.metric_figures(10)
    assert figures.notifications == {"destination.failing": 1, "destination.paused": 1,
                                     "destination.recovered": 1}


async def test_a_flapping_destination_is_announced_once_per_state_change(store, clock):
    store.notify = POLICY
    await add(store, "ops", ["hookline.destination.*"])
    await add(store, "d", ["push"])
    await store.add_event(new_event("e1"))
    assert await rounds(store, clock, [500]) == []  # one failure, then delivered
    for n in range(2, 5):
        await store.add_event(new_event(f"e{n}"))
        assert await rounds(store, clock, [500]) == []  # never two failures in a row
    await store.add_event(new_event("e5"))
    got = await rounds(store, clock, [500, 500, 500])
    assert kinds(got) == [("ops", "hookline.destination.failing", "d"),
                          ("ops", "hookline.destination.recovered", "d")]


async def test_notification_destinations_never_announce_themselves(store, clock):
    """Two notification destinations that fail, with a failing destination feeding them:
    only events about that destination, never about them (no loop, no cycle)."""
    store.notify = POLICY
    await add(store, "ops1", ["hookline.*"])
    await add(store, "ops2", ["hookline.destination.failing", "push"])
    await add(store, "d", ["push"])
    await store.add_event(new_event("e1"))
    got = await rounds(store, clock, [500] * 6, watchers_status=503)
    assert {data["destination"] for _, _, data in got} == {"d"}
    assert {(receiver, kind) for receiver, kind, _ in got} >= {
        ("ops1", "hookline.destination.failing"), ("ops2", "hookline.destination.failing"),
        ("ops1", "hookline.destination.paused")}
    # The breaker paused both notification destinations too (their own failure runs),
    # without an event about either.
    assert (await store.get_destination("ops1")).paused
    assert (await store.get_destination("ops2")).paused


async def test_a_tenant_hears_only_of_its_own_destinations(store, clock):
    store.notify = POLICY
    for tenant in ("acme", "beta"):
        await store.put_tenant(tenant, TenantFields())
    await add(store, "ops", ["hookline.*"])  # the operator's: every tenant's
    await add(store, "ops-acme", ["hookline.*"], tenant="acme")
    await add(store, "ops-beta", ["hookline.*"], tenant="beta")
    await add(store, "a", ["push"], tenant="acme")
    await store.add_event(new_event("e1", tenant="acme"))
    got = await rounds(store, clock, [500, 500])
    assert sorted(kinds(got)) == [("ops", "hookline.destination.failing", "a"),
                                  ("ops", "hookline.destination.recovered", "a"),
                                  ("ops-acme", "hookline.destination.failing", "a"),
                                  ("ops-acme", "hookline.destination.recovered", "a")]
    assert all(data["tenant"] == "acme" for _, _, data in got)
    # The operator's copy links the dashboard (and the portal); acme's own, the portal only:
    # its customer cannot open the operator's dashboard.
    links = {(name, k) for name, _, data in got for k in data if k.endswith("_url")}
    assert links == {("ops", "dashboard_url"), ("ops", "portal_url"),
                     ("ops-acme", "portal_url")}
    assert all(data["portal_url"] == "/portal/" for _, _, data in got)
    # Each event's jobs are its own tenant's: acme's views never show the operator's jobs.
    acme = await store.list_events(EventFilter(tenant="acme", type="hookline.destination.failing",
                                               limit=10))
    assert [[j.destination for j in e.jobs] for e in acme] == [["ops-acme"]]
    ours = await store.list_events(EventFilter(tenant="_default",
                                               type="hookline.destination.failing", limit=10))
    assert [[j.destination for j in e.jobs] for e in ours] == [["ops"]]


async def test_a_tenants_notification_destination_is_announced_to_the_operator_only(
        store, clock):
    """A tenant's destination subscribed to `hookline.*` fails: the operator hears of it
    (a tenant cannot hide a destination from the operator that way), and nothing about it
    goes to the tenant's own notification destinations, itself included (no loop)."""
    store.notify = POLICY
    await store.put_tenant("acme", TenantFields())
    await add(store, "ops", ["hookline.*"])  # the operator's
    await add(store, "hooks-acme", ["hookline.*", "push"], tenant="acme")  # fails (not ops*)
    await add(store, "ops-acme", ["hookline.destination.failing"], tenant="acme")
    await store.add_event(new_event("e1", tenant="acme"))
    got = await rounds(store, clock, [500, 500])
    assert sorted(kinds(got)) == [("ops", "hookline.destination.failing", "hooks-acme"),
                                  ("ops", "hookline.destination.recovered", "hooks-acme")]
    await store.rotate_secret("hooks-acme", "whsec_" + "B" * 32, overlap_s=60, tenant="acme")
    await store.set_paused("hooks-acme", True, reason="maintenance", tenant="acme")
    got = await rounds(store, clock, [])
    assert kinds(got) == [("ops", "hookline.destination.secret_rotated", "hooks-acme"),
                          ("ops", "hookline.destination.paused", "hooks-acme")]


async def test_payload_filters_apply_to_operational_events(store, clock):
    """The operator's notification destination with a filter on the tenant hears only of
    that tenant's destinations; what its filter turned away is counted as filtered."""
    store.notify = POLICY
    for tenant in ("acme", "beta"):
        await store.put_tenant(tenant, TenantFields())
    await add(store, "ops", ["hookline.*"])
    await store.update_destination("ops", filter={"data.tenant": "acme"})
    await add(store, "a", ["push"], tenant="acme")
    await add(store, "b", ["push"], tenant="beta")
    for tenant in ("acme", "beta"):
        await store.add_event(new_event("e1", tenant=tenant))
    got = await rounds(store, clock, [500, 500])
    assert sorted(kinds(got)) == [("ops", "hookline.destination.failing", "a"),
                                  ("ops", "hookline.destination.recovered", "a")]
    page, _ = await store.destination_figures(after_id=0, limit=10)
    assert {d.name: d.filtered for d in page}["ops"] == 2


async def test_manual_pause_and_secret_rotation(store, clock):
    store.notify = NotifyPolicy(public_url="https://hooks.example.com/")
    await add(store, "ops", ["hookline.*"])
    await add(store, "d", ["push"])
    await store.set_paused("d", True, reason="maintenance")
    await store.set_paused("d", True, reason="still maintenance")  # already paused: no event
    await store.rotate_secret("d", "whsec_" + "B" * 32, overlap_s=60)
    got = await rounds(store, clock, [])
    assert kinds(got) == [("ops", "hookline.destination.paused", "d"),
                          ("ops", "hookline.destination.secret_rotated", "d")]
    assert got[0][2]["reason"] == "manual" and got[0][2]["paused_reason"] == "maintenance"
    assert got[1][2]["overlap_s"] == 60
    assert got[1][2]["dashboard_url"] == (
        "https://hooks.example.com/#/destinations?tenant=_default")


async def test_dead_letters_growing(store, clock):
    store.notify = NotifyPolicy(failing_streak=0, failing_after_s=0.0, dead_letters_step=2,
                                dead_letters_interval_s=3600.0)
    await add(store, "ops", ["hookline.dead_letters.growing"])
    await add(store, "d", ["push"])
    for n in range(5):
        await store.add_event(new_event(f"e{n}"))
    got = await rounds(store, clock, [422], dead=True)
    assert kinds(got) == [("ops", "hookline.dead_letters.growing", "d")]
    assert got[0][2]["new_dead_letters"] == 2 and got[0][2]["dead_letters"] >= 2
    await store.set_paused("d", False)  # the breaker paused it (4 failures in a row)
    clock.advance(3600.0)  # the interval passed: the 3 that died since make the next one
    await store.add_event(new_event("e9"))
    got = await rounds(store, clock, [422], dead=True)
    assert [(d["new_dead_letters"], d["dead_letters"]) for _, _, d in got] == [(4, 6)]


async def test_a_slack_destination_gets_text_for_operational_events_only(store, clock):
    store.notify = POLICY
    await add(store, "ops", ["hookline.*", "push"])
    await store.update_destination("ops", body_format="slack")
    await store.set_paused("ops", True)  # a notification destination: nothing about it
    await store.set_paused("ops", False)
    await add(store, "d", ["other"])
    await store.set_paused("d", True, reason="moving hosts")
    await store.add_event(new_event("e1"))  # a push: delivered as stored
    claims = await store.claim("w", 10, lease_s=30, max_attempts=5)
    bodies = {c.event_type: json.loads(c.body) for c in claims}
    assert bodies["push"] == {"n": "e1"}
    assert set(bodies["hookline.destination.paused"]) == {"text"}
    assert "`d`" in bodies["hookline.destination.paused"]["text"]
    assert "moving hosts" in bodies["hookline.destination.paused"]["text"]


@pytest.mark.parametrize("event_type", ["hookline.destination.failing", "hookline.x"])
def test_publishers_are_refused_the_reserved_namespace(event_type):
    from hookline.ingest.validation import parse_event
    from hookline.shared.errors import InvalidEvent

    body = json.dumps({"id": "1", "type": event_type, "data": {}}).encode()
    with pytest.raises(InvalidEvent) as refused:
        parse_event(body, 10_000)
    assert refused.value.field == "type" and "reserved" in str(refused.value)

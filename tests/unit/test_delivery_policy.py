"""Delivery policy: pure decisions (breaker, rate limit, reserved slots, timeouts) and their
application by the store (claim order, ordered mode, rate limit, rotation, auto-pause)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from hookline.shared.endpoint_models import Destination
from hookline.shared.errors import ConfigError, InvalidSetting, NotFound
from hookline.shared.models import AttemptResult, ClaimRequest, Dead, Done, Retry
from hookline.shared.policy import rules
from hookline.shared.policy.delivery import (
    BreakerPolicy,
    auto_pause_reason,
    choose_claims,
    choose_with_takeovers,
    destination_slots,
    effective_timeout_s,
    fair_room,
    late_slots,
    next_send_after,
    rate_limit_allows,
)
from hookline.shared.signing import generate_secret
from hookline.shared.tenant_models import TenantFields
from tests.conftest import execute_db, new_event

NOW = 1_800_000_000.0
POLICY = BreakerPolicy(failures=3, window_s=600.0, min_span_s=0.0)
OK = AttemptResult(started_at=NOW, duration_s=0.01, status_code=200)
FAIL = AttemptResult(started_at=NOW, duration_s=0.01, status_code=503)
GONE = AttemptResult(started_at=NOW, duration_s=0.01, status_code=410)
REFUSED = AttemptResult(started_at=NOW, duration_s=0.01, error="ClientConnectorError")


# -- pure decisions ----------------------------------------------------------------------------

def test_breaker_trips_on_streak_window_or_gone():
    """A run of `failures` failed attempts, or `window_s` of failing, or a 410, pauses;
    a success or a short run does not; 0 disables a trigger."""
    url = "https://x.test/h"
    assert auto_pause_reason(FAIL, url, 2, NOW - 10, NOW, POLICY) is None
    assert "3 consecutive" in auto_pause_reason(FAIL, url, 3, NOW - 10, NOW, POLICY)
    assert "failing for 600 s" in auto_pause_reason(REFUSED, url, 1, NOW - 600, NOW, POLICY)
    assert auto_pause_reason(GONE, url, 1, NOW, NOW, POLICY) == f"410 Gone from {url}"
    assert auto_pause_reason(OK, url, 99, NOW - 10**6, NOW, POLICY) is None
    off = BreakerPolicy(failures=0, window_s=0, pause_on_gone=False)
    assert auto_pause_reason(GONE, url, 10**6, NOW - 10**6, NOW, off) is None


def test_breaker_streak_needs_min_span():
    """A burst of failures (a long streak within min_span_s) does not trip the count
    trigger; the same streak after min_span_s of failing does."""
    policy = BreakerPolicy(failures=3, window_s=0, min_span_s=300.0)
    assert auto_pause_reason(FAIL, "u", 500, NOW - 299, NOW, policy) is None
    assert "500 consecutive" in auto_pause_reason(FAIL, "u", 500, NOW - 300, NOW, policy)


def test_rate_limit_gcra_allows_one_second_burst_then_spaces_requests():
    """At 4/s, four claims pass at once, the fifth waits 0.25 s; over 10 s at most ~44 pass."""
    tat = 0.0
    passed = 0
    for _ in range(10):
        if rate_limit_allows(tat, NOW, 4.0):
            tat = next_send_after(tat, NOW, 4.0)
            passed += 1
    assert passed == 4
    assert not rate_limit_allows(tat, NOW + 0.2, 4.0) and rate_limit_allows(tat, NOW + 0.25, 4.0)
    t, sent, tat = NOW, 0, 0.0
    while t < NOW + 10:
        while rate_limit_allows(tat, t, 4.0):
            tat, sent = next_send_after(tat, t, 4.0), sent + 1
        t += 0.01
    assert 40 <= sent <= 44
    assert rate_limit_allows(123.0, NOW, None) and next_send_after(5.0, NOW, None) == 5.0


def test_late_slots_and_effective_timeout():
    """Late retries get a share of slots but at least one; a destination timeout override
    wins over the default but stays below 90 % of the lease."""
    assert late_slots(64, 0.5) == 32 and late_slots(1, 0.5) == 1 and late_slots(8, 1.0) == 8
    assert effective_timeout_s(None, 10.0, 30.0) == 10.0
    assert effective_timeout_s(2.5, 10.0, 30.0) == 2.5
    assert effective_timeout_s(60.0, 10.0, 30.0) == 27.0


# -- the store applying them -------------------------------------------------------------------

async def _age(store, clock, destination: Destination, rounds: int) -> None:
    """Make every job of `destination` fail `rounds` times (it becomes a late retry)."""
    for _ in range(rounds):
        claims = [c for c in await store.claim("ager", 1000, 30.0, 100)
                  if c.destination_id == destination.id]
        await store.finish([(c, Retry(delay_s=0, error="HTTP 503"), FAIL)
                            for c in claims])


async def test_claim_puts_first_attempts_before_late_retries_and_caps_late(
        store, clock, destination_factory):
    """With late_after=2 and max_late=1, a claim takes the fresh job of a healthy destination
    first and at most one late retry, although the late retries were due earlier."""
    failing = await destination_factory("failing", max_in_flight=100)
    await store.add_events([new_event(f"old{i}", type_="old") for i in range(5)])
    await store.update_destination("failing", event_types=["old"])
    await _age(store, clock, failing, 2)
    healthy = await destination_factory("healthy", event_types=("new",))
    clock.advance(1)
    await store.add_event(new_event("fresh", type_="new"))
    claims = await store.claim("w", 3, 30.0, 100, late_after=2, max_late=1)
    assert [c.destination_id for c in claims] == [healthy.id, failing.id]
    assert claims[1].attempt == 3
    # Without the reservation nothing is late: the destinations take turns, each oldest first
    # (the failing one's retries were due earlier, so it goes first).
    await store.hand_back(claims)
    claims = await store.claim("w", 3, 30.0, 100)
    assert [c.destination_id for c in claims] == [failing.id, healthy.id, failing.id]


async def test_ordered_destination_sends_oldest_unfinished_job_only(
        store, clock, destination_factory):
    """FIFO: one in flight; a failing job holds later jobs until it is done or dead."""
    await destination_factory("fifo", max_in_flight=10)
    await store.update_destination("fifo", ordered=True)
    await store.add_events([new_event(f"e{i}") for i in range(3)])
    [first] = await store.claim("w", 10, 30.0, 5)
    assert await store.claim("w", 10, 30.0, 5) == []  # one in flight
    await store.finish([(first, Retry(delay_s=60, error="HTTP 503"), FAIL)])
    assert await store.claim("w", 10, 30.0, 5) == []  # the failing head holds the others
    clock.advance(61)
    [again] = await store.claim("w", 10, 30.0, 5)
    assert again.job_id == first.job_id and again.attempt == 2
    await store.finish([(again, Dead(error="HTTP 400 (permanent)"), FAIL)])
    [second] = await store.claim("w", 10, 30.0, 5)
    assert second.job_id > first.job_id
    await store.finish([(second, Done(), OK)])
    [third] = await store.claim("w", 10, 30.0, 5)
    assert third.job_id > second.job_id


async def test_a_claim_marks_the_jobs_whose_result_the_destinations_next_job_waits_for(
        store, destination_factory):
    """gates_next (the worker then writes the result at once, not lingering for the next
    claim): set for an ordered destination's job and for the jobs that took a destination's
    last free in-flight slots; not for one with slots left after the claim."""
    roomy = await destination_factory("roomy", max_in_flight=10, event_types=("roomy",))
    capped = await destination_factory("capped", max_in_flight=2, event_types=("capped",))
    fifo = await destination_factory("fifo", max_in_flight=10, event_types=("fifo",))
    await store.update_destination("fifo", ordered=True)
    await store.add_events([new_event(f"{kind}{i}", type_=kind)
                            for kind in ("roomy", "capped", "fifo") for i in range(3)])
    claims = await store.claim("w", 20, 30.0, 5)
    gates = Counter((c.destination_id, c.gates_next) for c in claims)
    assert gates == {(roomy.id, False): 3, (capped.id, True): 2, (fifo.id, True): 1}
    # One job of the capped destination back: the next claim takes its last slot again.
    [one_capped, *_] = [c for c in claims if c.destination_id == capped.id]
    await store.finish([(one_capped, Done(), OK)])
    [again] = await store.claim("w", 20, 30.0, 5)
    assert again.destination_id == capped.id and again.gates_next
    await store.hand_back([c for c in claims if c.job_id != one_capped.job_id] + [again])
    # A claim whose own limit (the worker's free slots) runs out first leaves the
    # destination room: its next job waits for no result of this one.
    small = await store.claim("w", 1, 30.0, 5)
    assert [(c.destination_id, c.gates_next) for c in small] == [(roomy.id, False)]
    # The same with a worker's share of each destination (4) larger than the claim.
    [shared] = await store.claim("w", 1, 30.0, 5, per_destination=4)
    assert shared.destination_id != fifo.id and not shared.gates_next
    await store.hand_back([*small, shared])


async def test_a_claim_marks_the_jobs_that_fill_the_workers_share_or_the_late_reservation(
        store, clock, destination_factory):
    """gates_next also where the claiming worker's own caps hold the next job back: its
    share of a destination (per_destination), of a tenant (per_tenant), and the late-retry
    reservation (max_late); not for a destination with room left under each."""
    await store.put_tenant("acme", TenantFields())
    wide = await destination_factory("wide", max_in_flight=10, event_types=("wide",))
    await store.add_destination(name="acme-1", url="http://127.0.0.1:9/x",
                                secret=generate_secret(), event_types=["acme"],
                                max_in_flight=10, tenant="acme")
    await store.add_events([new_event(f"w{i}", type_="wide") for i in range(3)]
                           + [new_event(f"a{i}", type_="acme", tenant="acme")
                              for i in range(3)])
    shared = await store.claim("w", 20, 30.0, 5, per_destination=2)
    assert {c.gates_next for c in shared} == {True} and len(shared) == 4
    await store.hand_back(shared)
    roomy = await store.claim("w", 20, 30.0, 5, per_destination=4, per_tenant=4)
    assert not any(c.gates_next for c in roomy) and len(roomy) == 6
    await store.hand_back(roomy)
    tenant_capped = await store.claim("w", 20, 30.0, 5, per_tenant=3, held_tenants={"acme": 1})
    assert Counter((c.tenant_id, c.gates_next) for c in tenant_capped) == {
        ("_default", True): 3, ("acme", True): 2}
    await store.hand_back(tenant_capped)
    # Late retries: wide's jobs fail twice each; with max_late 1 the one claimed gates, and
    # acme's fresh jobs (not late) do not.
    await _age(store, clock, wide, 2)
    await store.add_event(new_event("a-fresh", type_="acme", tenant="acme"))
    clock.advance(1)
    late = await store.claim("w", 20, 30.0, 5, late_after=2, max_late=1)
    assert [(c.attempt, c.gates_next) for c in late if c.destination_id == wide.id] == [
        (3, True)]
    assert {(c.attempt, c.gates_next) for c in late if c.destination_id != wide.id} == {
        (1, False)}


async def test_a_row_no_request_can_be_made_of_dies_alone_and_the_rest_is_claimed(
        store, store_url, destination_factory):
    """A stored value written by hand that no request can be made of (here an event's
    forwarded headers that are not JSON) fails its own job for good, with the attempt closed
    and the reason, in the claim that met it; the other jobs are claimed as usual, and the
    next claim is not stopped by it (before: every claim holding it raised, and the worker
    crash-looped with all delivery stopped)."""
    await destination_factory("d", max_in_flight=10)
    await store.add_events([new_event("good"), new_event("bad")])
    await execute_db(store_url, "UPDATE events SET forwarded_headers = 'not json' "
                                "WHERE source_event_id = 'bad'")
    claims = await store.claim("w", 10, 30.0, 5)
    assert [c.body for c in claims] == [b'{"n": "good"}']
    [dead] = await store.list_jobs(status="dead")
    assert dead.last_error is not None
    assert dead.last_error.startswith("UnreadableRow: forwarded_headers: JSONDecodeError")
    [attempt] = [a for a in await store.list_attempts() if a.job_id == dead.id]
    assert attempt.error == dead.last_error
    await store.add_event(new_event("after"))
    assert [c.body for c in await store.claim("w", 10, 30.0, 5)] == [b'{"n": "after"}']
    if not store_url.startswith("postgresql://"):  # a typed column refuses it there
        await store.add_event(new_event("number"))
        await execute_db(store_url, "UPDATE events SET body = 5 WHERE source_event_id = 'number'")
        assert await store.claim("w", 10, 30.0, 5) == []  # not five NUL bytes
        assert len(await store.list_jobs(status="dead")) == 2


async def test_a_destinations_own_unreadable_value_pauses_it_and_loses_no_job(
        store, store_url, destination_factory):
    """A destination's own stored value no request can be made of (its headers written by
    hand as a JSON list) would fail each of its jobs alike: the claim that meets it pauses
    the destination with the reason (announced, logged) and hands its jobs back uncharged,
    their attempts closed with the reason; the other destination's job is claimed. Once the
    headers are fixed and the destination resumed, its jobs are sent (before: each died)."""
    await destination_factory("bad", max_in_flight=10, event_types=("push",))
    await destination_factory("good", max_in_flight=10, event_types=("good",))
    await store.add_destination(name="ops", url="http://127.0.0.1:9/ops",
                                secret=generate_secret(), event_types=["hookline.*"],
                                max_in_flight=10)
    await store.add_events([new_event("e1"), new_event("e2"), new_event("g1", type_="good")])
    await execute_db(store_url, "UPDATE destinations SET headers = '[1, 2]' WHERE name = 'bad'")
    with capture_logs() as logs:
        claims = await store.claim("w", 10, 30.0, 5)
    assert [c.destination_name for c in claims] == ["good"]
    bad = await store.get_destination("bad")
    assert bad.paused and bad.paused_reason is not None
    assert bad.paused_reason.startswith("UnreadableRow: headers: AttributeError")
    [paused_log] = [e for e in logs if e["event"] == "destination_auto_paused"]
    assert paused_log["destination"] == "bad" and paused_log["log_level"] == "error"
    jobs = [j for j in await store.list_jobs() if j.destination == "bad"]
    assert [(j.status, j.attempts) for j in jobs] == [("pending", 0), ("pending", 0)]
    closed = [a for a in await store.list_attempts() if a.job_id in {j.id for j in jobs}]
    assert closed and {a.error for a in closed} == {bad.paused_reason}
    [announced] = await store.claim("w", 10, 30.0, 5)  # the pause, to the operator's ops
    assert (announced.destination_name, announced.event_type) == (
        "ops", "hookline.destination.paused")
    assert json.loads(announced.body)["data"]["reason"] == "unreadable"
    await store.finish([(announced, Done(), OK)])
    await store.update_destination("bad", headers={})
    await store.set_paused("bad", False)
    resent = await store.claim("w", 10, 30.0, 5)
    assert sorted(c.body for c in resent) == [b'{"n": "e1"}', b'{"n": "e2"}']
    assert {c.attempt for c in resent} == {1}


async def test_a_hand_written_subscription_list_does_not_fail_the_finish(
        store, store_url, destination_factory):
    """A destination's stored event_types holding a non-string (written by hand: the API
    refuses it) do not make its finish raise when a 410 pauses it (the operational event's
    check reads them): the result is written and the destination paused."""
    await destination_factory("gone", url="http://127.0.0.1:9/gone")
    await store.add_events([new_event("e1")])
    [claim] = await store.claim("w", 10, 30.0, 5)
    await execute_db(store_url, """UPDATE destinations SET event_types = '["push", 1]'""")
    assert await store.finish([(claim, Dead(error="HTTP 410 (permanent)"), GONE)],
                              breaker=POLICY) == [True]
    assert (await store.get_destination("gone")).paused


async def test_rate_limit_is_kept_in_the_database_across_claimers(
        store, clock, destination_factory):
    """At 2/s two workers together claim 2 jobs now, one more 0.5 s later."""
    await destination_factory("slow", max_in_flight=100)
    await store.update_destination("slow", rate_limit_per_s=2.0)
    await store.add_events([new_event(f"e{i}") for i in range(10)])
    first = await store.claim("w1", 10, 30.0, 5)
    second = await store.claim("w2", 10, 30.0, 5)
    assert len(first) + len(second) == 2
    clock.advance(0.5)
    assert len(await store.claim("w2", 10, 30.0, 5)) == 1
    assert await store.claim("w1", 10, 30.0, 5) == []


async def test_rotate_secret_claims_carry_both_secrets_until_overlap_ends(
        store, clock, destination_factory):
    """After rotation the claim lists the new secret then the old one; after the overlap
    only the new one. Bad input is refused and changes nothing."""
    old = generate_secret()
    await destination_factory("rot", secret=old)
    new = generate_secret()
    rotated = await store.rotate_secret("rot", new, overlap_s=3600)
    assert rotated.secret == new and rotated.previous_secret == old
    assert rotated.previous_secret_until == clock() + 3600
    assert rotated.active_secrets(clock()) == (new, old)
    assert rotated.redacted()["previous_secret"] == old[:10] + "…"
    await store.add_event(new_event("e1"))
    [claim] = await store.claim("w", 1, 30.0, 5)
    assert claim.secrets == (new, old)
    await store.hand_back([claim])
    clock.advance(3601)
    [claim] = await store.claim("w", 1, 30.0, 5)
    assert claim.secrets == (new,)
    with pytest.raises(ConfigError):
        await store.rotate_secret("rot", "not-a-secret", 60)
    with pytest.raises(ConfigError):
        await store.rotate_secret("rot", new, 60)
    with pytest.raises(ConfigError):
        await store.rotate_secret("rot", generate_secret(), -1)
    with pytest.raises(NotFound):
        await store.rotate_secret("nope", generate_secret(), 60)
    assert (await store.get_destination("rot")).secret == new


async def test_expire_previous_secret_ends_the_overlap_at_once(store, clock,
                                                             destination_factory):
    """Expiring the previous secret early makes the next claim sign with the new secret only,
    forgets the old one, and reports whether one was still signing (a repeat changes
    nothing). Rotation refuses an overlap outside 0 s to 7 days, or the same secret, naming
    the field; a removed destination is not found."""
    old, new = generate_secret(), generate_secret()
    await destination_factory("rot", secret=old)
    await store.rotate_secret("rot", new, overlap_s=rules.DEFAULT_ROTATION_OVERLAP_S)
    await store.add_event(new_event("e1"))
    expired, was_signing = await store.expire_previous_secret("rot")
    assert was_signing and (expired.secret, expired.previous_secret) == (new, None)
    assert expired.previous_secret_until is None
    [claim] = await store.claim("w", 1, 30.0, 5)
    assert claim.secrets == (new,)
    again, was_signing = await store.expire_previous_secret("rot")
    assert not was_signing and again.secret == new

    await store.rotate_secret("rot", old, overlap_s=0)  # zero overlap: nothing to expire
    assert (await store.expire_previous_secret("rot"))[1] is False
    for overlap, secret, field in ((-1, generate_secret(), "overlap_s"),
                                   (rules.MAX_ROTATION_OVERLAP_S + 1, generate_secret(),
                                    "overlap_s"),
                                   (float("nan"), generate_secret(), "overlap_s"),
                                   (True, generate_secret(), "overlap_s"),
                                   (60, old, "secret"), (60, "whsec_short", "secret")):
        with pytest.raises(InvalidSetting) as refused:
            await store.rotate_secret("rot", secret, overlap)
        assert refused.value.field == field
    assert (await store.rotate_secret("rot", new, rules.MAX_ROTATION_OVERLAP_S)).secret == new
    await store.remove_destination("rot")
    with pytest.raises(NotFound):
        await store.expire_previous_secret("rot")


async def test_destination_is_created_with_its_delivery_policy(store):
    """add_destination stores timeout_s, rate_limit_per_s and ordered as given (defaults:
    no override, unordered), checked by the rule book."""
    made = await store.add_destination(name="p", url="http://127.0.0.1:9/p",
                                       secret=generate_secret(), event_types=["*"],
                                       max_in_flight=1, timeout_s=2.5, rate_limit_per_s=4,
                                       ordered=True)
    assert (made.timeout_s, made.rate_limit_per_s, made.ordered) == (2.5, 4.0, True)
    assert await store.get_destination("p") == made
    plain = await store.add_destination(name="q", url="http://127.0.0.1:9/q",
                                        secret=generate_secret(), event_types=["*"],
                                        max_in_flight=1)
    assert (plain.timeout_s, plain.rate_limit_per_s, plain.ordered) == (None, None, False)
    with pytest.raises(InvalidSetting) as refused:
        await store.add_destination(name="r", url="http://127.0.0.1:9/r",
                                    secret=generate_secret(), event_types=["*"],
                                    max_in_flight=1, ordered="yes")
    assert refused.value.field == "ordered"


async def test_breaker_auto_pauses_after_consecutive_failures_and_resume_resets(
        store, clock, destination_factory):
    """Three failed attempts in a row pause the destination with a reason and a log event;
    a success in between resets the run; manual resume resets the streak."""
    await destination_factory("flaky", max_in_flight=100)
    await store.add_events([new_event(f"e{i}") for i in range(6)])
    claims = await store.claim("w", 6, 30.0, 10)
    retry = Retry(delay_s=60, error="HTTP 503")
    await store.finish([(claims[0], retry, FAIL), (claims[1], retry, FAIL)], breaker=POLICY)
    await store.finish([(claims[2], Done(), OK)], breaker=POLICY)
    assert (await store.get_destination("flaky")).failure_streak == 0
    await store.finish([(claims[3], retry, FAIL), (claims[4], retry, FAIL)], breaker=POLICY)
    assert not (await store.get_destination("flaky")).paused
    with capture_logs() as logs:
        await store.finish([(claims[5], retry, REFUSED)], breaker=POLICY)
    paused = await store.get_destination("flaky")
    assert paused.paused and paused.failure_streak == 3
    assert paused.paused_reason == "circuit breaker: 3 consecutive failed attempts"
    assert next(e for e in logs if e["event"] == "destination_auto_paused")["destination"] == \
        "flaky"
    clock.advance(61)
    assert await store.claim("w", 6, 30.0, 10) == []  # paused: nothing claimable
    await store.set_paused("flaky", False)
    resumed = await store.get_destination("flaky")
    assert resumed.failure_streak == 0 and resumed.failing_since is None
    assert len(await store.claim("w", 6, 30.0, 10)) == 5


async def _acme_and_globex_billing_claims(store, events: int) -> list:
    """Tenants acme and globex, each with a destination `billing`; `events` events for acme
    published and claimed."""
    for tenant in ("acme", "globex"):
        await store.put_tenant(tenant, TenantFields())
        await store.add_destination(name="billing", url="http://127.0.0.1:9/b",
                                    secret=generate_secret(), event_types=["*"],
                                    max_in_flight=20, tenant=tenant)
    await store.add_events([new_event(f"a{i}", tenant="acme") for i in range(events)])
    return await store.claim("w", events, 30.0, 20)


async def test_auto_pause_log_line_names_the_tenant(store):
    """Two tenants each have a destination `billing`; when the breaker pauses acme's, the
    `destination_auto_paused` line says it is acme's (not globex's, not the default
    tenant's), so an operator resumes the right one."""
    claims = await _acme_and_globex_billing_claims(store, 3)
    retry = Retry(delay_s=60, error="HTTP 503")
    with capture_logs() as logs:
        await store.finish([(c, retry, FAIL) for c in claims], breaker=POLICY)
    assert (await store.get_destination("billing", tenant="acme")).paused
    assert not (await store.get_destination("billing", tenant="globex")).paused
    [line] = [e for e in logs if e["event"] == "destination_auto_paused"]
    assert (line["destination"], line.get("tenant")) == ("billing", "acme")


async def test_a_failing_destination_is_logged_as_a_warning_once_per_run(store):
    """The fifth failed attempt in a row (the operational events' `failing` threshold) logs
    one `destination_failing` warning naming the tenant, whether or not operational events
    are on; the sixth and seventh add none; a success and a new run of five log it again.
    """
    claims = await _acme_and_globex_billing_claims(store, 13)
    retry = Retry(delay_s=60, error="HTTP 503")
    with capture_logs() as logs:
        await store.finish([(c, retry, FAIL) for c in claims[:4]])
        assert not [e for e in logs if e["event"] == "destination_failing"]
        await store.finish([(c, retry, FAIL) for c in claims[4:7]])
    [line] = [e for e in logs if e["event"] == "destination_failing"]
    assert line["log_level"] == "warning"
    assert (line["destination"], line["tenant"], line["failure_streak"],
            line["last_status_code"]) == ("billing", "acme", 5, 503)
    with capture_logs() as again:
        await store.finish([(claims[7], Done(), OK)])
        await store.finish([(c, retry, FAIL) for c in claims[8:13]])
    assert [e["failure_streak"] for e in again if e["event"] == "destination_failing"] == [5]


async def test_gone_pauses_at_once_and_without_breaker_nothing_pauses(
        store, clock, destination_factory):
    """A 410 pauses its destination on the first attempt (reason names the URL); finish
    without a breaker policy only counts the streak."""
    d = await destination_factory("gone", url="http://127.0.0.1:9/gone")
    await destination_factory("counted")
    await store.add_events([new_event("e1")])
    by_dest = {c.destination_id: c for c in await store.claim("w", 10, 30.0, 5)}
    await store.finish([(by_dest[d.id], Dead(error="HTTP 410 (permanent)"), GONE)],
                       breaker=POLICY)
    gone = await store.get_destination("gone")
    assert gone.paused and gone.paused_reason == "410 Gone from http://127.0.0.1:9/gone"
    other = next(c for k, c in by_dest.items() if k != d.id)
    await store.finish([(other, Dead(error="HTTP 410 (permanent)"), GONE)])
    counted = await store.get_destination("counted")
    assert not counted.paused and counted.failure_streak == 1
    assert counted.failing_since == clock()


async def test_destination_policy_fields_are_updatable_and_shown(store, destination_factory):
    """timeout_s, rate_limit_per_s and ordered change through update_destination, appear in
    redacted(), and bad values are refused."""
    await destination_factory("d")
    updated = await store.update_destination("d", timeout_s=2.5, rate_limit_per_s=10,
                                             ordered=True)
    shown = updated.redacted()
    assert (shown["timeout_s"], shown["rate_limit_per_s"], shown["ordered"]) == (2.5, 10.0, True)
    assert shown["failure_streak"] == 0 and shown["previous_secret"] is None
    cleared = await store.update_destination("d", timeout_s=None, ordered=False)
    assert cleared.timeout_s is None and not cleared.ordered
    for bad in ({"timeout_s": 0}, {"rate_limit_per_s": -1}, {"ordered": "yes"}):
        with pytest.raises(ConfigError):
            await store.update_destination("d", **bad)


def test_choose_claims_takes_fresh_work_first_and_caps_late_retries():
    """Late retries sort after fresh work and are capped by max_late; older before newer."""
    candidates = [(True, 1.0, 10, 1), (False, 3.0, 11, 1), (False, 2.0, 12, 2),
                  (True, 0.5, 13, 2)]
    chosen, next_send = choose_claims(candidates, limit=3, max_late=1, rates={}, now_s=10.0)
    assert chosen == [12, 11, 13] and next_send == {}
    assert choose_claims(candidates, limit=10, max_late=None, rates={}, now_s=10.0)[0] == [
        12, 11, 13, 10]
    assert choose_claims(candidates, limit=1, max_late=0, rates={}, now_s=10.0)[0] == [12]


def test_choose_claims_spends_a_rate_limited_destinations_budget():
    """A destination at 1/s with no credit left gives one job now and reports its new
    theoretical arrival time; an unlimited one gives all it offers."""
    candidates = [(False, 1.0, 1, 7), (False, 1.1, 2, 7), (False, 1.2, 3, 8)]
    chosen, next_send = choose_claims(candidates, limit=10, max_late=None,
                                      rates={7: (1.0, 100.0)}, now_s=100.0)
    assert chosen == [1, 3]
    assert next_send == {7: next_send_after(100.0, 100.0, 1.0)}


def test_choose_claims_lets_destinations_take_turns():
    """A destination draining a deep old backlog (1-5, due long ago) does not hold back
    another's fresh jobs (6, 7): they alternate, oldest first within each turn."""
    backlog = [(False, float(n), n, 1) for n in range(1, 6)]
    fresh = [(False, 100.0 + n, 5 + n, 2) for n in (1, 2)]
    chosen, _ = choose_claims(backlog + fresh, limit=4, max_late=None, rates={}, now_s=200.0)
    assert chosen == [1, 6, 2, 7]


def test_destination_slots_is_a_rounded_up_share_of_at_least_one():
    """ceil(concurrency * share), never 0: 64 * 0.5 = 32, 5 * 0.5 -> 3, 1 * 0.1 -> 1."""
    assert destination_slots(64, 0.5) == 32 and destination_slots(5, 0.5) == 3
    assert destination_slots(1, 0.1) == 1 and destination_slots(8, 1.0) == 8
    assert destination_slots(10, 0.3) == 3  # float noise (10 * 0.3 = 3.0000000000000004)


def test_choose_claims_caps_each_destination_at_its_share_of_the_worker():
    """A destination with a deep backlog (and a huge max_in_flight) gets at most
    per_destination slots counting those it holds; the rest go to the others, and the
    limit stays unfilled rather than exceeding the share."""
    hung = [(False, 10.0 + i, 100 + i, 1) for i in range(50)]
    healthy = [(False, 30.0 + i, 200 + i, 2) for i in range(3)]
    chosen, _ = choose_claims(hung + healthy, limit=10, max_late=None, rates={}, now_s=99.0,
                              per_destination=4, held={1: 1})
    assert chosen.count(200) + chosen.count(201) + chosen.count(202) == 3
    assert sum(1 for job in chosen if job < 200) == 3  # 1 held + 3 = the share of 4
    assert len(chosen) == 6
    full, _ = choose_claims(hung, limit=10, max_late=None, rates={}, now_s=99.0,
                            per_destination=4, held={1: 4})
    assert full == []
    uncapped, _ = choose_claims(hung, limit=10, max_late=None, rates={}, now_s=99.0)
    assert len(uncapped) == 10


def test_a_takeover_is_chosen_alone_or_skipped_and_reported():
    """May take over: the lowest-id takeover the rate limits allow, alone (job 4's
    destination 2 has no budget left, so job 5 goes); may not: the rest, and a takeover
    waiting."""
    candidates = [(False, 1.0, 1, 1), (False, 2.0, 4, 2), (False, 3.0, 5, 1), (False, 4.0, 6, 1)]
    request = ClaimRequest(worker="w", limit=8, lease_s=30.0, max_attempts=3)
    limited = {2: (1.0, 100.0)}  # destination 2 may send again at t=100 s
    assert choose_with_takeovers(candidates, {4, 5}, request, rates=limited, now_s=10.0) == (
        [5], {}, True)
    assert choose_with_takeovers(candidates, {5}, request, rates={}, now_s=10.0) == (
        [5], {}, False)
    skipped = replace(request, may_take_over=False)
    assert choose_with_takeovers(candidates, {4, 5}, skipped, rates={}, now_s=10.0) == (
        [1, 6], {}, True)
    assert choose_with_takeovers(candidates, set(), skipped, rates={}, now_s=10.0)[2] is False


def test_fair_room_is_what_the_share_leaves():
    """The candidates a destination may offer: limit without a cap, else share - held."""
    request = ClaimRequest(worker="w", limit=8, lease_s=30.0, max_attempts=3,
                           per_destination=5, held={7: 2})
    assert fair_room(request, 7) == 3 and fair_room(request, 8) == 5
    assert fair_room(replace(request, per_destination=None), 7) == 8
    assert fair_room(replace(request, held={7: 6}), 7) == -1


async def test_claim_keeps_a_destination_within_its_share(store, clock, destination_factory):
    """Through the store: with per_destination=2, a destination with max_in_flight 1000 and a
    backlog gets 2 slots of a 6-job claim, another destination the rest it has."""
    big = await destination_factory("big", max_in_flight=1000, event_types=("big",))
    small = await destination_factory("small", event_types=("small",))
    await store.add_events([new_event(f"b{i}", type_="big") for i in range(20)])
    await store.add_events([new_event(f"s{i}", type_="small") for i in range(2)])
    claims = await store.claim("w", 6, 30.0, 5, per_destination=2, held={big.id: 0})
    per = Counter(c.destination_id for c in claims)
    assert per == {big.id: 2, small.id: 2}
    again = await store.claim("w", 6, 30.0, 5, per_destination=2, held=dict(per))
    assert again == []
    other_worker = await store.claim("w2", 6, 30.0, 5, per_destination=2, held={})
    assert [c.destination_id for c in other_worker] == [big.id, big.id]


async def test_expiring_an_unreadable_previous_secret_fixes_it(store, store_url,
                                                               destination_factory):
    """A previous secret's end that is not a number (a hand edit; PostgreSQL's typed column
    refuses it) pauses the destination at the claim; expiring the previous secret, the
    documented fix, clears it (it signed nothing) instead of failing, and after a resume the
    job is sent, signed with the current secret only."""
    dest = await destination_factory("odd", max_in_flight=10)
    await store.add_events([new_event("e1")])
    hand_edit = ("UPDATE destinations SET previous_secret = secret, "
                 "previous_secret_until = 'abc' WHERE name = 'odd'")
    if store_url.startswith("postgresql://"):
        with pytest.raises(Exception, match="invalid input syntax"):
            await execute_db(store_url, hand_edit)
        return
    await execute_db(store_url, hand_edit)
    assert await store.claim("w", 10, 30.0, 5) == []
    odd = await store.get_destination("odd")
    assert odd.paused and odd.paused_reason is not None
    assert odd.paused_reason.startswith("UnreadableRow: previous_secret_until: TypeError")
    await store.expire_previous_secret("odd")
    await store.set_paused("odd", False)
    [claim] = await store.claim("w", 10, 30.0, 5)
    assert claim.secrets == (dest.secret,)

"""Operational events, stored by the transaction that changes the state they announce
(shared/policy/notify.py says what and when).

Each is an ordinary event (source `_hookline`, a `hookline.` type) with a job for every live
destination subscribed to it by name, after their payload filters: one event of the
destination's tenant for that tenant's subscribers, and one of the default tenant for the
operator's, so a tenant hears only about its own destinations, the operator about all of
them, and an event's jobs always belong to its own tenant. What was last announced about
a destination is kept in its row (`notified_state`, schema 17) and changed with a
compare-and-set in the same transaction: whichever host commits the change announces it,
once; a restart forgets nothing.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT, NewEvent
from hookline.shared.policy import forwarding
from hookline.shared.policy import notify as policy
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.signing import new_message_ids
from hookline.shared.store.fan_out_view import read_fan_out
from hookline.shared.store.filter_tx import load_filters
from hookline.shared.store.jobs_tx import insert_jobs_tx
from hookline.shared.store.metric_deltas import MetricDeltas
from hookline.shared.store.ops import NOTIFY, NOW, AfterCommit, Query, Rows, Tx, count, one

log = get_logger()


def _notification_destination(row: Mapping[str, Any]) -> bool:
    """Whether the destination in `row` is subscribed to a `hookline.` type (a malformed
    stored list, written by hand, holds no such pattern: it must not fail the finish)."""
    try:
        patterns = json.loads(row["event_types"])
    except (TypeError, ValueError):
        return False
    return isinstance(patterns, list) and policy.watches_operations(
        p for p in patterns if isinstance(p, str))


def quiet(row: Mapping[str, Any]) -> bool:
    """True when nothing is announced about the destination in `row`: the operator's
    notification destination (the default tenant's, subscribed to a `hookline.` type), so
    its own failures cannot loop back to it or to another one. A tenant's notification
    destination is announced to the operator only (see :func:`publish_tx`)."""
    return row["tenant_id"] == DEFAULT_TENANT and _notification_destination(row)


def publish_tx(notify: NotifyPolicy, event_type: str, tenant: str,
               data: Mapping[str, Any], *, tenant_hears: bool = True) -> Tx[int]:
    """Store the operational event about a destination of `tenant`: one event for `tenant`,
    with a job for each of its destinations subscribed to it by a `hookline.` pattern, and
    (for another tenant's destination) one event for the default tenant with a job for each
    of the operator's subscribed destinations. Each event's jobs belong to its own tenant's
    destinations, as for any event, so a tenant's views never show the operator's jobs.
    Payload filters apply as at ingest. Returns the jobs made (0: no subscriber, nothing
    stored).

    Args:
        notify: the policy (for the links).
        event_type: one of :data:`hookline.shared.policy.notify.TYPES`.
        tenant: the tenant of the destination the event is about.
        data: the event's figures (destination, tenant, ...); the links are added.
        tenant_hears: False for a tenant's notification destination: only the operator
            hears of it, so it cannot loop back to itself, and a tenant cannot keep the
            operator from hearing of a destination by subscribing it to `hookline.` types.
    """
    owners = {tenant, DEFAULT_TENANT} if tenant_hears else {DEFAULT_TENANT} - {tenant}
    made = 0
    for owner in sorted(owners):
        made += yield from _publish_for(notify, event_type, owner, tenant, data)
    return made


def _publish_about(notify: NotifyPolicy, event_type: str, row: Mapping[str, Any],
                   data: Mapping[str, Any]) -> Tx[int]:
    """:func:`publish_tx` about the destination in `row` (id, tenant_id, event_types)."""
    return (yield from publish_tx(notify, event_type, row["tenant_id"], data,
                                  tenant_hears=not _notification_destination(row)))


def _publish_for(notify: NotifyPolicy, event_type: str, owner: str, tenant: str,
                 data: Mapping[str, Any]) -> Tx[int]:
    """One operational event of `owner` (the destination's tenant, or the default tenant
    for the operator) and its jobs; 0 and nothing stored when no destination of `owner`
    takes it."""
    answers = yield from read_fan_out(None, [(owner, event_type)], [])
    found = answers.view.reach(owner, event_type)
    reached = [destination_id for destination_id, _ in found]
    if not reached:
        return 0  # nobody listens: nothing to store (the state change is still recorded)
    now = yield NOW
    [message_id] = new_message_ids(1, now)
    source_event_id = f"{event_type.removeprefix(policy.PREFIX)}_{secrets.token_hex(8)}"
    body = policy.event_body(source_event_id, event_type, now,
                             {**data, **policy.links(notify, tenant, owner)})
    event = NewEvent(source=policy.SOURCE, source_event_id=source_event_id, type=event_type,
                     body=body, tenant=owner)
    deltas = MetricDeltas()
    filters = yield from load_filters({d: text for d, text in found if text is not None},
                                      [owner])
    if filters is not None:
        reached = list(filters.select(event, reached))
        filters.count(deltas)
    written: list[Any] = []
    if reached:
        [stored] = yield Query("insert_event", {"events": Rows(
            ("message_id", "tenant_id", "source", "source_event_id", "type", "body",
             "forwarded_headers", "trace_context", "schema_problem"),
            [(message_id, owner, policy.SOURCE, source_event_id, event_type, body,
              forwarding.encode(()), None, None)])}, per_row=True)
        written = yield from insert_jobs_tx([(stored["id"], d) for d in reached], deltas)
        yield NOTIFY
        deltas.events(1)
        deltas.notification(event_type.removeprefix(policy.PREFIX))
    yield from deltas.apply()
    if not reached:
        return 0  # every subscriber's filter turned it away (counted as filtered)
    destination = data.get("destination")
    jobs = len(written)  # a destination removed meanwhile (PostgreSQL) got none
    yield AfterCommit(lambda: log.info("operational_event", type=event_type, tenant=tenant,
                                       owner=owner, destination=destination, jobs=jobs))
    return jobs


def moved_tx(destination_id: int, expected: str, state: str) -> Tx[bool]:
    """Set a destination's notified_state to `state` if it is still `expected`: True for
    the one transaction that made the change (it announces it)."""
    return bool((yield count("set_notified_state", destination_id=destination_id,
                             expected=expected, state=state)))


def paused_tx(notify: NotifyPolicy, row: Mapping[str, Any], paused_reason: str | None,
              status_code: int | None = None) -> Tx[None]:
    """Announce that a destination was just paused (the pause itself is done; `row` is its
    row from before or after the pause: id, tenant_id, name, failure_streak, failing_since,
    notified_state, event_types)."""
    if quiet(row):
        return
    yield from moved_tx(row["id"], row["notified_state"], "paused")
    data = {"destination": row["name"], "tenant": row["tenant_id"],
            "reason": policy.pause_cause(paused_reason), "paused_reason": paused_reason,
            "failure_streak": int(row["failure_streak"] or 0),
            "failing_since": policy.iso(row["failing_since"])}
    if status_code is not None:
        data["last_status_code"] = status_code
    yield from _publish_about(notify, policy.PAUSED, row, data)


def recovered_tx(notify: NotifyPolicy, row: Mapping[str, Any]) -> Tx[None]:
    """After a delivery succeeded on a destination announced as failing or paused
    (`row` from destination_succeeded): announce that it delivers again, once."""
    if not (yield from moved_tx(row["id"], row["notified_state"], "ok")) or quiet(row):
        return
    yield from _publish_about(notify, policy.RECOVERED, row, {
        "destination": row["name"], "tenant": row["tenant_id"],
        "previous_state": row["notified_state"], "paused": bool(row["paused"])})


def failing_tx(notify: NotifyPolicy, run: Mapping[str, Any], now: float,
               status_code: int | None, error: str | None) -> Tx[None]:
    """After a failed attempt (`run` from destination_failed): announce the destination as
    failing when its run passed a threshold and nothing was announced since it was ok."""
    if (run["notified_state"] != "ok" or run["paused"]
            or not policy.failing_due(int(run["failure_streak"]), run["failing_since"], now,
                                      notify)
            or quiet(run) or not (yield from moved_tx(run["id"], "ok", "failing"))):
        return
    yield from _publish_about(notify, policy.FAILING, run, {
        "destination": run["name"], "tenant": run["tenant_id"],
        "failure_streak": int(run["failure_streak"]),
        "failing_since": policy.iso(run["failing_since"]),
        "failing_for_s": round(now - (run["failing_since"] or now), 3),
        "last_status_code": status_code, "last_error": error,
        "thresholds": {"failure_streak": notify.failing_streak,
                       "failing_after_s": notify.failing_after_s}})


def dead_letters_tx(notify: NotifyPolicy, run: Mapping[str, Any], now: float,
                    error: str | None) -> Tx[None]:
    """After a job died (`run` from destination_failed, its dead-letter count included):
    announce the destination's growing dead letters when past the step and interval."""
    unnoticed = int(run["dead_letters_unnoticed"])
    if (not policy.dead_letters_due(unnoticed, run["dead_letters_noticed_at"], now, notify)
            or quiet(run)):
        return
    if not (yield count("dead_letters_noticed", destination_id=run["id"], unnoticed=unnoticed)):
        return
    counts = yield one("destination_job_counts", destination_id=run["id"])
    yield from _publish_about(notify, policy.DEAD_LETTERS_GROWING, run, {
        "destination": run["name"], "tenant": run["tenant_id"],
        "new_dead_letters": unnoticed, "dead_letters": int(counts["dead"]),
        "pending": int(counts["pending"]),
        "since": policy.iso(run["dead_letters_noticed_at"]), "last_error": error,
        "thresholds": {"dead_letters_step": notify.dead_letters_step,
                       "dead_letters_interval_s": notify.dead_letters_interval_s}})


def rotated_tx(notify: NotifyPolicy, row: Mapping[str, Any], overlap_s: float) -> Tx[None]:
    """After a secret rotation (`row`: the destination's row after it): announce it."""
    if quiet(row):
        return
    yield from _publish_about(notify, policy.SECRET_ROTATED, row, {
        "destination": row["name"], "tenant": row["tenant_id"], "overlap_s": overlap_s,
        "previous_secret_until": policy.iso(row["previous_secret_until"])})

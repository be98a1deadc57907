"""Operational events: what hookline tells subscribers about its own destinations, as pure
functions (no I/O). The store decides and stores them inside the transactions that change a
destination's state (shared/store/notify_tx.py); they are delivered like any event.

- Types live in the reserved `hookline.` namespace (publishers are refused it, see
  :func:`reserved_type_problem`); only subscriptions that name it explicitly receive them
  (`*` does not: an existing catch-all destination gets no new kind of event).
- A destination subscribed to any `hookline.` type is a notification destination. No
  operational event is made about the operator's, and one about a tenant's goes to the
  operator's only, so a failing notification destination cannot feed itself, or another
  one, in a loop (shared/store/notify_tx.py).
- :func:`failing_due` and :func:`dead_letters_due` are the thresholds; :class:`NotifyPolicy`
  holds them (Config `notify_*` settings).
- :func:`event_body` builds the stored body; :func:`chat_body` the `{"text": ...}` a
  destination with body_format `slack` receives instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.policy.delivery import UNREADABLE_PREFIX

PREFIX = "hookline."
"""The reserved type namespace of operational events."""
FAILING = "hookline.destination.failing"
PAUSED = "hookline.destination.paused"
RECOVERED = "hookline.destination.recovered"
SECRET_ROTATED = "hookline.destination.secret_rotated"
DEAD_LETTERS_GROWING = "hookline.dead_letters.growing"
TYPES = (FAILING, PAUSED, RECOVERED, SECRET_ROTATED, DEAD_LETTERS_GROWING)
SOURCE = "_hookline"
"""The source of operational events (a `_` name no configured source can have)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyPolicy:
    """When operational events are made.

    Attributes:
        failing_streak: consecutive failed attempts that make a destination `failing`;
            0 disables this trigger.
        failing_after_s: seconds of failing without a success that make it `failing` (at
            its next failed attempt); 0 disables this trigger.
        dead_letters_step: new dead letters of one destination since the last notice that
            make a `hookline.dead_letters.growing`; 0 disables it.
        dead_letters_interval_s: shortest time between two such notices, seconds.
        public_url: hookline's public base URL for the links in events (None: relative).
    """

    failing_streak: int = 5
    failing_after_s: float = 600.0
    dead_letters_step: int = 10
    dead_letters_interval_s: float = 3600.0
    public_url: str | None = None


def is_operational(event_type: str) -> bool:
    """True for a type of the reserved `hookline.` namespace."""
    return event_type.startswith(PREFIX)


def reserved_type_problem(event_type: str) -> str | None:
    """Why a publisher may not use `event_type` (the reserved namespace), or None."""
    if is_operational(event_type):
        return (f"{event_type!r}: the {PREFIX} prefix is reserved for hookline's own "
                "operational events")
    return None


def watches_operations(event_types: Iterable[str]) -> bool:
    """True when one of a destination's subscription patterns names the `hookline.`
    namespace (a notification destination: see the module docstring for what is announced
    about it)."""
    return any(pattern.startswith(PREFIX) for pattern in event_types)


def failing_due(streak: int, failing_since: float | None, now_s: float,
                policy: NotifyPolicy) -> bool:
    """True when a failure run is long enough to announce (`hookline.destination.failing`).

    Args:
        streak: consecutive failed attempts, this one included.
        failing_since: unix seconds of the run's first failure, or None.
        now_s: unix seconds now.
        policy: the thresholds.
    """
    if policy.failing_streak and streak >= policy.failing_streak:
        return True
    return bool(policy.failing_after_s and failing_since is not None
                and now_s - failing_since >= policy.failing_after_s)


def dead_letters_due(unnoticed: int, noticed_at: float | None, now_s: float,
                     policy: NotifyPolicy) -> bool:
    """True when a destination's new dead letters call for `hookline.dead_letters.growing`.

    Args:
        unnoticed: jobs of the destination that died since the last notice.
        noticed_at: unix seconds of the last notice, or None (never).
        now_s: unix seconds now.
        policy: the step and the shortest interval between notices.
    """
    if not policy.dead_letters_step or unnoticed < policy.dead_letters_step:
        return False
    return noticed_at is None or now_s - noticed_at >= policy.dead_letters_interval_s


def pause_cause(paused_reason: str | None) -> str:
    """`410`, `breaker`, `unreadable` or `manual`: why a destination was paused, from its
    paused_reason (see :func:`hookline.shared.policy.delivery.auto_pause_reason`; `unreadable`:
    a claim met a stored value of it no request can be made of)."""
    if paused_reason is not None and paused_reason.startswith("410 Gone"):
        return "410"
    if paused_reason is not None and paused_reason.startswith("circuit breaker:"):
        return "breaker"
    if paused_reason is not None and paused_reason.startswith(UNREADABLE_PREFIX):
        return "unreadable"
    return "manual"


def iso(unix_s: float | None) -> str | None:
    """Unix seconds as an ISO 8601 UTC timestamp with milliseconds (None stays None)."""
    if unix_s is None:
        return None
    stamp = datetime.fromtimestamp(unix_s, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def links(policy: NotifyPolicy, tenant: str, owner: str) -> dict[str, str]:
    """The links of an operational event about a destination of `tenant`, in the copy of
    `owner`, absolute under `policy.public_url`, else relative to hookline's address: for
    the operator's copy (`owner` is the default tenant) the dashboard's page of the tenant's
    destinations, plus the portal when it is another tenant's; for the tenant's own copy the
    portal only (a customer cannot open the operator's dashboard, and its address is the
    operator's business)."""
    base = (policy.public_url or "").rstrip("/")
    found = {"dashboard_url": f"{base}/#/destinations?tenant={tenant}"} \
        if owner == DEFAULT_TENANT else {}
    if tenant != DEFAULT_TENANT:
        found["portal_url"] = f"{base}/portal/"
    return found


def event_body(event_id: str, event_type: str, now_s: float, data: Mapping[str, Any]) -> bytes:
    """The stored body of an operational event: hookline's envelope (`id`, `type`, `data`)
    plus `timestamp`, compact JSON."""
    return json.dumps({"id": event_id, "type": event_type, "timestamp": iso(now_s),
                       "data": dict(data)}, separators=(",", ":")).encode()


def chat_text(event_type: str, data: Mapping[str, Any]) -> str:
    """One line of Slack-compatible mrkdwn describing an operational event. A figure the
    data lacks (a test delivery's example data, say) is left out of the sentence rather
    than shown as `None`."""
    name = data.get("destination")
    who = f"`{name}`" if name is not None else "(unnamed)"
    if data.get("tenant") not in (None, DEFAULT_TENANT):
        who += f" (tenant `{data.get('tenant')}`)"
    last = data.get("last_status_code")
    last_text = (f", last HTTP {last}" if last is not None
                 else f", last error: {data['last_error']}" if data.get("last_error") else "")
    if event_type == FAILING:
        streak, since = data.get("failure_streak"), data.get("failing_since")
        run = " ".join(part for part in (
            f"{streak} failed attempts in a row" if streak is not None else "",
            f"since {since}" if since is not None else "") if part)
        text = (f":warning: hookline destination {who} is failing"
                f"{': ' + run if run else ''}{last_text}")
    elif event_type == PAUSED:
        cause = f" ({data['reason']})" if data.get("reason") is not None else ""
        text = (f":no_entry: hookline destination {who} was paused{cause}: "
                f"{data.get('paused_reason') or 'no reason given'}")
    elif event_type == RECOVERED:
        text = f":white_check_mark: hookline destination {who} delivers again"
    elif event_type == SECRET_ROTATED:
        until = data.get("previous_secret_until")
        text = (f":key: hookline destination {who} has a new signing secret"
                + (f"; the previous one signs too until {until}" if until is not None else ""))
    elif event_type == DEAD_LETTERS_GROWING:
        new, total = data.get("new_dead_letters"), data.get("dead_letters")
        text = (f":skull: hookline destination {who}: "
                f"{'' if new is None else f'{new} '}new dead letters"
                f"{'' if total is None else f' ({total} in all)'}{last_text}")
    else:
        text = f"hookline {event_type} about {who}"
    for key, label in (("dashboard_url", "dashboard"), ("portal_url", "portal")):
        url = data.get(key)
        if url and str(url).startswith("http"):
            return f"{text} <{url}|{label}>"
    return text


def chat_body(body: bytes) -> bytes:
    """The `{"text": ...}` body a `slack` destination receives for a stored operational
    event body (a body that is not one is returned unchanged)."""
    try:
        document = json.loads(body)
        text = chat_text(str(document["type"]), document["data"])
    except (ValueError, KeyError, TypeError):
        return body
    return json.dumps({"text": text}, separators=(",", ":")).encode()

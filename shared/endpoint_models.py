"""Where events come from and where they go: destinations (delivery targets, their
subscriptions, secrets and delivery policy) and sources (inbound providers and how their
requests are verified), as the store returns them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hookline.shared.models import DEFAULT_TENANT


def subscribes(event_types: Sequence[str], event_type: str) -> bool:
    """True when one of the subscription patterns `event_types` matches `event_type`:
    exactly, by `prefix.*`, or `*` (which does not match the operational events of the
    reserved `hookline.` namespace: they go only to subscriptions that name it)."""
    catch_all = not event_type.startswith("hookline.")
    for pattern in event_types:
        if (pattern == "*" and catch_all) or pattern == event_type:
            return True
        if pattern.endswith(".*") and event_type.startswith(pattern[:-1]):
            return True
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Destination:
    """A delivery target (endpoint).

    Attributes:
        event_types: subscriptions: exact types, `prefix.*` patterns, or `*` for all.
        max_in_flight: most jobs of this destination running at once, across all workers.
        secret: `whsec_` signing secret; never log it.
        previous_secret: the secret before the last rotation, still signed with (after the
            current one) until `previous_secret_until` (unix s).
        timeout_s: attempt timeout override, seconds (None = Config.attempt_timeout_s);
            workers keep it below the lease.
        rate_limit_per_s: most requests per second across all workers (None = no limit).
        ordered: FIFO mode: one request at a time, oldest unfinished job first.
        propagate_trace: each attempt's request carries its span's W3C `traceparent` (and
            `tracestate`) while tracing is on (OPERATIONS.md, "Tracing").
        failure_streak: consecutive failed attempts (circuit breaker); 0 after a success.
        failing_since: unix seconds of the first failure of the current run, or None.
        headers: custom request headers, (name, value) pairs sent with every attempt (names
            are tokens, values printable ASCII: see shared/policy/rules.py `headers`).
        filter: its payload filter (shared/policy/filters.py), None: every subscribed event.
    """

    id: int
    name: str
    url: str
    secret: str
    event_types: tuple[str, ...]
    max_in_flight: int
    paused: bool
    paused_reason: str | None
    created_at: float
    # Delivery policy (migration 003); defaults mean "no override".
    previous_secret: str | None = None
    previous_secret_until: float | None = None
    timeout_s: float | None = None
    rate_limit_per_s: float | None = None
    ordered: bool = False
    failure_streak: int = 0
    failing_since: float | None = None
    headers: tuple[tuple[str, str], ...] = ()  # migration 005
    tenant: str = DEFAULT_TENANT  # migration 012: the tenant it belongs to
    filter: dict[str, Any] | None = None  # migration 016
    body_format: str = "standard"  # migration 017: `slack` renders operational events as text
    propagate_trace: bool = False  # migration 019

    @classmethod
    def from_row(cls, row: Any) -> Destination:
        """Build from a row with the destinations table's column names."""
        keys = set(row.keys())

        def opt(name: str, default: Any = None) -> Any:
            return row[name] if name in keys and row[name] is not None else default

        return cls(
            id=row["id"], name=row["name"], url=row["url"], secret=row["secret"],
            event_types=tuple(json.loads(row["event_types"])),
            max_in_flight=row["max_in_flight"], paused=bool(row["paused"]),
            paused_reason=row["paused_reason"], created_at=row["created_at"],
            previous_secret=opt("previous_secret"),
            previous_secret_until=opt("previous_secret_until"),
            timeout_s=opt("timeout_s"), rate_limit_per_s=opt("rate_limit_per_s"),
            ordered=bool(opt("ordered", 0)), failure_streak=int(opt("failure_streak", 0)),
            failing_since=opt("failing_since"), headers=_shown_headers(opt("headers")),
            tenant=opt("tenant_id", DEFAULT_TENANT),
            filter=json.loads(opt("filter")) if opt("filter") else None,
            body_format=opt("body_format", "standard"),
            propagate_trace=bool(opt("propagate_trace", 0)),
        )

    def active_secrets(self, now_s: float) -> tuple[str, ...]:
        """Secrets to sign with at `now_s` (unix s): the current one first, then the previous
        one while its rotation overlap lasts."""
        if self.previous_secret and (self.previous_secret_until or 0) > now_s:
            return (self.secret, self.previous_secret)
        return (self.secret,)

    def subscribes_to(self, event_type: str) -> bool:
        """True when one subscription matches `event_type` exactly, by `prefix.*`, or is `*`."""
        return subscribes(self.event_types, event_type)

    def redacted(self) -> dict[str, Any]:
        """A dict for display: everything but the secret, which shows only its prefix."""
        return {
            "id": self.id, "tenant": self.tenant, "name": self.name, "url": self.url,
            "secret": self.secret[:10] + "…", "event_types": list(self.event_types),
            "max_in_flight": self.max_in_flight, "paused": self.paused,
            "paused_reason": self.paused_reason, "created_at": self.created_at,
            "previous_secret": None if self.previous_secret is None
            else self.previous_secret[:10] + "…",
            "previous_secret_until": self.previous_secret_until, "timeout_s": self.timeout_s,
            "rate_limit_per_s": self.rate_limit_per_s, "ordered": self.ordered,
            "propagate_trace": self.propagate_trace,
            "failure_streak": self.failure_streak, "failing_since": self.failing_since,
            # Values may be credentials (an API key the receiver wants): names only.
            "headers": {name: "***" for name, _ in self.headers},
            "filter": self.filter,
            "body_format": self.body_format,
        }


SourceScheme = Literal["github", "stripe", "standard", "token"]
SOURCE_SCHEMES: tuple[SourceScheme, ...] = ("github", "stripe", "standard", "token")


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """An inbound source: a provider posting to `POST /v1/sources/{name}`.

    Attributes:
        name: the URL path segment and the `source` of its events (the dedupe namespace).
        scheme: how requests are verified: `github` (X-Hub-Signature-256), `stripe`
            (Stripe-Signature), `standard` (Standard Webhooks), `token` (Authorization: Bearer).
        secret: the signing secret (a `whsec_` secret for `standard`) or the bearer token;
            never log it.
        created_at: unix seconds.
    """

    id: int
    name: str
    scheme: SourceScheme
    secret: str
    created_at: float

    @classmethod
    def from_row(cls, row: Any) -> Source:
        """Build from a row with the sources table's column names."""
        return cls(id=row["id"], name=row["name"], scheme=row["scheme"], secret=row["secret"],
                   created_at=row["created_at"])

    def redacted(self) -> dict[str, Any]:
        """A dict for display: the secret shows only a short prefix (`whsec_` + 4 characters,
        or 4 characters of any other secret)."""
        shown = 10 if self.secret.startswith("whsec_") else 4
        return {"id": self.id, "name": self.name, "scheme": self.scheme,
                "secret": self.secret[:shown] + "…", "created_at": self.created_at}


def _shown_headers(stored: str | None) -> tuple[tuple[str, str], ...]:
    """The headers a listing shows: none when the stored value is not a JSON object (a hand
    edit; the claim that meets it pauses the destination, naming it in paused_reason), so
    the destination can still be read, fixed and resumed."""
    try:
        return parse_headers(stored)
    except (ValueError, TypeError, AttributeError):
        return ()


def parse_headers(stored: str | None) -> tuple[tuple[str, str], ...]:
    """A destination's stored `headers` column (a JSON object; None or '' = none) as
    (name, value) pairs in stored order."""
    if not stored or stored == "{}":  # most destinations: no JSON to parse per claim
        return ()
    return tuple((str(name), str(value)) for name, value in json.loads(stored).items())

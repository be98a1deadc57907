"""The rule book: what a valid destination, source and retention setting is.

Pure functions that check and normalise one value each and raise
:class:`hookline.shared.errors.InvalidSetting` (field, detail) when it breaks its rule. The CLI, the
admin API and every store backend call these same functions, so one bad value gets one
message wherever it is typed: the CLI prints it and exits 2, the admin API answers 400 with
`{"error": "invalid_request", "field": ..., "detail": ...}`, the store raises it.

Field names are the admin API's (`max_in_flight`, `event_types`); the CLI adds its flag.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from hookline.shared.endpoint_models import SOURCE_SCHEMES, SourceScheme
from hookline.shared.errors import ConfigError, InvalidSetting
from hookline.shared.policy.filters import check_filter
from hookline.shared.policy.forwarding import MEANING_HEADERS
from hookline.shared.policy.inputs import (
    EVENT_TYPE_RE,
    RESERVED_SOURCE_PREFIX,
    SOURCE_NAME_RE,
    refuse_unknown,
)
from hookline.shared.policy.netguard import is_legacy_ipv4
from hookline.shared.signing import secret_key
from hookline.shared.timeparse import parse_duration

# -- destinations --------------------------------------------------------------------------

REMOVED_MARK = "~"
"""A removed destination or source keeps its row as `NAME~removed-ID`, so a live name never
holds this character (else it could be mistaken for, or collide with, a removed one)."""
MAX_NAME_CHARS = 200
"""Longest destination name, characters."""
DEFAULT_EVENT_TYPES = ("*",)
"""A destination added without event types subscribes to every event."""
DEFAULT_MAX_IN_FLIGHT = 10
"""Concurrent requests to a destination across all workers when none is given."""
MAX_IN_FLIGHT_LIMIT = 1_000_000
"""Largest accepted `max_in_flight` (the column is a 32-bit integer on PostgreSQL)."""
EVENT_TYPE_PATTERN = re.compile(rf"\*|{EVENT_TYPE_RE.pattern}(\.\*)?")
"""A subscription: an event type (ingest's token rule), `prefix.*`, or `*`."""

HEADER_NAME_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}")
"""A custom header name: an RFC 9110 token (section 5.1), so it cannot carry `:`, spaces or
line breaks."""
HEADER_VALUE_RE = re.compile(r"[\x20-\x7e]{0,1024}")
"""A custom header value: printable ASCII only (no CR, LF or other control characters, which
could end the header and inject another)."""
_WIRE_TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name as HTTP accepts it: an RFC 9110 token of any length."""
_FORBIDDEN_VALUE_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""What no header value may hold on the wire: control characters other than tab (RFC 9110
section 5.5); CR and LF above all, which would end the header and start another."""
MAX_CUSTOM_HEADERS = 20
RESERVED_HEADERS = frozenset({
    "webhook-id", "webhook-timestamp", "webhook-signature", "content-type", "content-length",
    "content-encoding", "transfer-encoding", "host", "connection", "keep-alive", "te",
    "trailer", "upgrade", "expect", "proxy-authorization", "user-agent"}) | MEANING_HEADERS
"""Names hookline or HTTP itself sets: a destination cannot override the signature, the
framing or what hookline says about the event (`webhook-event-type`, `webhook-source`,
`webhook-source-id`: shared/policy/forwarding.py)."""


def destination_name(value: Any) -> str:
    """A destination name: a non-blank string of at most MAX_NAME_CHARS, without `~` or
    control characters. Returned unchanged. Raises InvalidSetting("name")."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidSetting("name", f"must be a non-empty string, not {value!r}")
    if REMOVED_MARK in value:
        raise InvalidSetting("name", f"must not contain '{REMOVED_MARK}' (removed destinations "
                                     f"are renamed NAME~removed-ID), not {value!r}")
    if len(value) > MAX_NAME_CHARS or any(ord(c) < 0x20 or ord(c) == 0x7f for c in value):
        raise InvalidSetting("name", f"must be at most {MAX_NAME_CHARS} characters without "
                                     f"control characters, not {value[:40]!r}")
    return value


def unsendable_url(url: str) -> str | None:
    """Why no request could ever be sent to `url`, or None: a port that is not a number
    from 1 to 65535. (The sender fails such a job for good instead of retrying it for days:
    a row stored before the URL rule. A space is not one: the HTTP client percent-encodes
    it, so a stored URL holding one is still sent; only new URLs refuse it.)"""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unbalanced [ in the host
        return f"is not a valid URL ({exc})"
    try:
        port = parts.port
    except ValueError:  # not a number, or past 65535
        port = 0
    if port == 0:
        return ("port must be a number from 1 to 65535, not "
                f"{parts.netloc.rpartition(':')[2][:20]!r}")
    return None


def destination_url(value: Any) -> str:
    """An `http://` or `https://` URL with a host the sender can connect to: no space or
    control character anywhere (percent-encode them), a port from 1 to 65535 when one is
    given, and an IPv4 host written as four decimal numbers (`2130706433`, `0x7f000001`
    and `127.1` are refused, not guessed at). Returned unchanged.

    Raises:
        InvalidSetting("url"): naming what is wrong.
    """
    ok = isinstance(value, str) and value.startswith(("http://", "https://"))
    try:
        parts = urlsplit(value) if ok else None
        ok = ok and parts is not None and bool(parts.hostname)
    except ValueError:  # e.g. an unbalanced [ in the host
        ok = False
    if not ok or parts is None:
        raise InvalidSetting("url", f"must be http:// or https:// with a host, not {value!r}")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7f for c in value):
        raise InvalidSetting("url", "must not contain spaces or control characters "
                                    f"(percent-encode them), not {value[:80]!r}")
    if (problem := unsendable_url(value)) is not None:
        raise InvalidSetting("url", problem)
    host = parts.hostname or ""
    if is_legacy_ipv4(host):
        raise InvalidSetting("url", f"write an IPv4 host as four decimal numbers (a.b.c.d), "
                                    f"not {host!r}")
    return str(value)


def event_types(value: Any) -> list[str]:
    """A non-empty list of subscriptions (a lone string is one), each an event type,
    `prefix.*` or `*` after stripping spaces. Raises InvalidSetting("event_types")."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        raise InvalidSetting("event_types", f"must be a non-empty list, not {value!r}")
    out = []
    for item in value:
        if not isinstance(item, str) or not EVENT_TYPE_PATTERN.fullmatch(item.strip()):
            raise InvalidSetting("event_types", f"each must be a type, `prefix.*` or `*`, "
                                                f"not {item!r}")
        out.append(item.strip())
    return out


def max_in_flight(value: Any) -> int:
    """An integer from 1 to MAX_IN_FLIGHT_LIMIT. Raises InvalidSetting("max_in_flight")."""
    if (isinstance(value, bool) or not isinstance(value, int)
            or not 1 <= value <= MAX_IN_FLIGHT_LIMIT):
        raise InvalidSetting("max_in_flight", f"must be an integer from 1 to "
                                              f"{MAX_IN_FLIGHT_LIMIT}, not {value!r}")
    return value


def headers(value: Any) -> dict[str, str]:
    """A destination's custom headers: an object of name -> value.

    Rules: at most MAX_CUSTOM_HEADERS; names are RFC 9110 tokens (HEADER_NAME_RE), unique
    regardless of case, and not in RESERVED_HEADERS; values are printable ASCII
    (HEADER_VALUE_RE), so no header can be injected through them.

    Returns:
        The headers, in the given order.

    Raises:
        InvalidSetting("headers"): naming the offending header.
    """
    if not isinstance(value, Mapping):
        raise InvalidSetting("headers", f"must be an object of name -> value, not {value!r}")
    if len(value) > MAX_CUSTOM_HEADERS:
        raise InvalidSetting("headers", f"at most {MAX_CUSTOM_HEADERS} custom headers, "
                                        f"not {len(value)}")
    seen: set[str] = set()
    for name, text in value.items():
        if (problem := header_problem(name, text)) is not None:
            raise InvalidSetting("headers", problem)
        if name.lower() in RESERVED_HEADERS:
            raise InvalidSetting("headers", f"header {name!r} is set by hookline or HTTP and "
                                            "cannot be overridden")
        if name.lower() in seen:
            raise InvalidSetting("headers", f"header {name!r} is given twice")
        seen.add(name.lower())
    return dict(value)


def header_problem(name: Any, value: Any, *, stored: bool = False) -> str | None:
    """Why one request header breaks the header rule, naming it, or None when it is fine.

    The rule: a name is an RFC 9110 token (section 5.1); a value holds no control character
    that would end the header and start another (CR, LF). Saving a destination's headers
    applies it strictly (`stored` False): names of 1-64 characters (HEADER_NAME_RE), values
    of printable ASCII up to 1024 characters (HEADER_VALUE_RE). At send time (`stored` True)
    it is lenient toward rows written before the strict form, or directly into the database,
    and toward headers forwarded from a provider: any token, and any value without control
    characters other than tab (RFC 9110 section 5.5) can still go on the wire.

    Args:
        name: the header name.
        value: its value.
        stored: apply the lenient form (a stored header about to be sent).

    Returns:
        The reason (the header named, its value never echoed), or None.
    """
    if stored:
        if not isinstance(name, str) or not _WIRE_TOKEN_RE.fullmatch(name):
            return f"header name {str(name)[:64]!r} is not a valid HTTP header name"
        if (bad := _FORBIDDEN_VALUE_RE.search(value)) is not None:
            char = {"\r": "CR", "\n": "LF"}.get(bad.group(), f"control character {bad.group()!r}")
            return (f"header {name!r} has a value holding {char}, which cannot be sent; fix the "
                    "destination's headers")
        return None
    if not isinstance(name, str) or not HEADER_NAME_RE.fullmatch(name):
        return (f"header name {name!r} must be a token of 1-64 characters (letters, digits, "
                "!#$%&'*+-.^_`|~)")
    if not isinstance(value, str) or not HEADER_VALUE_RE.fullmatch(value):
        return (f"header {name!r}: the value must be printable ASCII of at most 1024 "
                "characters (no control characters)")
    return None


def optional_positive(field: str, value: Any) -> float | None:
    """None (clears an override) or a finite number above zero (seconds, or requests per
    second). Raises InvalidSetting(field)."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not 0 < value < math.inf):
        raise InvalidSetting(field, f"must be a number above zero or null, not {value!r}")
    return float(value)


MIN_RATE_LIMIT_PER_S = 0.001
"""The slowest rate limit a destination may have: one request every 1,000 s. A slower one
(1e-300, say) would hold its next job back for ever."""


def rate_limit(field: str, value: Any) -> float | None:
    """None (no limit) or requests per second, at least MIN_RATE_LIMIT_PER_S. Raises
    InvalidSetting(field)."""
    limit = optional_positive(field, value)
    if limit is not None and limit < MIN_RATE_LIMIT_PER_S:
        raise InvalidSetting(field, f"must be at least {MIN_RATE_LIMIT_PER_S} (one request "
                                    f"every {1 / MIN_RATE_LIMIT_PER_S:,.0f} s) or null, "
                                    f"not {value!r}")
    return limit


def flag(field: str, value: Any) -> int:
    """true or false, stored as 1 or 0. Raises InvalidSetting(field)."""
    if not isinstance(value, bool):
        raise InvalidSetting(field, f"must be true or false, not {value!r}")
    return int(value)


BODY_FORMATS = ("standard", "slack")
"""A destination's body_format: `standard` (the stored body, always for ordinary events) or
`slack` (operational events as `{"text": ...}`, for a chat tool's incoming webhook)."""


def body_format(value: Any) -> str:
    """One of BODY_FORMATS. Raises InvalidSetting("body_format")."""
    if value not in BODY_FORMATS:
        raise InvalidSetting("body_format", f"must be one of {', '.join(BODY_FORMATS)}, "
                                            f"not {value!r}")
    return str(value)


def destination_secret(value: Any) -> str:
    """A `whsec_` secret whose base64 key holds at least 16 bytes. Raises
    InvalidSetting("secret")."""
    if not isinstance(value, str):
        raise InvalidSetting("secret", "must be a string")
    try:
        secret_key(value)
    except ConfigError as exc:
        raise InvalidSetting("secret", str(exc)) from None
    return value


#: Destination fields `update_destination` may change: field (= column) name -> rule that
#: returns the normalised value or raises InvalidSetting. The CLI `destinations update` and
#: `PATCH /v1/admin/destinations/{name}` accept exactly these keys.
DESTINATION_UPDATERS: dict[str, Callable[[Any], Any]] = {
    "url": destination_url,
    "event_types": event_types,
    "max_in_flight": max_in_flight,
    "timeout_s": lambda v: optional_positive("timeout_s", v),
    "rate_limit_per_s": lambda v: rate_limit("rate_limit_per_s", v),
    "ordered": lambda v: flag("ordered", v),
    "propagate_trace": lambda v: flag("propagate_trace", v),
    "headers": headers,
    "filter": check_filter,  # a payload filter (shared/policy/filters.py); null removes it
    "body_format": body_format,
}


def destination_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Check and normalise an `update_destination` change set.

    Raises:
        InvalidSetting: empty (field "changes"), an unknown field (named), or an invalid
            value.
    """
    if not changes:
        raise InvalidSetting("changes", f"nothing to change: give at least one of "
                                        f"{', '.join(sorted(DESTINATION_UPDATERS))}")
    # Said for the admin and the tenant API alike (one handler serves both).
    rotate = ("; a secret is rotated instead (POST .../destinations/NAME/rotate-secret, "
              "beside this route)" if "secret" in changes else "")
    refuse_unknown(changes, DESTINATION_UPDATERS, error=InvalidSetting, hint=rotate)
    return {k: DESTINATION_UPDATERS[k](v) for k, v in changes.items()}


@dataclass(frozen=True, slots=True)
class NewDestination:
    """A destination's fields, checked and normalised (see :func:`new_destination`)."""

    name: str
    url: str
    secret: str
    event_types: list[str]
    max_in_flight: int
    headers: dict[str, str]
    timeout_s: float | None = None
    rate_limit_per_s: float | None = None
    ordered: bool = False
    filter: dict[str, Any] | None = None
    propagate_trace: bool = False


def new_destination(*, name: Any, url: Any, secret: Any, event_types: Any = DEFAULT_EVENT_TYPES,
                    max_in_flight: Any = DEFAULT_MAX_IN_FLIGHT, headers: Any = None,
                    timeout_s: Any = None, rate_limit_per_s: Any = None,
                    ordered: Any = False, filter: Any = None, propagate_trace: Any = False
                    ) -> NewDestination:
    """Check every field of a destination to add, in a fixed order (name, url, secret,
    event_types, max_in_flight, headers, timeout_s, rate_limit_per_s, ordered, filter,
    propagate_trace) so the first problem reported is the same everywhere. `headers` None
    means none; `timeout_s` and `rate_limit_per_s` None mean no override (seconds, requests
    per second); `filter` None means every subscribed event is delivered. Raises
    InvalidSetting naming the field."""
    return NewDestination(
        name=destination_name(name), url=destination_url(url),
        secret=destination_secret(secret), event_types=_event_types(event_types),
        max_in_flight=_max_in_flight(max_in_flight),
        headers=_headers({} if headers is None else headers),
        timeout_s=optional_positive("timeout_s", timeout_s),
        rate_limit_per_s=rate_limit("rate_limit_per_s", rate_limit_per_s),
        ordered=bool(flag("ordered", ordered)), filter=check_filter(filter),
        propagate_trace=bool(flag("propagate_trace", propagate_trace)))


# The keyword arguments of new_destination shadow the rules of the same name.
_event_types, _max_in_flight, _headers = event_types, max_in_flight, headers

DESTINATION_FIELDS = ("name", "url", "secret", "event_types", "max_in_flight", "headers",
                      "timeout_s", "rate_limit_per_s", "ordered", "filter", "propagate_trace")
"""The fields a destination is created with (`POST /v1/admin/destinations` takes exactly
these; all but name and url are optional)."""


def destination_fields(fields: Mapping[str, Any], generated_secret: str, *,
                       also: Collection[str] = ()) -> NewDestination:
    """Check a destination to add given as an object of DESTINATION_FIELDS (the admin API's
    body): unknown fields are refused first, then every field as :func:`new_destination`
    does; a field left out takes its default, `secret` the `generated_secret`. `also`: the
    fields the caller took out of the body itself (the admin API's `tenant`), listed among
    the accepted ones when a field is refused.

    Raises:
        InvalidSetting: an unknown field (the first named, all listed), a missing name or
            url, or an invalid value.
    """
    refuse_unknown(fields, (*DESTINATION_FIELDS, *also), error=InvalidSetting)
    given = {k: v for k, v in fields.items() if k not in ("name", "url", "secret", *also)}
    secret = fields.get("secret")
    return new_destination(name=fields.get("name"), url=fields.get("url"),
                           secret=generated_secret if secret is None else secret, **given)


DEFAULT_ROTATION_OVERLAP_S = 86_400.0
"""How long the previous secret keeps signing after a rotation when no overlap is given."""
MAX_ROTATION_OVERLAP_S = 7 * 86_400.0
"""Longest accepted rotation overlap, seconds (receivers should move to the new secret within
a week; a longer overlap keeps a possibly leaked secret valid)."""


def rotation_overlap(value: Any) -> float:
    """How long the previous secret keeps signing after a rotation: a number of seconds from
    0 to MAX_ROTATION_OVERLAP_S. Raises InvalidSetting("overlap_s")."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not 0 <= value <= MAX_ROTATION_OVERLAP_S):
        raise InvalidSetting("overlap_s", f"must be a number of seconds from 0 to "
                                          f"{MAX_ROTATION_OVERLAP_S:.0f} (7 days), "
                                          f"not {value!r}")
    return float(value)


# -- inbound sources -----------------------------------------------------------------------

RESERVED_SOURCE_NAMES = frozenset({"api"})
"""`api` is the source of events posted to POST /v1/events without one."""
MIN_SOURCE_SECRET_CHARS = 16
"""Shortest accepted GitHub/Stripe secret or bearer token, characters."""


def source_name(value: Any) -> str:
    """1 to 64 of `A-Z a-z 0-9 _ -`, not a reserved name. Raises InvalidSetting("name")."""
    if not isinstance(value, str) or not SOURCE_NAME_RE.fullmatch(value):
        raise InvalidSetting("name", f"must be 1-64 of A-Z a-z 0-9 _ -, not {value!r}")
    if value in RESERVED_SOURCE_NAMES:
        raise InvalidSetting("name", f"{value!r} is reserved (POST /v1/events uses it)")
    if value.startswith(RESERVED_SOURCE_PREFIX):
        raise InvalidSetting("name", f"names starting with {RESERVED_SOURCE_PREFIX!r} are "
                                     f"hookline's own (_test, _hookline), not {value!r}")
    return value


def source_scheme(value: Any) -> SourceScheme:
    """One of :data:`hookline.shared.endpoint_models.SOURCE_SCHEMES`. Raises
    InvalidSetting("scheme")."""
    if value not in SOURCE_SCHEMES:
        raise InvalidSetting("scheme", f"must be one of {', '.join(SOURCE_SCHEMES)}, "
                                       f"not {value!r}")
    return cast("SourceScheme", value)  # checked against SOURCE_SCHEMES above


def source_secret(scheme: SourceScheme, value: Any) -> str:
    """For `standard`, a `whsec_` secret (base64 key of at least 16 bytes); for the other
    schemes, at least MIN_SOURCE_SECRET_CHARS characters without surrounding spaces.
    Raises InvalidSetting("secret")."""
    if not isinstance(value, str):
        raise InvalidSetting("secret", "must be a string")
    if scheme == "standard":
        try:
            secret_key(value)
        except ConfigError as exc:
            raise InvalidSetting("secret", f"standard scheme: {exc}") from None
    elif len(value) < MIN_SOURCE_SECRET_CHARS or value != value.strip():
        raise InvalidSetting("secret", f"a {scheme} secret must be at least "
                                       f"{MIN_SOURCE_SECRET_CHARS} characters without leading "
                                       "or trailing spaces")
    return value


def new_source(name: Any, scheme: Any, secret: Any) -> SourceScheme:
    """Check a source's fields in a fixed order (name, scheme, secret); returns the scheme,
    typed. Raises InvalidSetting naming the field."""
    source_name(name)
    typed = source_scheme(scheme)
    source_secret(typed, secret)
    return typed


# -- retention -----------------------------------------------------------------------------

DEFAULT_BODIES_AGE = "7d"
"""Empty the bodies of finished events older than this (purge default)."""
DEFAULT_METADATA_AGE = "30d"
"""Delete finished jobs and their attempts older than this (purge default)."""
DEFAULT_DEDUPE_AGE = "90d"
"""Keep events' (source, id) dedupe keys at least this long (purge default)."""
PURGE_FIELDS = ("bodies_older_than", "metadata_older_than", "dedupe_keep")
"""The three ages as the admin API and `hookline purge` name them (CLI: --bodies-older-than,
...)."""
CONFIG_RETENTION_FIELDS = ("retention_bodies_s", "retention_metadata_s", "retention_dedupe_s")
"""The same three ages as settings of the ingest's periodic purge."""
CONFIG_DEAD_LETTERS_FIELD = "retention_dead_letters_s"
"""The setting bounding how long dead jobs are kept (unset: as long as other job metadata)."""


@dataclass(frozen=True, slots=True)
class RetentionAges:
    """How long finished data is kept, seconds: bodies <= metadata <= dedupe keys; dead jobs
    (dead letters) for `dead_letters_s`, or as long as other job metadata when None."""

    bodies_s: float
    metadata_s: float
    dedupe_s: float
    dead_letters_s: float | None = None

    def cutoffs(self, now_s: float) -> dict[str, float]:
        """The instants :meth:`hookline.shared.store.Store.purge` takes (unix seconds), as keyword
        arguments: everything older than `now_s - age` goes."""
        dead_s = self.metadata_s if self.dead_letters_s is None else self.dead_letters_s
        return {"bodies_before_s": now_s - self.bodies_s,
                "metadata_before_s": now_s - self.metadata_s,
                "dedupe_before_s": now_s - self.dedupe_s,
                "dead_before_s": now_s - dead_s}


def retention_age(field: str, value: Any) -> float:
    """An age: a duration like `7d` (see :func:`hookline.shared.timeparse.parse_duration`) or a
    number of seconds, finite and >= 0. Raises InvalidSetting(field)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidSetting(field, f"must be a duration like 7d, not {value!r}")
    try:
        return parse_duration(str(value))
    except ConfigError as exc:
        raise InvalidSetting(field, str(exc)) from None


def retention_ages(bodies: Any = DEFAULT_BODIES_AGE, metadata: Any = DEFAULT_METADATA_AGE,
                   dedupe: Any = DEFAULT_DEDUPE_AGE, *,
                   fields: tuple[str, str, str] = PURGE_FIELDS) -> RetentionAges:
    """Parse and order-check the three retention ages.

    Bodies must go no later than job metadata (a job whose body is kept can be replayed), and
    metadata no later than dedupe keys (a key outliving its jobs still refuses a resend).

    Args:
        bodies, metadata, dedupe: ages (durations like `7d`, or seconds).
        fields: the names the caller's input uses for them (messages name these).

    Raises:
        InvalidSetting: an age is malformed, or they are not ordered bodies <= metadata <=
            dedupe (the field named is the first one out of order).
    """
    ages = RetentionAges(*(retention_age(f, v) for f, v in
                           zip(fields, (bodies, metadata, dedupe), strict=True)))
    if not ages.bodies_s <= ages.metadata_s:
        raise InvalidSetting(fields[0], f"must be at most {fields[1]} (need {fields[0]} <= "
                                        f"{fields[1]} <= {fields[2]})")
    if not ages.metadata_s <= ages.dedupe_s:
        raise InvalidSetting(fields[1], f"must be at most {fields[2]} (need {fields[0]} <= "
                                        f"{fields[1]} <= {fields[2]})")
    return ages


def purge_cutoffs(bodies_before_s: float, metadata_before_s: float,
                  dedupe_before_s: float) -> None:
    """The store's check of :meth:`Store.purge` instants (unix seconds): dedupe keys are kept
    at least as long as job metadata, and metadata at least as long as bodies. Raises
    InvalidSetting("dedupe_before_s" or "metadata_before_s")."""
    if not dedupe_before_s <= metadata_before_s:
        raise InvalidSetting("dedupe_before_s", "purge cutoffs must keep dedupe keys at least "
                                                "as long as job metadata")
    if not metadata_before_s <= bodies_before_s:
        raise InvalidSetting("metadata_before_s", "purge cutoffs must keep job metadata at "
                                                  "least as long as event bodies")


def throughput_args(window_s: float, bucket_s: int) -> None:
    """Validate :meth:`Store.throughput` arguments (seconds). Raises InvalidSetting."""
    if isinstance(bucket_s, bool) or not isinstance(bucket_s, int) or bucket_s < 1:
        raise InvalidSetting("bucket_s", f"must be a whole number of seconds >= 1, "
                                         f"not {bucket_s!r}")
    if not window_s >= 0:
        raise InvalidSetting("window_s", f"must be zero or more seconds, not {window_s!r}")

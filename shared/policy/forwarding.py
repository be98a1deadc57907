"""What an event's deliveries say about it besides the body: its type and, for an event that
came in through `POST /v1/sources/{name}`, its origin and the provider's identifying headers.

Every delivery carries `webhook-event-type: <type>` (the type subscriptions matched). A source
event's deliveries also carry:

==================  =========================================================================
`webhook-source`     the source's name (the path segment of `/v1/sources/{name}`)
`webhook-source-id`  the sender's own id for the event: GitHub's `X-GitHub-Delivery`, the
                     Stripe event's `id`, a Standard Webhooks sender's `webhook-id`, a token
                     sender's `Idempotency-Key` (else its body `id`)
provider headers     passed through under their own names, per scheme
                     (:data:`PROVIDER_HEADERS`): GitHub's `X-GitHub-Event`,
                     `X-GitHub-Delivery` and `X-GitHub-Hook-ID` (when sent)
==================  =========================================================================

A provider's signature headers are never forwarded (`X-Hub-Signature-256`, `Stripe-Signature`,
a sender's `webhook-signature`): hookline signs each delivery itself, with the destination's
secret, in `webhook-id` / `webhook-timestamp` / `webhook-signature`, and no forwarded header
can replace those, `content-type` or any other name in
:data:`hookline.shared.policy.rules.RESERVED_HEADERS`.

The set is computed once at ingest (:func:`source_headers`), stored with the event as a small
JSON object (:func:`encode`, at most :data:`MAX_STORED_CHARS`), and read back with each claim
(:func:`decode`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

EVENT_TYPE_HEADER = "webhook-event-type"
SOURCE_HEADER = "webhook-source"
SOURCE_ID_HEADER = "webhook-source-id"
MEANING_HEADERS = frozenset({EVENT_TYPE_HEADER, SOURCE_HEADER, SOURCE_ID_HEADER})
"""Names hookline sets on deliveries to say what the event is; a destination's custom headers
cannot use them."""

PROVIDER_HEADERS: Mapping[str, tuple[str, ...]] = {
    "github": ("X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID"),
    "stripe": (),  # the event's type and id are in the body: webhook-event-type, -source-id
    "standard": (),  # its webhook-id is webhook-source-id; its signature is not ours
    "token": (),
}
"""The provider's own request headers each source scheme passes through, by name (the
allowlist: no other request header is ever forwarded)."""

MAX_VALUE_CHARS = 200
"""Longest forwarded header value, characters; a longer (or non-printable) value is dropped."""
MAX_STORED_CHARS = 1024
"""Upper bound of the stored JSON object (names and values are bounded, so it always fits)."""

_VALUE_RE = re.compile(rf"[\x20-\x7e]{{1,{MAX_VALUE_CHARS}}}")
"""A forwardable value: printable ASCII, so it cannot end the header line or inject another."""

Headers = tuple[tuple[str, str], ...]


def source_headers(source: str, scheme: str, source_event_id: str,
                   lookup: Callable[[str], list[str]]) -> Headers:
    """The headers a source event's deliveries carry besides `webhook-event-type`.

    Args:
        source: the source's name (valid by the rule book: 1-64 of A-Z a-z 0-9 _ -).
        scheme: its scheme, a key of :data:`PROVIDER_HEADERS`.
        source_event_id: the verified event id (valid by ingest's id rule).
        lookup: every value of a request header, by name, case-insensitively.

    Returns:
        (name, value) pairs: `webhook-source`, `webhook-source-id`, then the scheme's provider
        headers that were sent exactly once with a printable value of at most
        MAX_VALUE_CHARS characters (others are left out, never refused: they inform, the
        signature already proved the request).
    """
    found: list[tuple[str, str]] = [(SOURCE_HEADER, source), (SOURCE_ID_HEADER, source_event_id)]
    for name in PROVIDER_HEADERS.get(scheme, ()):
        values = lookup(name)
        if len(values) == 1 and _VALUE_RE.fullmatch(value := values[0].strip()):
            found.append((name, value))
    return tuple(found)


def encode(headers: Headers) -> str | None:
    """The stored form: a JSON object (None when there are none). Raises ValueError when it
    exceeds MAX_STORED_CHARS (cannot happen with :func:`source_headers`' output)."""
    if not headers:
        return None
    text = json.dumps(dict(headers), separators=(",", ":"))
    if len(text) > MAX_STORED_CHARS:
        raise ValueError(f"forwarded headers take {len(text)} characters, more than "
                         f"{MAX_STORED_CHARS}")
    return text


def decode(stored: str | None) -> Headers:
    """The stored form back as (name, value) pairs, in stored order (None or '' = none)."""
    if not stored:
        return ()
    return tuple((str(name), str(value)) for name, value in json.loads(stored).items())

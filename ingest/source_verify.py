"""Verification of inbound provider requests: pure functions over the raw bytes.

Every check runs on the request body exactly as received, never on re-serialised JSON
(re-encoding changes escapes, spacing and non-ASCII bytes, and breaks every HMAC). Digests
are compared with :func:`hmac.compare_digest`. The signature is checked before anything in
the body is looked at, so an unsigned request learns nothing about what we expect.

Each ``verify_*`` function returns ``(event id, event type)``; (source name, event id) is the
dedupe key of the stored event, and the type is matched against destination subscriptions.

========  ==========================================  ======================  ==============
scheme    proof                                       event id                event type
========  ==========================================  ======================  ==============
github    ``X-Hub-Signature-256: sha256=<hex>``,      ``X-GitHub-Delivery``   ``X-GitHub-Event``
          HMAC-SHA256(secret, body)                                           + ``.action``
stripe    ``Stripe-Signature: t=..,v1=..[,v1=..]``,   body ``id``             body ``type``
          HMAC-SHA256(secret, ``t.body``), |now-t|
          <= tolerance
standard  ``webhook-id``/``-timestamp``/``-signature``  ``webhook-id``        body ``type``
          (space-separated entries; any valid ``v1``
          passes), |now-t| <= tolerance
token     ``Authorization: Bearer <token>``           ``Idempotency-Key``     ``X-Event-Type``
                                                      header, else body       header, else
                                                      ``id``                  body ``type``
========  ==========================================  ======================  ==============

GitHub's type is ``<X-GitHub-Event>.<action>`` when the payload has a string ``action``, else
the header alone (``push``), as :mod:`hookline.rehearsal.github_samples` builds it. Every body must
be a UTF-8 JSON document (GitHub webhooks must use content type ``application/json``, not
form encoding). Ids and types must match
:data:`hookline.shared.policy.inputs.EVENT_ID_RE` and
:data:`hookline.shared.policy.inputs.EVENT_TYPE_RE`, as on ``POST /v1/events``.

The id and type also travel onward: every delivery carries ``webhook-event-type`` and, for a
source event, ``webhook-source``, ``webhook-source-id`` (the id above) and the scheme's
allowlisted provider headers (:data:`hookline.shared.policy.forwarding.PROVIDER_HEADERS`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

from hookline.shared.endpoint_models import Source
from hookline.shared.errors import ConfigError, InvalidEvent, SignatureInvalid
from hookline.shared.policy.inputs import EVENT_ID_RE, EVENT_TYPE_RE, token
from hookline.shared.policy.notify import reserved_type_problem
from hookline.shared.signing import secret_key

DEFAULT_TOLERANCE_S = 300
"""How far a signed timestamp may be from our clock, either way, seconds (Stripe and Standard
Webhooks both document five minutes)."""

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_UNIX_SECONDS = re.compile(r"[0-9]{1,15}")
"""A signed timestamp: ASCII digits only (str.isdigit also passes '²', which int() refuses),
and short enough to be a time (a 5,000-digit number cannot become a float)."""
_MAX_HEADER_ECHO = 40  # characters of a malformed header value echoed in a reason

Headers = Mapping[str, str]
EventKey = tuple[str, str]


def verify(source: Source, body: bytes, headers: Headers, now_s: float,
           tolerance_s: float = DEFAULT_TOLERANCE_S) -> EventKey:
    """Verify one request to `POST /v1/sources/{name}` by its source's scheme.

    Args:
        source: the configured source (scheme and secret).
        body: the request body exactly as received.
        headers: the request headers (looked up case-insensitively).
        now_s: our clock, unix seconds (for the timestamped schemes).
        tolerance_s: largest accepted |now - signed timestamp|, seconds.

    Returns:
        (event id, event type).

    Raises:
        SignatureInvalid: the request is not proven to come from the source.
        InvalidEvent: it is, but its id or type is missing or unusable.
    """
    if source.scheme == "github":
        return verify_github(body, headers, source.secret)
    if source.scheme == "stripe":
        return verify_stripe(body, headers, source.secret, now_s, tolerance_s)
    if source.scheme == "standard":
        return verify_standard(body, headers, source.secret, now_s, tolerance_s)
    if source.scheme == "token":
        return verify_token(body, headers, source.secret)
    raise SignatureInvalid(f"source {source.name!r} has an unknown scheme {source.scheme!r}")


def verify_github(body: bytes, headers: Headers, secret: str) -> EventKey:
    """Verify a GitHub delivery (`X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`).

    Returns:
        (`X-GitHub-Delivery`, `X-GitHub-Event` or `X-GitHub-Event.action`).

    Raises:
        SignatureInvalid: the signature header is missing, malformed or does not match.
        InvalidEvent: the delivery or event header is missing, or the body is not JSON.
    """
    given = _one_header(headers, "X-Hub-Signature-256")
    prefix, _, digest = given.partition("=")
    if prefix != "sha256" or not _HEX64.fullmatch(digest):
        raise SignatureInvalid(f"malformed X-Hub-Signature-256 {_echo(given)}: expected "
                               "sha256=<64 hex digits>")
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), digest.lower().encode()):
        raise SignatureInvalid("X-Hub-Signature-256 does not match the body "
                               "(wrong secret, or the body was changed)")
    delivery = _required_header(headers, "X-GitHub-Delivery")
    github_event = _required_header(headers, "X-GitHub-Event")
    document = _json_body(body)
    action = document.get("action") if isinstance(document, dict) else None
    event_type = f"{github_event}.{action}" if isinstance(action, str) else github_event
    return _checked(delivery, event_type, id_field="X-GitHub-Delivery",
                    type_field="X-GitHub-Event")


def verify_stripe(body: bytes, headers: Headers, secret: str, now_s: float,
                  tolerance_s: float = DEFAULT_TOLERANCE_S) -> EventKey:
    """Verify a Stripe event (`Stripe-Signature: t=<unix s>,v1=<hex>[,v1=<hex>...]`).

    The signed content is `f"{t}.".encode() + body`, keyed with the whole secret string
    (`whsec_...` is NOT base64-decoded, unlike Standard Webhooks). Any matching `v1` entry
    passes (Stripe sends several while a secret is being rolled); other schemes (`v0`) are
    ignored.

    Returns:
        (body `id`, body `type`).

    Raises:
        SignatureInvalid: the header is missing or malformed, the timestamp is more than
            `tolerance_s` seconds from `now_s`, or no `v1` entry matches.
        InvalidEvent: the body is not a JSON object with string `id` and `type`.
    """
    given = _one_header(headers, "Stripe-Signature")
    timestamps: list[str] = []
    signatures: list[str] = []
    for item in given.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise SignatureInvalid(f"malformed Stripe-Signature {_echo(given)}: "
                                   "expected t=<unix s>,v1=<hex>")
        if key == "t":
            timestamps.append(value)
        elif key == "v1":
            signatures.append(value)
    if len(timestamps) != 1 or not _UNIX_SECONDS.fullmatch(timestamps[0]):
        raise SignatureInvalid("malformed Stripe-Signature: expected exactly one t=<unix s>")
    if not signatures:
        raise SignatureInvalid("Stripe-Signature has no v1 signature")
    _check_timestamp(int(timestamps[0]), now_s, tolerance_s, "Stripe-Signature")
    signed = timestamps[0].encode() + b"." + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest().encode()
    if not _any_equal(expected, [s.lower().encode() for s in signatures]):
        raise SignatureInvalid("no v1 signature in Stripe-Signature matches the body "
                               "(wrong secret, or the body was changed)")
    document = _json_body(body)
    return _checked(_body_str(document, "id"), _body_str(document, "type"))


def verify_standard(body: bytes, headers: Headers, secret: str, now_s: float,
                    tolerance_s: float = DEFAULT_TOLERANCE_S) -> EventKey:
    """Verify a Standard Webhooks request (https://www.standardwebhooks.com).

    `webhook-signature` holds space-separated `v1,<base64 HMAC-SHA256(key, "id.t." + body)>`
    entries, where key is the base64 part of the `whsec_` secret; any one valid `v1` entry
    passes (several are sent during a secret rotation), other versions are ignored.

    Returns:
        (`webhook-id`, body `type`).

    Raises:
        SignatureInvalid: a header is missing or malformed, the timestamp is more than
            `tolerance_s` seconds from `now_s`, no `v1` entry matches, or `secret` is not a
            valid `whsec_` secret.
        InvalidEvent: the body is not a JSON object with a string `type`, or the id is not a
            valid event id.
    """
    message_id = _one_header(headers, "webhook-id")
    timestamp = _one_header(headers, "webhook-timestamp")
    given = _one_header(headers, "webhook-signature")
    if not _UNIX_SECONDS.fullmatch(timestamp):
        raise SignatureInvalid(f"malformed webhook-timestamp {_echo(timestamp)}: expected "
                               "integer unix seconds")
    _check_timestamp(int(timestamp), now_s, tolerance_s, "webhook-timestamp")
    candidates: list[bytes] = []
    for entry in given.split(" "):
        version, sep, value = entry.partition(",")
        if not sep and entry:
            raise SignatureInvalid(f"malformed webhook-signature entry {_echo(entry)}: "
                                   "expected v1,<base64>")
        if version == "v1":
            try:
                candidates.append(base64.b64decode(value, validate=True))
            except binascii.Error:
                continue  # a malformed entry cannot match; another entry may
    if not candidates:
        raise SignatureInvalid("webhook-signature has no v1 signature")
    try:
        key = secret_key(secret)
    except ConfigError as exc:
        raise SignatureInvalid(f"the source's secret is unusable: {exc}") from None
    signed = f"{message_id}.{timestamp}.".encode() + body
    expected = hmac.new(key, signed, hashlib.sha256).digest()
    if not _any_equal(expected, candidates):
        raise SignatureInvalid("no v1 signature in webhook-signature matches the body "
                               "(wrong secret, or the body was changed)")
    document = _json_body(body)
    return _checked(message_id, _body_str(document, "type"), id_field="webhook-id")


def verify_token(body: bytes, headers: Headers, token: str) -> EventKey:
    """Verify a sender that cannot sign: `Authorization: Bearer <token>`.

    A token proves who sent the request, not that the body is unchanged; use a signing scheme
    when the sender has one.

    Returns:
        (`Idempotency-Key` header, else body `id`; `X-Event-Type` header, else body `type`).

    Raises:
        SignatureInvalid: the Authorization header is missing, not `Bearer`, or the token
            does not match.
        InvalidEvent: the body is not JSON, or the id or type is given by neither the header
            nor the body, or is not valid.
    """
    given = _one_header(headers, "Authorization")
    scheme, _, presented = given.partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        raise SignatureInvalid("malformed Authorization header: expected Bearer <token>")
    if not hmac.compare_digest(presented.strip().encode(), token.encode()):
        raise SignatureInvalid("the bearer token does not match")
    document = _json_body(body)
    event_id = _optional_header(headers, "Idempotency-Key")
    event_type = _optional_header(headers, "X-Event-Type")
    return _checked(event_id if event_id is not None else _body_str(document, "id"),
                    event_type if event_type is not None else _body_str(document, "type"),
                    id_field="Idempotency-Key" if event_id is not None else "id",
                    type_field="X-Event-Type" if event_type is not None else "type")


# -- helpers -------------------------------------------------------------------------------


def _values(headers: Headers, name: str) -> list[str]:
    """Every value of header `name`, matched case-insensitively (multidicts included)."""
    getall = getattr(headers, "getall", None)
    if getall is not None:  # aiohttp's CIMultiDictProxy: case-insensitive, repeats kept
        return list(getall(name, []))
    lowered = name.lower()
    return [v for k, v in headers.items() if k.lower() == lowered]


def _one_header(headers: Headers, name: str) -> str:
    """The single value of a header that carries proof. Raises SignatureInvalid."""
    values = _values(headers, name)
    if not values:
        raise SignatureInvalid(f"missing {name} header")
    if len(values) > 1:
        raise SignatureInvalid(f"{name} header appears {len(values)} times")
    value = values[0].strip()
    if not value:
        raise SignatureInvalid(f"empty {name} header")
    return value


def _optional_header(headers: Headers, name: str) -> str | None:
    values = _values(headers, name)
    if len(values) > 1:
        raise InvalidEvent(name, f"header appears {len(values)} times")
    return values[0].strip() if values else None


def _required_header(headers: Headers, name: str) -> str:
    value = _optional_header(headers, name)
    if not value:
        raise InvalidEvent(name, "header is required")
    return value


def _check_timestamp(timestamp_s: int, now_s: float, tolerance_s: float, where: str) -> None:
    skew = now_s - timestamp_s
    if skew > tolerance_s:
        raise SignatureInvalid(f"{where} timestamp is {int(skew)} s old; at most "
                               f"{int(tolerance_s)} s is accepted (stale or replayed)")
    if -skew > tolerance_s:
        raise SignatureInvalid(f"{where} timestamp is {int(-skew)} s in the future; at most "
                               f"{int(tolerance_s)} s is accepted")


def _any_equal(expected: bytes, candidates: list[bytes]) -> bool:
    """True when one candidate equals `expected`; every candidate is compared in constant
    time, none is skipped."""
    found = False
    for candidate in candidates:
        found |= hmac.compare_digest(expected, candidate)
    return found


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidEvent("body", "is not valid UTF-8") from None
    except ValueError as exc:
        raise InvalidEvent("body", f"is not valid JSON ({exc.__class__.__name__}: "
                           f"{str(exc)[:80]})") from None
    except RecursionError:
        raise InvalidEvent("body", "is nested too deeply") from None


def _body_str(document: Any, name: str) -> str:
    if not isinstance(document, dict):
        raise InvalidEvent("body", "must be a JSON object")
    value = document.get(name)
    if not isinstance(value, str):
        raise InvalidEvent(name, "must be a string in the body" if name in document
                           else "is required in the body")
    return value


def _checked(event_id: str, event_type: str, *, id_field: str = "id",
             type_field: str = "type") -> EventKey:
    """The event's id and type, by the rules POST /v1/events applies (the `hookline.`
    namespace is reserved for operational events)."""
    checked_type = token(type_field, event_type, EVENT_TYPE_RE, error=InvalidEvent)
    if (problem := reserved_type_problem(checked_type)) is not None:
        raise InvalidEvent(type_field, problem)
    return token(id_field, event_id, EVENT_ID_RE, error=InvalidEvent), checked_type


def _echo(value: str) -> str:
    """A client-supplied value, clipped, for an error reason."""
    return repr(value if len(value) <= _MAX_HEADER_ECHO else value[:_MAX_HEADER_ECHO] + "…")

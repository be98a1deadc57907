"""The receiver kit: check that a request is a genuine, fresh hookline delivery.

hookline signs every delivery the Standard Webhooks way (https://www.standardwebhooks.com):
  webhook-id         the message id, the same on every attempt and replay: dedupe on it
  webhook-timestamp  unix seconds when this attempt was sent (a retry gets a new one)
  webhook-signature  `v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}." + body)>`; during a
                     secret rotation, one such entry per active secret, space-separated
where key is the base64 part of the destination's `whsec_` secret. Any Standard Webhooks
library (the `standardwebhooks` package, svix) verifies these too; this module needs only
the standard library, so it can also be copied into an application on its own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence

from hookline_client.errors import InvalidSignature, TimestampOutOfTolerance

DEFAULT_TOLERANCE_S = 300.0
"""How far `webhook-timestamp` may be from the receiver's clock, seconds (the Standard
Webhooks libraries' five minutes)."""
_PREFIX = "whsec_"
_MAX_TIMESTAMP_DIGITS = 12


def verify(body: bytes, headers: Mapping[str, str], secret: str | Sequence[str],
           tolerance_s: float = DEFAULT_TOLERANCE_S, *, now_s: float | None = None) -> None:
    """Check one delivery's signature and timestamp; returns only when both hold.

    Args:
        body: the request body exactly as received (bytes, before any JSON parsing).
        headers: the request headers; names are matched case-insensitively.
        secret: the destination's `whsec_` secret, or several (during a rotation the
            receiver may hold the old and the new one): any one verifying is enough.
        tolerance_s: how far `webhook-timestamp` may be from `now_s`, either way, seconds.
            Deliveries carry the time of their own attempt, so only clock skew between
            hookline's host and this one (or a replayed capture) uses this up.
        now_s: unix time to check against, seconds; this host's clock when None.

    Raises:
        InvalidSignature: a `webhook-*` header is missing or malformed, or no `v1`
            signature matches the body under any of the secrets.
        TimestampOutOfTolerance: the signature matches but the timestamp is more than
            `tolerance_s` from now (checked after the signature, so this error always
            means a genuine delivery and a clock to look at, or a replay of an old one).
        ValueError: a secret is not `whsec_` plus base64 (a configuration error).
    """
    keys = [_key(s) for s in ([secret] if isinstance(secret, str) else secret)]
    if not keys:
        raise ValueError("verify needs at least one secret")
    message_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > _MAX_TIMESTAMP_DIGITS:
        raise InvalidSignature("webhook-timestamp must be integer unix seconds")
    signed = f"{message_id}.{timestamp}.".encode() + body
    given = [_decoded(entry) for entry in signatures.split(" ")]
    matched = False
    for key in keys:
        expected = hmac.new(key, signed, hashlib.sha256).digest()
        for candidate in given:
            # compare_digest on every candidate: no early exit that timing could reveal
            matched |= candidate is not None and hmac.compare_digest(expected, candidate)
    if not matched:
        raise InvalidSignature("no webhook-signature entry matches this body with the "
                               f"{'secret' if len(keys) == 1 else 'secrets'} given")
    now = time.time() if now_s is None else now_s
    if abs(now - int(timestamp)) > tolerance_s:
        raise TimestampOutOfTolerance(int(timestamp), now, tolerance_s)


def _key(secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret (the prefix and base64 padding optional, as in the
    Standard Webhooks libraries)."""
    encoded = secret.removeprefix(_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("a webhook secret must be whsec_ followed by base64") from exc
    if not key:
        raise ValueError("a webhook secret must not be empty")
    return key


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:  # a plain dict with other capitalisation
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    if not value:
        raise InvalidSignature(f"the {name} header is missing")
    return value.strip()


def _decoded(entry: str) -> bytes | None:
    """The signature bytes of one `v1,<base64>` entry; None for another version or junk."""
    version, _, encoded = entry.partition(",")
    if version != "v1":
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None

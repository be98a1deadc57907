"""Standard Webhooks signing (https://www.standardwebhooks.com, "Signature scheme").

Every delivery carries three headers:
  webhook-id         the event's stable message id (same on every attempt and replay; no `.`)
  webhook-timestamp  unix seconds, integer, at send time
  webhook-signature  `v1,<base64(HMAC-SHA256(key, f"{id}.{timestamp}.".encode() + body))>`,
                     space-separated when several secrets are active (rotation)
where key is the base64-decoded part of the `whsec_` secret after its prefix.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Sequence

from hookline.shared.errors import ConfigError

SECRET_PREFIX = "whsec_"
_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
# Every 10-bit value as its two id digits: an id's 130 bits are 13 lookups.
_DIGIT_PAIRS = tuple(a + b for a in _ID_ALPHABET for b in _ID_ALPHABET)
_PAIR_SHIFTS = tuple(range(120, -1, -10))


def generate_secret(n_bytes: int = 24) -> str:
    """A fresh `whsec_` secret: `n_bytes` random bytes, base64 encoded (spec: 24 to 64 bytes)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(n_bytes)).decode()


def secret_key(secret: str) -> bytes:
    """Decode a `whsec_` secret into its HMAC key.

    Raises:
        ConfigError: the secret lacks the prefix or is not valid base64 (non-ASCII
            characters included).
    """
    if not secret.startswith(SECRET_PREFIX):
        raise ConfigError("a destination secret must start with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
    except ValueError as exc:  # binascii.Error, or ValueError for non-ASCII characters
        raise ConfigError("a destination secret must be whsec_ followed by base64") from exc
    if len(key) < 16:
        raise ConfigError("a destination secret must hold at least 16 bytes")
    return key


def new_message_id(now_s: float | None = None) -> str:
    """A sortable, unique message id: `msg_` + 26 Crockford base32 chars (ULID layout).

    48 bits of milliseconds then 80 random bits; contains no `.`, as `webhook-id` requires.
    """
    return new_message_ids(1, now_s)[0]


def new_message_ids(count: int, now_s: float | None = None) -> list[str]:
    """`count` ids as :func:`new_message_id` makes them, all of the same millisecond, their
    random bits read from the OS in one call (ingest's hot path: one per group commit)."""
    millis = int((time.time() if now_s is None else now_s) * 1000) << 80
    random = os.urandom(10 * count)
    pairs, shifts = _DIGIT_PAIRS, _PAIR_SHIFTS
    ids = []
    for n in range(0, 10 * count, 10):
        value = millis | int.from_bytes(random[n:n + 10], "big")
        ids.append("msg_" + "".join([pairs[(value >> s) & 1023] for s in shifts]))
    return ids


def sign(message_id: str, timestamp_s: int, body: bytes, secrets_: Sequence[str]) -> str:
    """The `webhook-signature` header value for one request.

    Args:
        message_id: the `webhook-id` value.
        timestamp_s: the `webhook-timestamp` value, integer unix seconds.
        body: the exact body bytes sent.
        secrets_: one or more `whsec_` secrets (new first during rotation).

    Returns:
        Space-separated `v1,<base64>` entries, one per secret.
    """
    prefix = f"{message_id}.{timestamp_s}.".encode()
    entries = []
    for secret in secrets_:
        mac = hmac.new(_cached_key(secret), prefix, hashlib.sha256)
        mac.update(body)  # no copy of the body joined to its prefix
        entries.append("v1," + base64.b64encode(mac.digest()).decode())
    return " ".join(entries)


@functools.lru_cache(maxsize=1024)
def _cached_key(secret: str) -> bytes:
    """:func:`secret_key`, decoded once per secret (a worker signs every attempt with the
    same few secrets). Raises what it raises; a refused secret is not cached."""
    return secret_key(secret)


def signed_headers(message_id: str, body: bytes, secrets_: Sequence[str],
                   now_s: float | None = None) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt, timestamped `now_s` (unix s)."""
    timestamp_s = int(time.time() if now_s is None else now_s)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp_s),
        "webhook-signature": sign(message_id, timestamp_s, body, secrets_),
    }

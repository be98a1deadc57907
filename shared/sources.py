"""Rules for inbound sources: valid names, schemes and secrets, and fresh secrets.

Shared by every store backend (they call :func:`check_source` before inserting) and the CLI,
so a source that is stored can always be verified.
"""

from __future__ import annotations

import re
import secrets

from shared.errors import ConfigError
from shared.models import SOURCE_SCHEMES, SourceScheme
from shared.signing import generate_secret, secret_key

SOURCE_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A source name: it is a URL path segment and the events' `source`, as in POST /v1/events."""

RESERVED_SOURCE_NAMES = frozenset({"api"})
"""`api` is the source of events posted to POST /v1/events without one."""

MIN_SECRET_CHARS = 16
"""Shortest accepted GitHub/Stripe secret or bearer token, characters."""


def check_source(name: str, scheme: str, secret: str) -> SourceScheme:
    """Validate a new source's fields.

    Args:
        name: 1 to 64 of `A-Z a-z 0-9 _ -`, not a reserved name.
        scheme: one of :data:`shared.models.SOURCE_SCHEMES`.
        secret: for `standard`, a `whsec_` secret (base64 key of at least 16 bytes); for the
            others, at least :data:`MIN_SECRET_CHARS` characters without surrounding spaces.

    Returns:
        The scheme, typed.

    Raises:
        ConfigError: a field breaks its rule (the message names it).
    """
    if not SOURCE_NAME_RE.fullmatch(name):
        raise ConfigError(f"source name must be 1-64 of A-Z a-z 0-9 _ -, not {name!r}")
    if name in RESERVED_SOURCE_NAMES:
        raise ConfigError(f"source name {name!r} is reserved (POST /v1/events uses it)")
    if scheme not in SOURCE_SCHEMES:
        raise ConfigError(f"scheme must be one of {', '.join(SOURCE_SCHEMES)}, not {scheme!r}")
    if scheme == "standard":
        try:
            secret_key(secret)
        except ConfigError as exc:
            raise ConfigError(f"standard scheme: {exc}") from None
    elif len(secret) < MIN_SECRET_CHARS or secret != secret.strip():
        raise ConfigError(f"{scheme} secret must be at least {MIN_SECRET_CHARS} characters "
                          "without leading or trailing spaces")
    return scheme  # type: ignore[return-value]  (checked against SOURCE_SCHEMES above)


def generate_source_secret(scheme: str) -> str:
    """A fresh secret for a source whose sender lets you choose it.

    Returns:
        A `whsec_` secret for `standard`; 32 random bytes, URL-safe base64, for `github` and
        `token`.

    Raises:
        ConfigError: for `stripe`, whose signing secret is made by Stripe (copy it from the
            endpoint's page in the Stripe dashboard), or an unknown scheme.
    """
    if scheme == "standard":
        return generate_secret()
    if scheme in ("github", "token"):
        return secrets.token_urlsafe(32)
    if scheme == "stripe":
        raise ConfigError("a stripe source needs --secret: Stripe makes the endpoint's signing "
                          "secret (whsec_...); copy it from the Stripe dashboard")
    raise ConfigError(f"scheme must be one of {', '.join(SOURCE_SCHEMES)}, not {scheme!r}")

"""Inbound sources: the check of a new source's fields and fresh secrets.

The rules themselves are in the rule book (:mod:`hookline.shared.policy.rules`, "inbound sources");
every store backend calls :func:`check_source` before inserting, and the CLI and the admin API
before opening the store, so a source that is stored can always be verified.
"""

from __future__ import annotations

import secrets

from hookline.shared.endpoint_models import SOURCE_SCHEMES, SourceScheme
from hookline.shared.errors import InvalidSetting
from hookline.shared.policy.rules import new_source
from hookline.shared.signing import generate_secret


def check_source(name: str, scheme: str, secret: str) -> SourceScheme:
    """Validate a new source's fields (see :func:`hookline.shared.policy.rules.new_source`).

    Args:
        name: 1 to 64 of `A-Z a-z 0-9 _ -`, not a reserved name.
        scheme: one of :data:`hookline.shared.endpoint_models.SOURCE_SCHEMES`.
        secret: for `standard`, a `whsec_` secret (base64 key of at least 16 bytes); for the
            others, at least 16 characters without surrounding spaces.

    Returns:
        The scheme, typed.

    Raises:
        InvalidSetting: a field breaks its rule (its `field` names it).
    """
    return new_source(name, scheme, secret)


def generate_source_secret(scheme: str) -> str:
    """A fresh secret for a source whose sender lets you choose it.

    Returns:
        A `whsec_` secret for `standard`; 32 random bytes, URL-safe base64, for `github` and
        `token`.

    Raises:
        InvalidSetting: for `stripe` (field `secret`), whose signing secret is made by Stripe
            (copy it from the endpoint's page in the Stripe dashboard), or an unknown scheme.
    """
    if scheme == "standard":
        return generate_secret()
    if scheme in ("github", "token"):
        return secrets.token_urlsafe(32)
    if scheme == "stripe":
        raise InvalidSetting("secret", "a stripe source needs --secret: Stripe makes the "
                                       "endpoint's signing secret (whsec_...); copy it from "
                                       "the Stripe dashboard")
    raise InvalidSetting("scheme", f"must be one of {', '.join(SOURCE_SCHEMES)}, "
                                   f"not {scheme!r}")

"""Tenant tokens' format and rules (shared/tenant_tokens.py): grants, lifetimes, and what a
signature check refuses."""

from __future__ import annotations

import pytest

from hookline.shared.errors import InvalidInput
from hookline.shared.tenant_tokens import (
    CAPABILITIES,
    TokenClaims,
    TokenRefused,
    grant,
    mint,
    ttl_seconds,
    verify,
)

KEY = b"k" * 32
CLAIMS = TokenClaims(tenant="acme", epoch=42, expires_at=2_000, capabilities=CAPABILITIES,
                     read_only=False)


def test_grants_default_to_everything_and_read_only_holds_view_and_asked_view_secret():
    assert grant(None, None) == (CAPABILITIES, False)
    assert grant(["resend"], False) == (("view", "resend"), False)
    assert grant(None, True) == (("view",), True)
    assert grant(["view_secret"], True) == (("view", "view_secret"), True)
    for capabilities, read_only, field in ((["fly"], None, "capabilities"),
                                           ("view", None, "capabilities"),
                                           (["view_secret", "manage_secret"], True,
                                            "capabilities"),
                                           (None, "yes", "read_only")):
        with pytest.raises(InvalidInput) as refused:
            grant(capabilities, read_only)
        assert refused.value.field == field


def test_lifetimes_are_whole_seconds_up_to_a_day():
    assert ttl_seconds(None) == 3600 and ttl_seconds(86_400) == 86_400
    for bad in (0, 86_401, 1.5, True, "60"):
        with pytest.raises(InvalidInput, match="ttl_s"):
            ttl_seconds(bad)


def test_verify_refuses_other_keys_tampering_garbage_and_expiry():
    token = mint(KEY, CLAIMS)
    assert verify(KEY, token, now_s=1_999) == CLAIMS
    body, signature = token.split(".")
    other_body = mint(KEY, TokenClaims(tenant="bolt", epoch=42, expires_at=2_000,
                                       capabilities=CAPABILITIES, read_only=False)).split(".")[0]
    for bad in (mint(b"x" * 32, CLAIMS), f"{other_body}.{signature}", body, body + ".",
                "hlt_", "Bearer", "hlt_é.é", token + "A", "x" * 5000):
        with pytest.raises(TokenRefused) as refused:
            verify(KEY, bad, now_s=0)
        assert refused.value.code == "token_invalid", bad[:40]
    with pytest.raises(TokenRefused) as refused:
        verify(KEY, token, now_s=2_000)
    assert refused.value.code == "token_expired"


def test_a_refused_token_is_told_why():
    """Too long is said as too long (an over-long `hlt_` token was told it lacks the prefix)."""
    for bad, why in (("Bearer x", "start with hlt_"), ("hlt_" + "A" * 7000, "at most"),
                     (mint(KEY, CLAIMS) + "A", "does not verify")):
        with pytest.raises(TokenRefused, match=why):
            verify(KEY, bad, now_s=0)

"""Tenant tokens: short-lived, signed bearer tokens that open the tenant API (and the portal)
for one tenant.

A token is `hlt_` + base64url(JSON claims) + `.` + base64url(HMAC-SHA256 of the claims part),
without padding. The claims are the tenant id (`tenant`), the tenant's token epoch when it was
minted (`epoch`), the expiry (`exp`, unix seconds on the store's clock), the capabilities
(`capabilities`) and the read-only flag (`read_only`). It carries no secret: whoever reads it
learns only what it grants. The HMAC key is made once per database and kept in it (the store's
:meth:`token_signing_key`), so every host of a shared database mints and accepts the same
tokens. Raising the tenant's epoch (revoke) ends every token minted before.

This module only signs, parses and checks; the store is read by the caller (ingest's
tenant_auth, the admin route and CLI that mint).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from hookline.shared.errors import Conflict, InvalidInput
from hookline.shared.tenant_models import Tenant

PREFIX = "hlt_"
CAPABILITIES = ("view", "view_secret", "manage_secret", "manage_destinations", "resend")
"""Every capability, in the order tokens list them (docs/tenants.md explains each)."""
READ_ONLY_CAPABILITIES = frozenset({"view", "view_secret"})
"""What a read-only token may keep (`view_secret` only when asked for)."""
DEFAULT_TTL_S = 3600
MAX_TTL_S = 86_400
MAX_TOKEN_CHARS = 4096
"""A longer bearer value is refused before any decoding (a token is a few hundred chars)."""
SIGNING_KEY_PURPOSE = "tenant_tokens"
"""The `signing_keys` row tenant tokens are signed with."""

TokenError = Literal["token_missing", "token_invalid", "token_expired", "token_revoked"]
"""The 401 codes of the tenant API (docs/tenants.md)."""


class TokenRefused(Exception):
    """A bearer value is not a valid tenant token; `code` is the API's error code."""

    def __init__(self, code: TokenError, detail: str) -> None:
        super().__init__(detail)
        self.code: TokenError = code
        self.detail = detail


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenClaims:
    """What a tenant token grants.

    Attributes:
        tenant: the tenant id; every request made with the token acts on it alone.
        epoch: the tenant's token epoch at minting; a token whose epoch is no longer the
            tenant's is revoked.
        expires_at: unix seconds (the store's clock) after which the token is refused.
        capabilities: what it may do (a subset of CAPABILITIES, always with `view`).
        read_only: no write route answers it (403 `read_only`).
    """

    tenant: str
    epoch: int
    expires_at: int
    capabilities: tuple[str, ...]
    read_only: bool

    def encode(self) -> dict[str, Any]:
        """The claims as the token carries them."""
        return {"tenant": self.tenant, "epoch": self.epoch, "exp": self.expires_at,
                "capabilities": list(self.capabilities), "read_only": self.read_only}


def grant(capabilities: Any, read_only: Any) -> tuple[tuple[str, ...], bool]:
    """The capabilities a mint request asks for, checked and normalised.

    Args:
        capabilities: None (every capability) or a JSON list of capability names.
        read_only: None or a bool; a read-only token holds `view` and, when asked for,
            `view_secret` only (asking for any other capability with it is refused).

    Returns:
        (capabilities in CAPABILITIES order, always with `view`; the read-only flag).

    Raises:
        InvalidInput: an unknown capability, a capability that writes asked for with
            read_only, or a value of the wrong type ("capabilities", "read_only").
    """
    if read_only is not None and not isinstance(read_only, bool):
        raise InvalidInput("read_only", "must be true or false")
    if capabilities is None:  # every capability, or for a read-only token `view`
        asked = {"view"} if read_only else set(CAPABILITIES)
    else:
        if not isinstance(capabilities, list) or not all(isinstance(c, str)
                                                         for c in capabilities):
            raise InvalidInput("capabilities", "must be a list of capability names")
        unknown = sorted(set(capabilities) - set(CAPABILITIES))
        if unknown:
            raise InvalidInput("capabilities", f"unknown capability {unknown[0][:40]!r} "
                                               f"(known: {', '.join(CAPABILITIES)})")
        asked = set(capabilities)
        if read_only and (writes := [c for c in CAPABILITIES
                                     if c in asked - READ_ONLY_CAPABILITIES]):
            # Asked for both: refused, not quietly narrowed to what read_only keeps.
            raise InvalidInput("capabilities", f"a read-only token holds only view and "
                                               f"view_secret, not {', '.join(writes)}: drop "
                                               f"read_only or those capabilities")
    asked.add("view")
    return tuple(c for c in CAPABILITIES if c in asked), bool(read_only)


def ttl_seconds(value: Any) -> int:
    """A token lifetime: whole seconds from 1 to MAX_TTL_S; DEFAULT_TTL_S when None.

    Raises:
        InvalidInput: ("ttl_s") out of range or not a whole number.
    """
    if value is None:
        return DEFAULT_TTL_S
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TTL_S:
        raise InvalidInput("ttl_s", f"must be whole seconds from 1 to {MAX_TTL_S} (24 h)")
    return value


def mint(key: bytes, claims: TokenClaims) -> str:
    """Sign `claims` with `key` (the database's tenant token key): the token text."""
    body = _b64(json.dumps(claims.encode(), separators=(",", ":"), sort_keys=True).encode())
    return f"{PREFIX}{body}.{_b64(_sign(key, body))}"


def verify(key: bytes, token: str, now_s: float) -> TokenClaims:
    """The claims of a token signed with `key` that has not expired at `now_s`.

    Whether the tenant still exists, is enabled and still has the token's epoch is the
    caller's to check against the store.

    Args:
        key: the database's tenant token key.
        token: the bearer value as sent.
        now_s: the store's time now, unix seconds.

    Raises:
        TokenRefused: `token_invalid` (not a token, another key's, tampered with) or
            `token_expired`.
    """
    claims = verify_signature(key, token)
    check_expiry(claims, now_s)
    return claims


def check_expiry(claims: TokenClaims, now_s: float) -> None:
    """Raise TokenRefused(`token_expired`) when the token has expired at `now_s` (unix s)."""
    if claims.expires_at <= now_s:
        raise TokenRefused("token_expired", "the tenant token has expired; ask for a new one")


def verify_signature(key: bytes, token: str) -> TokenClaims:
    """The claims of a token signed with `key`, expired or not. The signature is checked
    (in constant time) before anything in the claims is read.

    Raises:
        TokenRefused: `token_invalid`: not a tenant token, signed with another key, or
            tampered with.
    """
    if not token.startswith(PREFIX):
        raise TokenRefused("token_invalid", "not a tenant token (they start with hlt_)")
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenRefused("token_invalid", f"not a tenant token (they are at most "
                                            f"{MAX_TOKEN_CHARS} characters)")
    body, dot, signature = token[len(PREFIX):].partition(".")
    try:
        given = _unb64(signature)
    except (ValueError, binascii.Error):
        given = b""
    if not dot or not hmac.compare_digest(given, _sign(key, body)):
        raise TokenRefused("token_invalid", "the tenant token's signature does not verify")
    try:
        claims = _claims(json.loads(_unb64(body)))
    except (ValueError, KeyError, TypeError, binascii.Error):
        # Signed by us, so this is only an older or newer format: refuse it as invalid.
        raise TokenRefused("token_invalid", "the tenant token's claims are unreadable") from None
    return claims


class TokenStore(Protocol):
    """What minting reads of the store (:class:`hookline.shared.store.Store` has it all;
    named here so that shared/ does not import the store package)."""

    async def get_tenant(self, tenant: str) -> Tenant:
        """One tenant by id. Raises NotFound."""

    async def now_s(self) -> float:
        """The store's time now, unix seconds."""

    async def token_signing_key(self, purpose: str) -> bytes:
        """The database's signing key for `purpose`."""


async def issue(store: TokenStore, tenant: str, *, ttl_s: int, capabilities: tuple[str, ...],
                read_only: bool) -> tuple[str, TokenClaims]:
    """Mint a token for `tenant` with the database's key, expiring `ttl_s` seconds from the
    store's now (the clock tokens are checked against).

    Args:
        store: an open store.
        tenant: the tenant id.
        ttl_s: lifetime, seconds (checked by :func:`ttl_seconds`).
        capabilities, read_only: the grant (checked by :func:`grant`).

    Returns:
        (the token, its claims).

    Raises:
        NotFound: no such tenant.
        Conflict: the tenant is disabled (its tokens would be refused).
    """
    found = await store.get_tenant(tenant)
    if found.disabled:
        raise Conflict(f"tenant {found.id!r} is disabled: its tokens would be refused; "
                       "enable it first")
    now_s = await store.now_s()
    claims = TokenClaims(tenant=found.id, epoch=found.token_epoch,
                         expires_at=int(now_s) + ttl_s, capabilities=capabilities,
                         read_only=read_only)
    return mint(await store.token_signing_key(SIGNING_KEY_PURPOSE), claims), claims


def portal_url(base_url: str, token: str) -> str:
    """The portal's address opened with `token`, which rides in the fragment: browsers send
    a fragment neither to servers nor in `Referer` headers, so it stays out of access logs."""
    return f"{base_url.rstrip('/')}/portal/#token={token}"


def issued_view(token: str, claims: TokenClaims, base_url: str) -> dict[str, Any]:
    """What minting a token answers (the admin API and `hookline tenants token --json`):
    the token, its expiry (unix s), capabilities, read-only flag and portal URL."""
    return {"token": token, "expires_at": claims.expires_at,
            "capabilities": list(claims.capabilities), "read_only": claims.read_only,
            "portal_url": portal_url(base_url, token)}


def _claims(raw: Any) -> TokenClaims:
    tenant, epoch, exp = raw["tenant"], raw["epoch"], raw["exp"]
    capabilities, read_only = raw["capabilities"], raw["read_only"]
    if not (isinstance(tenant, str) and isinstance(epoch, int) and isinstance(exp, int)
            and isinstance(capabilities, list) and isinstance(read_only, bool)
            and all(isinstance(c, str) for c in capabilities)):
        raise TypeError("claims of the wrong types")
    return TokenClaims(tenant=tenant, epoch=epoch, expires_at=exp,
                       capabilities=tuple(capabilities), read_only=read_only)


def _sign(key: bytes, body: str) -> bytes:
    return hmac.new(key, body.encode("ascii", errors="replace"), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

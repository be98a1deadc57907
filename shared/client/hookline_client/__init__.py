"""hookline's client side, for applications: publish events (HooklineClient, blocking;
AsyncHooklineClient, asyncio), create your customers' tenants and mint their portal links
(the same clients' put_tenant and portal_access, with the admin token) and verify
deliveries (verify).

The `hookline-client` distribution: the standard library only, plus aiohttp for
AsyncHooklineClient (`pip install 'hookline-client[aio]'`). aiohttp is imported when
AsyncHooklineClient is first used, so the blocking client and the receiver kit work without
it. Nothing of the hookline service is imported. validate_payload (optional) checks a
received body against the event-type catalogue's exported schema, with a validator the
application passes, or `jsonschema` when installed (imported on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hookline_client._version import __version__
from hookline_client.errors import (
    HooklineClientError,
    HooklineRejected,
    HooklineUnavailable,
    InvalidSignature,
    TimestampOutOfTolerance,
    WebhookVerificationError,
)
from hookline_client.payload import PayloadInvalid, validate_payload, webhook_schemas
from hookline_client.policy import NO_LIMIT, PortalAccess, SendResult, Tenant
from hookline_client.receiver import verify
from hookline_client.sync import HooklineClient

if TYPE_CHECKING:
    from hookline_client.aio import AsyncHooklineClient

__all__ = [
    "NO_LIMIT",
    "AsyncHooklineClient",
    "HooklineClient",
    "HooklineClientError",
    "HooklineRejected",
    "HooklineUnavailable",
    "InvalidSignature",
    "PayloadInvalid",
    "PortalAccess",
    "SendResult",
    "Tenant",
    "TimestampOutOfTolerance",
    "WebhookVerificationError",
    "__version__",
    "validate_payload",
    "verify",
    "webhook_schemas",
]


def __getattr__(name: str) -> Any:
    """`hookline_client.AsyncHooklineClient`, imported on first use (it needs aiohttp).

    Raises:
        ModuleNotFoundError: AsyncHooklineClient is asked for and aiohttp is not installed
            (install `hookline-client[aio]`).
        AttributeError: any other unknown name.
    """
    if name != "AsyncHooklineClient":
        raise AttributeError(f"module 'hookline_client' has no attribute {name!r}")
    try:
        from hookline_client.aio import AsyncHooklineClient  # noqa: PLC0415  (aiohttp is an extra)
    except ModuleNotFoundError as exc:
        if exc.name != "aiohttp":
            raise
        raise ModuleNotFoundError(
            "AsyncHooklineClient needs aiohttp: pip install 'hookline-client[aio]'",
            name="aiohttp") from exc
    return AsyncHooklineClient

"""hookline's client side, for applications: publish events (HooklineClient, blocking;
AsyncHooklineClient, asyncio) and verify deliveries (verify).

Self-contained: it imports only the standard library and aiohttp, nothing else of hookline,
so an application that publishes or receives needs none of the service's internals.
"""

from hookline.shared.client.aio import AsyncHooklineClient
from hookline.shared.client.errors import (
    HooklineClientError,
    HooklineRejected,
    HooklineUnavailable,
    InvalidSignature,
    TimestampOutOfTolerance,
    WebhookVerificationError,
)
from hookline.shared.client.policy import SendResult
from hookline.shared.client.receiver import verify
from hookline.shared.client.sync import HooklineClient

__all__ = [
    "AsyncHooklineClient",
    "HooklineClient",
    "HooklineClientError",
    "HooklineRejected",
    "HooklineUnavailable",
    "InvalidSignature",
    "SendResult",
    "TimestampOutOfTolerance",
    "WebhookVerificationError",
    "verify",
]

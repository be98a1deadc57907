"""One HTTP attempt: a signed POST of the stored bytes, bounded in total time.

The request goes out with `allow_redirects=False` (a redirect is recorded, never followed)
and aiohttp never re-sends a POST on its own, so the receiver sees exactly one request per
recorded attempt.

Every connection passes the SSRF guard (shared/policy/netguard.py) on the exact address used: a URL
with a numeric host is vetted before the request, and host names are resolved once per
connection by a GuardedResolver that vets each answer before aiohttp connects to it. A refused
address makes no TCP connection; the attempt fails with `DestinationBlocked: <reason>`. The
session ignores HTTP(S)_PROXY variables (aiohttp's trust_env=False), so no proxy can resolve
a name past the guard.

Names resolve through the system resolver (getaddrinfo in a thread, aiohttp's
ThreadedResolver), named explicitly so that installing aiodns cannot switch it. Pooled
connections live at most `max_connection_age_s` (workers/connections.py), so a destination
whose name moves is followed within a bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Protocol

import aiohttp
from aiohttp import hdrs

from hookline.shared.errors import DestinationBlocked
from hookline.shared.models import AttemptResult, Claim
from hookline.shared.policy.delivery import unsendable_header
from hookline.shared.policy.forwarding import EVENT_TYPE_HEADER, MEANING_HEADERS
from hookline.shared.policy.guarded_resolver import BlockedAddress, GuardedResolver
from hookline.shared.policy.netguard import AddressPolicy, vet_url
from hookline.shared.policy.rules import RESERVED_HEADERS, unsendable_url
from hookline.shared.signing import signed_headers
from hookline.shared.version import PRODUCT
from hookline.workers.connections import AgedConnector

EXCERPT_BYTES = 1024
HEADERS_EXCERPT_CHARS = 1024
USER_AGENT = f"{PRODUCT} (+webhook delivery)"
FIXED_HEADERS: Final[Mapping[str, str]] = {"content-type": "application/json",
                                           "User-Agent": USER_AGENT}
"""The headers every attempt sends after the signature's, whatever else it carries."""
_NEVER_FORWARDED = RESERVED_HEADERS - MEANING_HEADERS  # signature, content type, framing
_MAX_VETTED = 10_000  # destination URLs remembered as vetted (forgotten all at once past it)
_NO_AIOHTTP_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=None, sock_read=None,
                                           sock_connect=None)


class SendsAttempts(Protocol):
    """What the worker loop needs to make one attempt: :class:`Sender` (in production), or
    a harness's wrapper around one (the rehearsal's, rehearsal/hooked_worker.py)."""

    async def send(self, claim: Claim, timeout_s: float | None = None) -> AttemptResult:
        """One attempt of `claim`, bounded by `timeout_s` seconds (see :meth:`Sender.send`)."""
        ...


class Sender:
    """Sends attempts over one keep-alive connection pool.

    Args:
        timeout_s: total time for one attempt (connect, send, read the excerpt), seconds.
        policy: the SSRF guard's policy; the default allows global addresses only.
        max_connections: size of the connection pool.
        resolver: the name resolver the guard wraps (default aiohttp's ThreadedResolver, the
            system's getaddrinfo; tests pass their own).
        max_connection_age_s: a pooled connection older than this is closed, not reused.
    """

    def __init__(self, *, timeout_s: float, policy: AddressPolicy | None = None,
                 max_connections: int = 64,
                 resolver: aiohttp.abc.AbstractResolver | None = None,
                 max_connection_age_s: float = 30.0) -> None:
        self._timeout_s = timeout_s
        self._policy = policy or AddressPolicy()
        # URLs that passed vet_url under this sender's (fixed) policy: the check parses the
        # URL, so it is done once per destination URL, not once per attempt.
        self._vetted: set[str] = set()
        self._max_connections = max_connections
        self._inner_resolver = resolver
        self._max_connection_age_s = max_connection_age_s
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Sender:
        connector = AgedConnector(
            max_age_s=self._max_connection_age_s, limit=self._max_connections,
            keepalive_timeout=min(30.0, self._max_connection_age_s),
            resolver=GuardedResolver(self._policy, self._inner_resolver))
        # No aiohttp timeout: each attempt is bounded by one asyncio.timeout (send), so no
        # timer objects are made per request. No session headers: User-Agent is in each
        # request's own dict (aiohttp would merge session headers into every request). No
        # cookie jar: a cookie one receiver sets (a load balancer's sticky cookie) is neither
        # parsed and kept nor sent back, to it or to another destination on the same host.
        # Each request asks for `Accept-Encoding: identity` (send): the answer is not
        # decompressed, so gzip would store compressed bytes as the response excerpt
        # operators read. (Also cheaper than skip_auto_headers, which makes aiohttp copy
        # every request's headers.)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=_NO_AIOHTTP_TIMEOUT, auto_decompress=False,
            trust_env=False, cookie_jar=aiohttp.DummyCookieJar())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, claim: Claim, timeout_s: float | None = None) -> AttemptResult:
        """POST `claim.body` to `claim.url` with fresh Standard Webhooks headers, the
        destination's custom headers (`claim.headers`), `webhook-event-type`, a source
        event's forwarded headers and `Accept-Encoding: identity` (:func:`outgoing_headers`).

        Signs with every secret in `claim.secrets` (new first; space-separated signatures
        during a rotation), else with `claim.secret`. The whole attempt (connect, send, read
        up to EXCERPT_BYTES of the body) is bounded by `timeout_s` seconds (default: the
        sender's), so a receiver trickling its answer is cut off.

        Never raises for network trouble: transport errors and timeouts come back as an
        AttemptResult with `error` set to the exception's class name and no status. A custom
        header that cannot be sent (CR/LF in its value) is not sent at all: the result is
        `unsendable`, with an `UnsendableHeader: ...` error naming it.
        """
        assert self._session is not None, "use `async with Sender(...)`"
        started_at = time.time()
        t0 = time.monotonic()
        # The destination's custom headers first; ours (signature, content type) cannot be
        # overridden (shared/store/__init__.py refuses those names anyway).
        if (reason := unsendable_header(claim.headers)) is not None:
            # Never on the wire: the job fails for good, the reason naming the header.
            return AttemptResult(started_at=started_at, duration_s=time.monotonic() - t0,
                                 error=f"UnsendableHeader: {reason}", unsendable=True)
        headers = sign_request(outgoing_headers(claim), claim.message_id, claim.body,
                               claim.secrets or (claim.secret,), started_at)
        total_s = timeout_s if timeout_s is not None else self._timeout_s
        try:
            if claim.url not in self._vetted:
                if (problem := unsendable_url(claim.url)) is not None:
                    # A row stored before the URL rule: never sendable, so it fails for good.
                    return AttemptResult(started_at=started_at,
                                         duration_s=time.monotonic() - t0,
                                         error=f"UnsendableUrl: url {problem}",
                                         unsendable=True)
                vet_url(claim.url, self._policy)  # numeric hosts never reach the resolver
                if len(self._vetted) >= _MAX_VETTED:
                    self._vetted.clear()
                self._vetted.add(claim.url)
            async with asyncio.timeout(total_s), self._session.post(
                    claim.url, data=claim.body, headers=headers,
                    allow_redirects=False) as response:
                excerpt = await _read_excerpt(response.content, EXCERPT_BYTES)
                return AttemptResult(
                    started_at=started_at, duration_s=time.monotonic() - t0,
                    status_code=response.status,
                    response_excerpt=excerpt.decode("utf-8", "replace") or None,
                    location=response.headers.get("Location"),
                    retry_after=response.headers.get("Retry-After"),
                    response_headers=headers_excerpt(response.headers.items()))
        # ValueError: a host name IDNA cannot encode (UnicodeError) never reaches the socket.
        except (TimeoutError, aiohttp.ClientError, OSError, DestinationBlocked, ValueError) as exc:
            # A URL the client refuses (InvalidURL) is refused again on every attempt.
            return AttemptResult(started_at=started_at, duration_s=time.monotonic() - t0,
                                 error=_error_class(exc),
                                 unsendable=isinstance(exc, aiohttp.InvalidURL))


def sign_request(headers: dict[str, str], message_id: str, body: bytes,
                 secrets: Sequence[str], now_s: float | None = None) -> dict[str, str]:
    """`headers` (unsigned: :func:`outgoing_headers`), updated in place with the three
    Standard Webhooks headers of one attempt timestamped `now_s` (unix s; None: now) and
    then FIXED_HEADERS, so nothing before them can replace them; returns `headers`."""
    headers.update(signed_headers(message_id, body, secrets, now_s))
    headers.update(FIXED_HEADERS)
    return headers


def plain_outgoing_headers(event_type: str) -> dict[str, str]:
    """:func:`outgoing_headers` of a destination with no custom headers, for an event of
    `event_type` from the API (no forwarded headers): what the bench's bare client and the
    delivery floor send before signing."""
    return {EVENT_TYPE_HEADER: event_type, hdrs.ACCEPT_ENCODING: "identity"}


def outgoing_headers(claim: Claim) -> dict[str, str]:
    """The request headers before signing: the destination's custom headers, then a source
    event's forwarded headers (shared/policy/forwarding.py; a provider header replaces a
    custom header of the same name, whatever its case), then `webhook-event-type`, then
    `Accept-Encoding: identity` unless one of those named an Accept-Encoding (the answer is
    not decompressed: a gzip answer would be stored as unreadable bytes).

    A forwarded name in RESERVED_HEADERS other than hookline's own meaning headers is left
    out, and the caller sets the signature and content type last, so nothing forwarded can
    replace them.
    """
    if not (claim.headers or claim.forwarded_headers):  # most destinations
        return plain_outgoing_headers(claim.event_type)
    headers = dict(claim.headers)
    if claim.forwarded_headers:
        names = {name.lower() for name, _ in claim.forwarded_headers}
        headers = {k: v for k, v in headers.items() if k.lower() not in names}
        headers.update((name, value) for name, value in claim.forwarded_headers
                       if name.lower() not in _NEVER_FORWARDED)
    headers[EVENT_TYPE_HEADER] = claim.event_type
    if not any(name.lower() == "accept-encoding" for name in headers):
        headers[hdrs.ACCEPT_ENCODING] = "identity"
    return headers


async def _read_excerpt(content: aiohttp.StreamReader, limit: int) -> bytes:
    """Read the body until EOF or `limit` bytes (a single read may return just one byte)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await content.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def headers_excerpt(items: Iterable[tuple[str, str]],
                    limit: int = HEADERS_EXCERPT_CHARS) -> str | None:
    """Response headers as `Name: value` lines, capped at `limit` characters (None if none)."""
    text = "\n".join(f"{name}: {value}" for name, value in items)
    return text[:limit] or None


def _error_class(exc: BaseException) -> str:
    """`ServerDisconnectedError`, `ClientConnectorError: Connection refused`, `TimeoutError`."""
    if isinstance(exc, asyncio.TimeoutError):
        return "TimeoutError"
    if isinstance(exc, DestinationBlocked):
        return f"DestinationBlocked: {exc}"
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error,
                                                                    BlockedAddress):
        return f"DestinationBlocked: {exc.os_error}"
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"{name}: {exc.os_error.strerror or exc.os_error}"
    return name

"""AsyncHooklineClient: publish events to hookline from asyncio code (aiohttp), and (with
the admin token) create a customer's tenant and mint its portal link.

One aiohttp ClientSession per client (its connection pool is reused by every send; create
the client once, not per event), or one the application passes in and keeps owning.
Retries and answers: hookline_client/policy.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import aiohttp

from hookline_client.policy import (
    EVENTS_PATH,
    AdminCall,
    Attempts,
    Header,
    NoLimit,
    PortalAccess,
    RetryLater,
    SendPolicy,
    SendResult,
    Tenant,
    api_root,
    connection_trouble,
    encode_event,
    new_event_id,
    portal_access_call,
    put_tenant_call,
    read_answer,
    request_headers,
)

AnswerT = TypeVar("AnswerT")


class AsyncHooklineClient:
    """Sends events to hookline's `POST /v1/events`, retrying until confirmed or the deadline.

    Example::

        async with AsyncHooklineClient("https://hooks.example.com", token) as client:
            result = await client.send("invoice.paid", {"invoice": "in_42"},
                                       id="invoice-in_42-paid")

    A client made with the admin token instead (hookline's `admin_token`) creates and
    changes tenants (`put_tenant`) and mints their portal links (`portal_access`); `send`
    needs the ingest token, so a backend doing both keeps two clients (they may share one
    session).

    Args:
        base_url: hookline's address, `http(s)://host[:port]` (a path prefix is kept).
        token: the ingest token (hookline's `ingest_token`) for `send`, or the admin token
            (`admin_token`) for `put_tenant` and `portal_access`; sent as a bearer token.
        deadline_s: longest one `send` may take, seconds, retries and waits included.
        attempt_timeout_s: longest one request may take, seconds.
        backoff_base_s: first wait between attempts, seconds (doubling, jittered).
        backoff_cap_s: longest wait the backoff asks for, seconds (`Retry-After` may ask
            for more, within the deadline).
        session: an aiohttp session to send with; the caller keeps owning it (close()
            leaves it open). By default the client makes its own on the first send.

    Raises:
        ValueError: a malformed `base_url`, an empty token, or a non-positive duration.
    """

    def __init__(self, base_url: str, token: str, *, deadline_s: float = 30.0,
                 attempt_timeout_s: float = 10.0, backoff_base_s: float = 0.1,
                 backoff_cap_s: float = 5.0,
                 session: aiohttp.ClientSession | None = None) -> None:
        self._root = api_root(base_url)
        self.url = self._root + EVENTS_PATH
        self.policy = SendPolicy(deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s,
                                 backoff_base_s=backoff_base_s, backoff_cap_s=backoff_cap_s)
        self._headers = request_headers(token)
        self._session = session
        self._owns_session = session is None

    async def send(self, type: str, data: Any, id: str | None = None,
                   source: str | None = None, tenant: str | None = None) -> SendResult:
        """Publish one event and wait until hookline has stored it.

        Every attempt sends the same id, so a retry after a lost answer is recognised as a
        duplicate instead of being stored twice; both answers are success.

        Args:
            type: the event type, e.g. `invoice.paid` (letters, digits, `_ . : -`).
            data: the payload, any JSON value; delivered inside the event as `data`.
            id: the event's id, unique per source (letters, digits, `_ : -`, no `.`);
                generated when None (then reused by every retry of this call; read it back
                from the result).
            source: the publisher's namespace for ids (default `api` on the server).
            tenant: the tenant (your customer) it is for: only that tenant's destinations
                receive it (default: the default tenant).

        Returns:
            SendResult: accepted or duplicate, with hookline's event number and message id.

        Raises:
            HooklineRejected: hookline refused the event (4xx): its status, error code,
                reason and offending field.
            HooklineUnavailable: not confirmed before the deadline (unreachable, or busy:
                429/5xx). Send again later with the same id.
            TypeError, ValueError: `data` is not representable as JSON.
        """
        event_id = id if id is not None else new_event_id()
        body = encode_event(type, data, event_id, source, tenant)
        attempts = Attempts(self.policy, event_id)

        def read(status: int, header: Header, answer: bytes, now_s: float,
                 ) -> SendResult | RetryLater:
            return read_answer(status, header, answer, event_id, attempts.count, now_s)
        return await self._until_answered("POST", EVENTS_PATH, body, attempts, read)

    async def put_tenant(self, tenant_id: str, *, name: str | None = None,
                         metadata: Mapping[str, Any] | None = None,
                         max_destinations: int | NoLimit | None = None,
                         disabled: bool | None = None,
                         adopt_history: bool | None = None) -> Tenant:
        """Create the tenant (one of your customers), or change the fields given of the one
        that exists (`PUT /v1/admin/tenants/{id}`). Needs a client made with the admin token.

        Idempotent: retried like `send` (no answer, 408, 429, 5xx) until the deadline.

        Args:
            tenant_id: your id for the customer: 1 to 128 of `A-Z a-z 0-9 _ : -`, not
                starting with `_` (hookline checks it; the client only percent-encodes it).
            name: its display name, printable, at most 200 characters.
            metadata: a JSON object of at most 4096 bytes, kept for you (replaces the
                stored one whole).
            max_destinations: most live destinations it may have (0 to 1000000);
                NO_LIMIT removes the limit.
            disabled: True refuses its events (`403 tenant_disabled`) and revokes its
                tokens; False enables it again (revoked tokens stay revoked).
            adopt_history: True creates it even though a deleted tenant of this id still
                has stored events, which it is then shown (the same customer back, or a
                delete undone); without it that is 409.
            Every field left None stays as it is (on creation: no name, `{}`, no limit,
            enabled).

        Returns:
            Tenant: the tenant as stored, `created` True when this call created it.

        Raises:
            HooklineRejected: hookline refused it (4xx): 401 `unauthorized` or 403
                `auth_not_configured` (not the admin token, or none configured), 400
                `invalid_request` naming the field (`id`, `name`, `metadata`, ...), 409 (the
                id of a deleted tenant whose events are still stored).
            HooklineUnavailable: not confirmed before the deadline; making it again is safe.
            TypeError, ValueError: `tenant_id` is not a string or is empty, `.` or `..`;
                `metadata` is not representable as JSON.
        """
        call = put_tenant_call(tenant_id, name=name, metadata=metadata,
                               max_destinations=max_destinations, disabled=disabled,
                               adopt_history=adopt_history)
        return await self._admin(call)

    async def portal_access(self, tenant_id: str, *, ttl_s: int | None = None,
                            read_only: bool | None = None,
                            capabilities: Sequence[str] | None = None) -> PortalAccess:
        """Mint a tenant token and the portal link it opens, to send your customer to
        (`POST /v1/admin/tenants/{id}/tokens`). Needs a client made with the admin token.

        Retried like `send` (no answer, 408, 429, 5xx) until the deadline: a repeat mints
        another token, and the one whose answer was lost expires unused.

        Args:
            tenant_id: the tenant's id (created before, see put_tenant).
            ttl_s: the token's lifetime, whole seconds, 1 to 86400 (default 3600).
            read_only: True holds `view` (and `view_secret` when asked for) only, and every
                writing route refuses the token (default False); asked with another
                capability, it is refused (HooklineRejected, field `capabilities`).
            capabilities: what it allows, among `view`, `view_secret`, `manage_secret`,
                `manage_destinations`, `resend` (default all; `view` is always granted).

        Returns:
            PortalAccess: the token, the portal URL with the token in its fragment, the
            expiry (unix seconds) and the grant as given.

        Raises:
            HooklineRejected: hookline refused it (4xx): 401 `unauthorized` or 403
                `auth_not_configured` (not the admin token, or none configured), 404 unknown
                tenant, 409 disabled tenant, 400 `invalid_request` naming the field
                (`ttl_s`, `read_only`, `capabilities`, `id`).
            HooklineUnavailable: not confirmed before the deadline; asking again is safe.
            TypeError, ValueError: `tenant_id` is not a string or is empty, `.` or `..`.
        """
        return await self._admin(portal_access_call(
            tenant_id, ttl_s=ttl_s, read_only=read_only, capabilities=capabilities))

    async def _admin(self, call: AdminCall[AnswerT]) -> AnswerT:
        attempts = Attempts(self.policy, None, request=call.name)
        return await self._until_answered(call.method, call.path, call.body, attempts,
                                          call.read)

    async def _until_answered(
            self, method: str, path: str, body: bytes, attempts: Attempts,
            read: Callable[[int, Header, bytes, float], AnswerT | RetryLater]) -> AnswerT:
        """Make the request (`path` under the base URL) until `read` makes something of an
        answer, or `attempts` gives up (HooklineUnavailable); `read` raises
        HooklineRejected itself."""
        session = self._open_session()
        url = self._root + path
        while True:
            timeout = aiohttp.ClientTimeout(total=attempts.start())
            try:
                async with session.request(method, url, data=body, headers=self._headers,
                                           timeout=timeout, allow_redirects=False) as response:
                    answer = await response.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                outcome: AnswerT | RetryLater = connection_trouble(exc)
            else:
                outcome = read(response.status, response.headers.get, answer, time.time())
            if not isinstance(outcome, RetryLater):
                return outcome
            await asyncio.sleep(attempts.wait_s(outcome))

    async def close(self) -> None:
        """Close the client's own session (one passed in is left to its owner)."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncHooklineClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Created on first use: a session belongs to the running event loop.
            self._session = aiohttp.ClientSession()
        return self._session

"""AsyncHooklineClient: publish events to hookline from asyncio code (aiohttp).

One aiohttp ClientSession per client (its connection pool is reused by every send; create
the client once, not per event), or one the application passes in and keeps owning.
Retries and answers: hookline_client/policy.py.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any

import aiohttp

from hookline_client.policy import (
    Attempts,
    RetryLater,
    SendPolicy,
    SendResult,
    connection_trouble,
    encode_event,
    events_url,
    new_event_id,
    read_answer,
    request_headers,
)


class AsyncHooklineClient:
    """Sends events to hookline's `POST /v1/events`, retrying until confirmed or the deadline.

    Example::

        async with AsyncHooklineClient("https://hooks.example.com", token) as client:
            result = await client.send("invoice.paid", {"invoice": "in_42"},
                                       id="invoice-in_42-paid")

    Args:
        base_url: hookline's address, `http(s)://host[:port]` (a path prefix is kept).
        token: the ingest token (hookline's `ingest_token`), sent as a bearer token.
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
        self.url = events_url(base_url)
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
        session = self._open_session()
        attempts = Attempts(self.policy, event_id)
        while True:
            timeout = aiohttp.ClientTimeout(total=attempts.start())
            try:
                async with session.post(self.url, data=body, headers=self._headers,
                                        timeout=timeout, allow_redirects=False) as response:
                    answer = await response.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                outcome: SendResult | RetryLater = connection_trouble(exc)
            else:
                outcome = read_answer(response.status, response.headers.get, answer, event_id,
                                      attempts.count, time.time())
            if isinstance(outcome, SendResult):
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

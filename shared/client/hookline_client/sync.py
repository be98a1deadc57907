"""HooklineClient: publish events to hookline from ordinary (blocking) Python code.

Standard library only (http.client): one kept-alive connection per client, reopened when the
server closed it. Safe to share between threads (sends take turns on the connection); for
parallel sends give each thread its own client. Retries and answers: hookline_client/policy.py.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import time
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

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

# A reused keep-alive connection the server has since closed fails with one of these before
# any byte of the request was taken; the request is then sent again at once on a new one.
_STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class HooklineClient:
    """Sends events to hookline's `POST /v1/events`, retrying until confirmed or the deadline.

    Example::

        with HooklineClient("https://hooks.example.com", token) as client:
            result = client.send("invoice.paid", {"invoice": "in_42", "amount": 4200},
                                 id="invoice-in_42-paid")

    Args:
        base_url: hookline's address, `http(s)://host[:port]` (a path prefix is kept).
        token: the ingest token (hookline's `ingest_token`), sent as a bearer token.
        deadline_s: longest one `send` may take, seconds, retries and waits included.
        attempt_timeout_s: longest one request may wait on the network (connecting, then
            each read), seconds.
        backoff_base_s: first wait between attempts, seconds (doubling, jittered).
        backoff_cap_s: longest wait the backoff asks for, seconds (`Retry-After` may ask
            for more, within the deadline).
        ssl_context: for https, instead of the system's default verification.

    Raises:
        ValueError: a malformed `base_url`, an empty token, or a non-positive duration.
    """

    def __init__(self, base_url: str, token: str, *, deadline_s: float = 30.0,
                 attempt_timeout_s: float = 10.0, backoff_base_s: float = 0.1,
                 backoff_cap_s: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.url = events_url(base_url)
        self.policy = SendPolicy(deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s,
                                 backoff_base_s=backoff_base_s, backoff_cap_s=backoff_cap_s)
        self._headers = request_headers(token)
        parts = urlsplit(self.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._path = parts.path
        self._ssl_context = ssl_context
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def send(self, type: str, data: Any, id: str | None = None,
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
        while True:
            timeout_s = attempts.start()
            try:
                with self._lock:
                    status, header, answer = self._post(body, timeout_s)
            except (OSError, http.client.HTTPException) as exc:
                outcome: SendResult | RetryLater = connection_trouble(exc)
            else:
                outcome = read_answer(status, header, answer, event_id, attempts.count,
                                      time.time())
            if isinstance(outcome, SendResult):
                return outcome
            time.sleep(attempts.wait_s(outcome))

    def close(self) -> None:
        """Close the kept-alive connection (a later send opens a new one)."""
        with self._lock:
            self._drop()

    def __enter__(self) -> HooklineClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _post(self, body: bytes, timeout_s: float) -> tuple[int, Any, bytes]:
        """One request on the kept-alive connection (or a new one); returns the status, a
        header lookup and the body. Raises OSError or HTTPException when no answer came."""
        reused = self._connection is not None
        connection = self._connect(timeout_s)
        try:
            connection.request("POST", self._path, body, self._headers)
            response = connection.getresponse()
            answer = response.read()
        except _STALE_CONNECTION:
            self._drop()
            if not reused:
                raise
            return self._post(body, timeout_s)  # once: the connection is new this time
        except BaseException:
            self._drop()  # a half-read answer would be read as the next request's
            raise
        if response.will_close:
            self._drop()
        return response.status, response.getheader, answer

    def _connect(self, timeout_s: float) -> http.client.HTTPConnection:
        if self._connection is None:
            if self._https:
                self._connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout_s, context=self._ssl_context)
            else:
                self._connection = http.client.HTTPConnection(self._host, self._port,
                                                              timeout=timeout_s)
        self._connection.timeout = timeout_s
        if self._connection.sock is not None:
            self._connection.sock.settimeout(timeout_s)
        return self._connection

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

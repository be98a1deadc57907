"""HooklineClient: publish events to hookline from ordinary (blocking) Python code, and
(with the admin token) create a customer's tenant and mint its portal link.

Standard library only (http.client): one kept-alive connection per client, reopened when the
server closed it. Safe to share between threads (sends take turns on the connection); for
parallel sends give each thread its own client. Retries and answers: hookline_client/policy.py.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlsplit

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

# A reused keep-alive connection the server has since closed fails with one of these before
# any byte of the request was taken; the request is then sent again at once on a new one.
_STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class HooklineClient:
    """Sends events to hookline's `POST /v1/events`, retrying until confirmed or the deadline.

    Example::

        with HooklineClient("https://hooks.example.com", token) as client:
            result = client.send("invoice.paid", {"invoice": "in_42", "amount": 4200},
                                 id="invoice-in_42-paid")

    A client made with the admin token instead (hookline's `admin_token`) creates and
    changes tenants (`put_tenant`) and mints their portal links (`portal_access`); `send`
    needs the ingest token, so a backend doing both keeps two clients.

    Args:
        base_url: hookline's address, `http(s)://host[:port]` (a path prefix is kept).
        token: the ingest token (hookline's `ingest_token`) for `send`, or the admin token
            (`admin_token`) for `put_tenant` and `portal_access`; sent as a bearer token.
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
        root = api_root(base_url)
        self.url = root + EVENTS_PATH
        self.policy = SendPolicy(deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s,
                                 backoff_base_s=backoff_base_s, backoff_cap_s=backoff_cap_s)
        self._headers = request_headers(token)
        parts = urlsplit(root)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._root_path = parts.path  # the base URL's prefix, "" or "/prefix"
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

        def read(status: int, header: Header, answer: bytes, now_s: float,
                 ) -> SendResult | RetryLater:
            return read_answer(status, header, answer, event_id, attempts.count, now_s)
        return self._until_answered("POST", EVENTS_PATH, body, attempts, read)

    def put_tenant(self, tenant_id: str, *, name: str | None = None,
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
        return self._admin(call)

    def portal_access(self, tenant_id: str, *, ttl_s: int | None = None,
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
        return self._admin(portal_access_call(tenant_id, ttl_s=ttl_s, read_only=read_only,
                                              capabilities=capabilities))

    def _admin(self, call: AdminCall[AnswerT]) -> AnswerT:
        attempts = Attempts(self.policy, None, request=call.name)
        return self._until_answered(call.method, call.path, call.body, attempts, call.read)

    def _until_answered(self, method: str, path: str, body: bytes, attempts: Attempts,
                        read: Callable[[int, Header, bytes, float], AnswerT | RetryLater],
                        ) -> AnswerT:
        """Make the request until `read` makes something of an answer, or `attempts` gives
        up (HooklineUnavailable); `read` raises HooklineRejected itself."""
        while True:
            timeout_s = attempts.start()
            try:
                with self._lock:
                    status, header, answer = self._exchange(method, path, body, timeout_s)
            except (OSError, http.client.HTTPException) as exc:
                outcome: AnswerT | RetryLater = connection_trouble(exc)
            else:
                outcome = read(status, header, answer, time.time())
            if not isinstance(outcome, RetryLater):
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

    def _exchange(self, method: str, path: str, body: bytes,
                  timeout_s: float) -> tuple[int, Header, bytes]:
        """One request on the kept-alive connection (or a new one); `path` is under the base
        URL. Returns the status, a header lookup and the body. Raises OSError or
        HTTPException when no answer came."""
        reused = self._connection is not None
        connection = self._connect(timeout_s)
        try:
            connection.request(method, self._root_path + path, body, self._headers)
            response = connection.getresponse()
            answer = response.read()
        except _STALE_CONNECTION:
            self._drop()
            if not reused:
                raise
            return self._exchange(method, path, body, timeout_s)  # once: new connection now
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

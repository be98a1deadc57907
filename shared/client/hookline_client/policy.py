"""What the publishing clients decide, without I/O: the request body, how to read an answer,
when to retry and how long to wait. The sync and the asyncio client both drive this, for
`send` and for the admin requests (AdminCall: a tenant's create-or-update, a portal link).

An answer is one of three things:
* success: 202 (stored now) or 200 with `"duplicate": true` (stored before: an earlier
  attempt of this send, or an earlier send with the same id, got through);
* retry later, with the same id: no answer at all (connection refused, reset, timed out),
  408, 429, 500, 502, 503, 504; `Retry-After` (delta-seconds or an HTTP-date) lengthens the
  wait, never shortens it;
* refused for good: any other status, raised as HooklineRejected with the server's reason.

An admin request's answer is read the same way, its success being 200 or 201 with the JSON
object AdminCall.parse expects. Both admin requests are safe to repeat: a tenant's PUT sets
the same fields again, and a repeated mint only makes a second token (the first one's answer
was lost, so nobody holds it; it expires on its own).

Waits between attempts ("equal jitter", like hookline's own delivery retries): the n-th wait
is d/2 + uniform(0, d/2) with d = min(backoff_cap_s, backoff_base_s * 2 ** (n - 1)). No
attempt starts, and no wait is begun, that would end past the send's deadline.
"""

from __future__ import annotations

import enum
import json
import math
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Final, Generic, Literal, NoReturn, TypeVar
from urllib.parse import quote, urlsplit

from hookline_client._version import __version__
from hookline_client.errors import HooklineRejected, HooklineUnavailable

EVENTS_PATH = "/v1/events"
TENANTS_PATH = "/v1/admin/tenants"
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""Statuses after which the same event is sent again (the id makes a repeat harmless)."""
_EXCERPT_CHARS = 200
_RETRY_AFTER_MAX_CHARS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class SendPolicy:
    """How long one `send` (or admin request) may take and how it spaces its attempts, all
    in seconds.

    Attributes:
        deadline_s: the whole send, every attempt and wait included; past it the send raises
            HooklineUnavailable.
        attempt_timeout_s: one request, connecting included (less when the deadline is
            nearer).
        backoff_base_s: the first wait between attempts (before jitter).
        backoff_cap_s: the longest wait the backoff itself asks for (a server's
            `Retry-After` may ask for more, within the deadline).
    """

    deadline_s: float = 30.0
    attempt_timeout_s: float = 10.0
    backoff_base_s: float = 0.1
    backoff_cap_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("deadline_s", "attempt_timeout_s", "backoff_base_s", "backoff_cap_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SendResult:
    """A confirmed send: the event is stored once, whatever happened on the way.

    Attributes:
        outcome: "accepted" (stored by this send) or "duplicate" (already stored with this
            id; also what a retry sees when an earlier attempt's answer was lost). Both are
            success.
        id: the event's id as sent (the generated one when none was given).
        event_id: hookline's number for the stored event.
        message_id: the `webhook-id` every delivery of it carries.
        jobs: deliveries this send created: one per destination subscribed to the type
            (0 for a duplicate, and 0 when no destination subscribes to the type or every
            subscriber's payload filter turned the event away).
        attempts: requests made by this send (1 unless it retried).
    """

    outcome: Literal["accepted", "duplicate"]
    id: str
    event_id: int
    message_id: str
    jobs: int
    attempts: int

    @property
    def accepted(self) -> bool:
        """True when this send stored the event."""
        return self.outcome == "accepted"

    @property
    def duplicate(self) -> bool:
        """True when the event was already stored under this id."""
        return self.outcome == "duplicate"


def new_event_id() -> str:
    """A fresh event id, `evt_` and 32 hex digits (random, so unique without coordination)."""
    return "evt_" + uuid.uuid4().hex


def encode_event(type_: str, data: Any, event_id: str, source: str | None,
                 tenant: str | None = None) -> bytes:
    """The `POST /v1/events` body: `{"id", "type", "data", "source"?, "tenant"?}` as UTF-8
    JSON.

    Raises:
        TypeError: `data` holds something JSON cannot represent.
        ValueError: `data` holds NaN or an infinity (not JSON; hookline would refuse it).
    """
    event: dict[str, Any] = {"id": event_id, "type": type_, "data": data}
    if source is not None:
        event["source"] = source
    if tenant is not None:
        event["tenant"] = tenant
    return json.dumps(event, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """A `Retry-After` header as a delay in seconds; never raises.

    Args:
        value: the header: delta-seconds (`3`) or an HTTP-date
            (`Wed, 21 Oct 2026 07:28:00 GMT`); None when absent.
        now_s: unix time now, seconds (for the date form).

    Returns:
        The delay, at least 0 (a date in the past is 0); None when absent or unreadable.
    """
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > _RETRY_AFTER_MAX_CHARS:
        return None
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delay = when.timestamp() - now_s
    return max(0.0, delay) if math.isfinite(delay) else None


Header = Callable[[str], str | None]
"""Looks a response header up by name (case-insensitive); None when absent."""


@dataclass(frozen=True, slots=True)
class RetryLater:
    """An attempt that did not get the event confirmed but may be repeated.

    Attributes:
        reason: what happened, in words (kept for HooklineUnavailable).
        retry_after_s: the server's `Retry-After`, seconds, when it sent one.
    """

    reason: str
    retry_after_s: float | None = None


def read_answer(status: int, header: Header, body: bytes, event_id: str,
                attempts: int, now_s: float) -> SendResult | RetryLater:
    """Interpret one HTTP answer to `POST /v1/events`.

    Args:
        status: the HTTP status.
        header: looks a response header up by name (case-insensitive), None when absent.
        body: the response body.
        event_id: the id the event was sent with.
        attempts: requests made so far, this one included.
        now_s: unix time now, seconds (for an HTTP-date `Retry-After`).

    Returns:
        SendResult on success, RetryLater when the same event should be sent again.

    Raises:
        HooklineRejected: any other answer (the server's `error`, `detail` and `field`
            when it gave them).
    """
    document = _json_object(body)
    if 200 <= status < 300:
        if document is None or not isinstance(document.get("message_id"), str):
            _not_hookline(status, body, "the event")
        duplicate = status == 200 and document.get("duplicate") is True
        return SendResult(outcome="duplicate" if duplicate else "accepted", id=event_id,
                          event_id=int(document.get("event_id", 0)),
                          message_id=document["message_id"],
                          jobs=int(document.get("jobs", 0)), attempts=attempts)
    return _retry_or_refuse(status, header, body, document, now_s, request="the event")


def _retry_or_refuse(status: int, header: Header, body: bytes,
                     document: dict[str, Any] | None, now_s: float, *,
                     request: str) -> RetryLater:
    """A non-2xx answer: RetryLater when worth repeating, else HooklineRejected raised.

    Args:
        request: what was asked, in words, for the error (`the event`, `PUT /v1/...`).
    """
    code = str(document.get("error")) if document and "error" in document else f"http_{status}"
    detail = (str(document["detail"]) if document and "detail" in document
              else _excerpt(body) or "(no body)")
    if status in RETRY_STATUSES:
        return RetryLater(f"{status} {code}: {detail}",
                          parse_retry_after(header("Retry-After"), now_s))
    if 300 <= status < 400:
        detail = f"redirected to {header('Location')!r}; give the client the final URL"
    named = document.get("field") if document else None
    raise HooklineRejected(status, code, detail, named if isinstance(named, str) else None,
                           request=request)


def _not_hookline(status: int, body: bytes, request: str) -> NoReturn:
    raise HooklineRejected(status, "not_hookline",
                           f"a {status} answer without hookline's JSON; is the URL "
                           f"hookline's? body: {_excerpt(body)}", request=request)


class Attempts:
    """The clock and the count of one send's (or admin request's) attempts: how long each may
    take, how long to wait between them, and when to give up (HooklineUnavailable).

    Args:
        policy: the deadline and the backoff.
        event_id: the event's id; None for an admin request (then `request` names it).
        rng: the jitter's randomness (tests pass a seeded one).
        request: what is being sent, in words, for HooklineUnavailable
            (default `event '<event_id>'`).
    """

    def __init__(self, policy: SendPolicy, event_id: str | None,
                 rng: random.Random | None = None, *, request: str | None = None) -> None:
        self._policy = policy
        self._event_id = event_id
        self._request = request
        self._rng = rng or random.Random()
        self._deadline = time.monotonic() + policy.deadline_s
        self.count = 0
        self.last_error = "no attempt made"

    def start(self) -> float:
        """Count one more attempt; returns its timeout in seconds (at most the time left).

        Raises:
            HooklineUnavailable: the deadline has passed.
        """
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self.unavailable()
        self.count += 1
        return min(self._policy.attempt_timeout_s, left)

    def wait_s(self, later: RetryLater) -> float:
        """Seconds to sleep before the next attempt after `later`.

        Raises:
            HooklineUnavailable: that wait would end past the deadline (no point sleeping).
        """
        self.last_error = later.reason
        step = min(self._policy.backoff_cap_s,
                   self._policy.backoff_base_s * 2.0 ** min(self.count - 1, 64))
        wait = step / 2 + self._rng.uniform(0, step / 2)
        if later.retry_after_s is not None:
            wait = max(wait, later.retry_after_s)
        if time.monotonic() + wait >= self._deadline:
            if later.retry_after_s is not None and later.retry_after_s == wait:
                self.last_error += f" (asked to retry after {later.retry_after_s:g} s)"
            raise self.unavailable()
        return wait

    def unavailable(self) -> HooklineUnavailable:
        """The error to raise when giving up."""
        return HooklineUnavailable(self._event_id, self.count, self.last_error,
                                   request=self._request)


def connection_trouble(exc: BaseException) -> RetryLater:
    """A request that got no answer (refused, reset, timed out, DNS) as a RetryLater."""
    return RetryLater(f"no answer: {type(exc).__name__}: {exc}".rstrip(": "))


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        document = json.loads(body)
    except ValueError:  # includes UnicodeDecodeError
        return None
    return document if isinstance(document, dict) else None


def _excerpt(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS - 1] + "…"


def events_url(base_url: str) -> str:
    """`POST /v1/events`'s URL under `base_url` (`http(s)://host[:port][/prefix]`).

    Raises:
        ValueError: not an http or https URL with a host, or it has a query or fragment.
    """
    return api_root(base_url) + EVENTS_PATH


def api_root(base_url: str) -> str:
    """`base_url` checked, without a trailing `/`: every API path (`/v1/...`) goes after it.

    Raises:
        ValueError: not an http or https URL with a host, or it has a query or fragment.
    """
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be http(s)://HOST[:PORT], not {base_url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"base_url must have no query or fragment: {base_url!r}")
    try:
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise ValueError(f"base_url has an invalid port: {base_url!r}") from exc
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def request_headers(token: str) -> dict[str, str]:
    """The headers of every request: JSON, the bearer token, who is asking.

    Raises:
        ValueError: `token` is empty or holds characters a header cannot carry.
    """
    if not token or token != token.strip() or not token.isprintable() or not token.isascii():
        raise ValueError("token must be the non-empty ingest (or admin) token "
                         "(printable ASCII)")
    return {"Content-Type": "application/json", "Accept": "application/json",
            "Authorization": f"Bearer {token}", "User-Agent": USER_AGENT}


USER_AGENT = f"hookline-client/{__version__}"


# -- admin requests: a tenant's create-or-update, a portal link -----------------------------

AnswerT = TypeVar("AnswerT")


class NoLimit(enum.Enum):
    """The type of NO_LIMIT (an enum of one member, so a type checker tells it apart)."""

    NO_LIMIT = "no_limit"


NO_LIMIT: Final = NoLimit.NO_LIMIT
"""`put_tenant(..., max_destinations=NO_LIMIT)` removes the tenant's limit (None leaves the
limit as it is, as for every other field)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """A tenant (one of your customers) as hookline stored it.

    Attributes:
        id: your id for the customer.
        name: its display name ("" when never given).
        metadata: the JSON object you keep with it (hookline never reads it, bar the
            operator's payload filters on `tenant.metadata`).
        max_destinations: most live destinations it may have; None: no limit.
        disabled: publishing for it is refused and its tokens stop working.
        created_at: when it was created, unix seconds.
        updated_at: when it last changed, unix seconds.
        destinations: its live destinations now.
        created: True when this put created it (201), False when it existed (200).
    """

    id: str
    name: str
    metadata: dict[str, Any]
    max_destinations: int | None
    disabled: bool
    created_at: float
    updated_at: float
    destinations: int
    created: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PortalAccess:
    """A tenant token and the portal link it opens. The token and the link are credentials:
    hand the link to the customer's browser, never log it (both are left out of repr).

    Attributes:
        token: the tenant token, `hlt_...`: a bearer token for the tenant API
            (`/v1/tenant/...`) of this tenant only.
        url: the portal's address with the token in its fragment (`.../portal/#token=...`),
            which browsers never send to a server.
        expires_at: when the token stops working, unix seconds (hookline's clock).
        capabilities: what the token allows (`view`, `view_secret`, `manage_secret`,
            `manage_destinations`, `resend`), as granted.
        read_only: whether every writing route refuses the token.
    """

    token: str = field(repr=False)
    url: str = field(repr=False)
    expires_at: int
    capabilities: tuple[str, ...]
    read_only: bool


@dataclass(frozen=True, slots=True)
class AdminCall(Generic[AnswerT]):
    """One request to the admin API and how to read its success, ready for a client to send
    (and repeat: both admin requests are safe to repeat, see the module docstring).

    Attributes:
        method: the HTTP method.
        path: the path after the client's base URL, percent-encoded (`/v1/admin/...`).
        body: the JSON body, UTF-8.
        parse: the result from a 2xx status and its JSON object; raises KeyError,
            TypeError or ValueError when the object is not what hookline answers.
    """

    method: str
    path: str
    body: bytes
    parse: Callable[[int, dict[str, Any]], AnswerT]

    @property
    def name(self) -> str:
        """The request in words, for errors: `PUT /v1/admin/tenants/acme`."""
        return f"{self.method} {self.path}"

    def read(self, status: int, header: Header, body: bytes,
             now_s: float) -> AnswerT | RetryLater:
        """Interpret one HTTP answer.

        Args:
            status: the HTTP status.
            header: looks a response header up by name.
            body: the response body.
            now_s: unix time now, seconds (for an HTTP-date `Retry-After`).

        Returns:
            The parsed answer on 2xx, RetryLater when the request should be made again.

        Raises:
            HooklineRejected: any other answer (the server's `error`, `detail` and `field`),
                or a 2xx that is not hookline's answer (`not_hookline`).
        """
        document = _json_object(body)
        if 200 <= status < 300:
            if document is not None:
                try:
                    return self.parse(status, document)
                except (KeyError, TypeError, ValueError):
                    pass
            _not_hookline(status, body, self.name)
        return _retry_or_refuse(status, header, body, document, now_s, request=self.name)


def tenant_path(tenant_id: str) -> str:
    """`/v1/admin/tenants/{tenant_id}`, the id percent-encoded as one path segment.

    Only what keeps the path the tenant's is checked here: hookline checks the id itself
    and refuses a malformed one (400, field `id`).

    Raises:
        TypeError: `tenant_id` is not a string.
        ValueError: `tenant_id` is empty, `.` or `..` (URL handling drops or climbs such a
            segment, so the request would reach another route).
    """
    if not isinstance(tenant_id, str):
        raise TypeError(f"tenant_id must be a string, not {type(tenant_id).__name__}")
    if tenant_id in ("", ".", ".."):
        raise ValueError(f"tenant_id must be a tenant's id, not {tenant_id!r}")
    return f"{TENANTS_PATH}/{quote(tenant_id, safe='')}"


def put_tenant_call(tenant_id: str, *, name: str | None = None,
                    metadata: Mapping[str, Any] | None = None,
                    max_destinations: int | NoLimit | None = None,
                    disabled: bool | None = None,
                    adopt_history: bool | None = None) -> AdminCall[Tenant]:
    """`PUT /v1/admin/tenants/{id}` with the fields given (None: left as they are).

    Raises:
        TypeError, ValueError: a bad `tenant_id` (see tenant_path), `metadata` that is not
            a mapping (TypeError), or holds something JSON cannot represent.
    """
    path = tenant_path(tenant_id)
    fields: dict[str, Any] = {}
    if name is not None:
        fields["name"] = name
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping (a JSON object), not "
                            f"{type(metadata).__name__}")
        fields["metadata"] = dict(metadata)
    if max_destinations is NO_LIMIT:
        fields["max_destinations"] = None  # null is hookline's "no limit"
    elif max_destinations is not None:
        fields["max_destinations"] = max_destinations
    if disabled is not None:
        fields["disabled"] = disabled
    if adopt_history is not None:
        fields["adopt_history"] = adopt_history
    return AdminCall("PUT", path, _encode(fields), _tenant)


def portal_access_call(tenant_id: str, *, ttl_s: int | None = None,
                       read_only: bool | None = None,
                       capabilities: Sequence[str] | None = None) -> AdminCall[PortalAccess]:
    """`POST /v1/admin/tenants/{id}/tokens` with the fields given (None: hookline's default).

    Raises:
        TypeError, ValueError: a bad `tenant_id` (see tenant_path).
    """
    path = f"{tenant_path(tenant_id)}/tokens"
    fields: dict[str, Any] = {}
    if ttl_s is not None:
        fields["ttl_s"] = ttl_s
    if read_only is not None:
        fields["read_only"] = read_only
    if capabilities is not None:
        # A lone string goes as it is, for hookline to refuse (400, field `capabilities`),
        # rather than being split here into one-letter capabilities.
        fields["capabilities"] = (capabilities if isinstance(capabilities, str)
                                  else list(capabilities))
    return AdminCall("POST", path, _encode(fields), _portal_access)


def _encode(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


def _tenant(status: int, document: dict[str, Any]) -> Tenant:
    limit = document["max_destinations"]
    if limit is not None:
        limit = _typed(document, "max_destinations", int)
    return Tenant(id=_typed(document, "id", str), name=_typed(document, "name", str),
                  metadata=_typed(document, "metadata", dict),
                  max_destinations=limit, disabled=_typed(document, "disabled", bool),
                  created_at=_seconds(document, "created_at"),
                  updated_at=_seconds(document, "updated_at"),
                  destinations=_typed(document, "destinations", int), created=status == 201)


def _portal_access(status: int, document: dict[str, Any]) -> PortalAccess:
    del status  # 201 is the only success; any 2xx with this shape is read alike
    capabilities = _typed(document, "capabilities", list)
    if not all(isinstance(c, str) for c in capabilities):
        raise TypeError("capabilities: not a list of names")
    return PortalAccess(token=_typed(document, "token", str),
                        url=_typed(document, "portal_url", str),
                        expires_at=_typed(document, "expires_at", int),
                        capabilities=tuple(capabilities),
                        read_only=_typed(document, "read_only", bool))


ValueT = TypeVar("ValueT")


def _typed(document: dict[str, Any], key: str, kind: type[ValueT]) -> ValueT:
    """`document[key]`, which must be a `kind` (a JSON true is no number here)."""
    value = document[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise TypeError(f"{key}: {type(value).__name__}, not {kind.__name__}")
    return value


def _seconds(document: dict[str, Any], key: str) -> float:
    value = document[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key}: {type(value).__name__}, not a number")
    return float(value)

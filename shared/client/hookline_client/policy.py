"""What the publishing clients decide, without I/O: the request body, how to read an answer,
when to retry and how long to wait. The sync and the asyncio client both drive this.

An answer is one of three things:
* success: 202 (stored now) or 200 with `"duplicate": true` (stored before: an earlier
  attempt of this send, or an earlier send with the same id, got through);
* retry later, with the same id: no answer at all (connection refused, reset, timed out),
  408, 429, 500, 502, 503, 504; `Retry-After` (delta-seconds or an HTTP-date) lengthens the
  wait, never shortens it;
* refused for good: any other status, raised as HooklineRejected with the server's reason.

Waits between attempts ("equal jitter", like hookline's own delivery retries): the n-th wait
is d/2 + uniform(0, d/2) with d = min(backoff_cap_s, backoff_base_s * 2 ** (n - 1)). No
attempt starts, and no wait is begun, that would end past the send's deadline.
"""

from __future__ import annotations

import json
import math
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from hookline_client._version import __version__
from hookline_client.errors import HooklineRejected, HooklineUnavailable

EVENTS_PATH = "/v1/events"
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""Statuses after which the same event is sent again (the id makes a repeat harmless)."""
_EXCERPT_CHARS = 200
_RETRY_AFTER_MAX_CHARS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class SendPolicy:
    """How long one `send` may take and how it spaces its attempts, all in seconds.

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


@dataclass(frozen=True, slots=True)
class RetryLater:
    """An attempt that did not get the event confirmed but may be repeated.

    Attributes:
        reason: what happened, in words (kept for HooklineUnavailable).
        retry_after_s: the server's `Retry-After`, seconds, when it sent one.
    """

    reason: str
    retry_after_s: float | None = None


def read_answer(status: int, header: Callable[[str], str | None], body: bytes, event_id: str,
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
            raise HooklineRejected(status, "not_hookline",
                                   f"a {status} answer without hookline's JSON; is the URL "
                                   f"hookline's? body: {_excerpt(body)}")
        duplicate = status == 200 and document.get("duplicate") is True
        return SendResult(outcome="duplicate" if duplicate else "accepted", id=event_id,
                          event_id=int(document.get("event_id", 0)),
                          message_id=document["message_id"],
                          jobs=int(document.get("jobs", 0)), attempts=attempts)
    code = str(document.get("error")) if document and "error" in document else f"http_{status}"
    detail = (str(document["detail"]) if document and "detail" in document
              else _excerpt(body) or "(no body)")
    if status in RETRY_STATUSES:
        return RetryLater(f"{status} {code}: {detail}",
                          parse_retry_after(header("Retry-After"), now_s))
    if 300 <= status < 400:
        detail = f"redirected to {header('Location')!r}; give the client the final URL"
    field = document.get("field") if document else None
    raise HooklineRejected(status, code, detail, field if isinstance(field, str) else None)


class Attempts:
    """The clock and the count of one send's attempts: how long each may take, how long to
    wait between them, and when to give up (HooklineUnavailable)."""

    def __init__(self, policy: SendPolicy, event_id: str,
                 rng: random.Random | None = None) -> None:
        self._policy = policy
        self._event_id = event_id
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
        return HooklineUnavailable(self._event_id, self.count, self.last_error)


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
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be http(s)://HOST[:PORT], not {base_url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"base_url must have no query or fragment: {base_url!r}")
    try:
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise ValueError(f"base_url has an invalid port: {base_url!r}") from exc
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}{EVENTS_PATH}"


def request_headers(token: str) -> dict[str, str]:
    """The headers of every `POST /v1/events`: JSON, the bearer token, who is asking.

    Raises:
        ValueError: `token` is empty or holds characters a header cannot carry.
    """
    if not token or token != token.strip() or not token.isprintable() or not token.isascii():
        raise ValueError("token must be the non-empty ingest token (printable ASCII)")
    return {"Content-Type": "application/json", "Accept": "application/json",
            "Authorization": f"Bearer {token}", "User-Agent": USER_AGENT}


USER_AGENT = f"hookline-client/{__version__}"

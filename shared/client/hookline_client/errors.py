"""The errors the publishing client and the receiver kit raise (no hookline imports, so the
`hookline_client` package stands on its own)."""

from __future__ import annotations


class HooklineClientError(Exception):
    """Root of every error the publishing client raises on purpose."""


class HooklineRejected(HooklineClientError):
    """hookline refused the event, or an admin request (a tenant's put, a portal link), for
    good (a 4xx other than 408 and 429): making it again as is would be refused again. Fix
    the request, the token or the URL.

    Attributes:
        status: the HTTP status (400 invalid input, 401/403 token, 404 unknown tenant, 409
            conflict, 413 too large, ...).
        code: the `error` field of hookline's JSON answer (`invalid_event`,
            `invalid_request`, `unauthorized`, ...), or `http_<status>` when the answer was
            not hookline's JSON.
        message: the `detail` field: what is wrong, in words.
        field: the offending part of the request when the server named one, else None: of
            an event `id`, `type`, `data`, `source`, `body`; of an admin request `id` (the
            tenant id), `name`, `metadata`, `max_destinations`, `disabled`, `ttl_s`,
            `read_only`, `capabilities`, `body`.
        request: what was refused, in words: `the event`, or an admin request's method and
            path (`PUT /v1/admin/tenants/acme`).
    """

    def __init__(self, status: int, code: str, message: str, field: str | None = None, *,
                 request: str = "the event") -> None:
        where = f" ({field})" if field else ""
        # hookline's detail starts with the field's name ("type: must match ..."): say it once
        reason = message.removeprefix(f"{field}: ") if field else message
        super().__init__(f"hookline refused {request}: {status} {code}{where}: {reason}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.request = request


class HooklineUnavailable(HooklineClientError):
    """hookline could not be reached, or kept answering "retry later" (429, 502, 503, 504),
    until the send's deadline passed. The event may or may not be stored: send it again
    later with the same id (a repeat is answered as a duplicate, never stored twice). An
    admin request (a tenant's put, a portal link) may or may not have taken effect: making
    it again is safe.

    Attributes:
        event_id: the id the event was sent with (keep it to retry with); None when what
            was not confirmed is an admin request.
        attempts: how many requests were made.
        last_error: what the last attempt met, in words.
        request: what was not confirmed, in words: `event '<id>'`, or an admin request's
            method and path (`PUT /v1/admin/tenants/acme`).
    """

    def __init__(self, event_id: str | None, attempts: int, last_error: str, *,
                 request: str | None = None) -> None:
        self.request = request if request is not None else f"event {event_id!r}"
        super().__init__(f"hookline unavailable: {self.request} not confirmed after "
                         f"{attempts} attempt(s); last: {last_error}")
        self.event_id = event_id
        self.attempts = attempts
        self.last_error = last_error


class WebhookVerificationError(Exception):
    """Root of the receiver kit's refusals: the request is not a genuine, fresh delivery.

    Answer it with 401. hookline treats a 400, 401 or 403 as permanent: the job goes straight
    to the dead letters, to be replayed once the secret or the clock is fixed.
    """


class InvalidSignature(WebhookVerificationError):
    """A `webhook-*` header is missing or malformed, or no signature in `webhook-signature`
    matches the body with any of the given secrets (a forged, tampered or misaddressed
    request, or the wrong secret)."""


class TimestampOutOfTolerance(WebhookVerificationError):
    """`webhook-timestamp` is further from this host's clock than the tolerance allows, in
    the past (a replayed capture, or a very late delivery) or in the future (clock skew).

    Attributes:
        timestamp_s: the header's value, unix seconds.
        now_s: this host's clock when checked, unix seconds.
        tolerance_s: the allowed distance, seconds.
    """

    def __init__(self, timestamp_s: int, now_s: float, tolerance_s: float) -> None:
        direction = "old" if timestamp_s < now_s else "new"
        super().__init__(f"webhook-timestamp {timestamp_s} is too {direction}: "
                         f"{abs(now_s - timestamp_s):.0f} s from now, tolerance "
                         f"{tolerance_s:g} s")
        self.timestamp_s = timestamp_s
        self.now_s = now_s
        self.tolerance_s = tolerance_s

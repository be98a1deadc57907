"""The delivery step the peer queues run, written once and used by both task modules.

What a Python team would put in a Celery or Huey task to deliver one webhook: look the
destination up, sign the exact body with hookline's own Standard Webhooks code
(shared/signing.py, so the signing cost is the same), POST it on a keep-alive
`requests.Session` (one per worker thread: sessions are not thread-safe), and let hookline's
own retry rule (shared/policy/retry.py `next_attempt`, the defaults of shared/config.py) decide
between done, retry after a jittered backoff, and dead.

The destinations come from the environment variable `COMPARE_DESTINATIONS`, a JSON list of
`{"name", "url", "secret"}` written by the bench (a real app would read its database).
"""

from __future__ import annotations

import json
import os
import threading
import time

import requests

from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead, Done, Outcome
from hookline.shared.policy.retry import Backoff, next_attempt
from hookline.shared.signing import signed_headers

DESTINATIONS_ENV = "COMPARE_DESTINATIONS"
USER_AGENT = "hookline-bench-peer/0.1"
_DEFAULTS = Config()
BACKOFF = Backoff(base_s=_DEFAULTS.retry_base_s, cap_s=_DEFAULTS.retry_cap_s,
                  max_attempts=_DEFAULTS.max_attempts)
TIMEOUT_S = _DEFAULTS.attempt_timeout_s
_local = threading.local()


def load_destinations(environ: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """name -> (url, whsec_ secret) from `COMPARE_DESTINATIONS` (empty when unset).

    Raises:
        ValueError: the variable is not a JSON list of objects with name, url and secret.
    """
    text = (os.environ if environ is None else environ).get(DESTINATIONS_ENV, "[]")
    return {d["name"]: (d["url"], d["secret"]) for d in json.loads(text)}


DESTINATIONS = load_destinations()


def _session() -> requests.Session:
    """This thread's keep-alive session (created on first use)."""
    session = getattr(_local, "session", None)
    if session is None:
        session = requests.Session()
        session.headers["User-Agent"] = USER_AGENT
        _local.session = session
    return session


def post_signed(url: str, secret: str, message_id: str, body: bytes) -> AttemptResult:
    """One attempt: POST `body` to `url` with fresh Standard Webhooks headers.

    Never raises for network trouble: a transport error or a timeout (TIMEOUT_S seconds,
    hookline's `attempt_timeout_s` default) comes back with `error` set and no status.
    Redirects are not followed, as in hookline.
    """
    started_at = time.time()
    headers = signed_headers(message_id, body, [secret], started_at)
    headers["content-type"] = "application/json"
    try:
        response = _session().post(url, data=body, headers=headers, timeout=TIMEOUT_S,
                                   allow_redirects=False)
    except requests.RequestException as exc:
        return AttemptResult(started_at=started_at, duration_s=time.time() - started_at,
                             error=type(exc).__name__)
    return AttemptResult(started_at=started_at, duration_s=time.time() - started_at,
                         status_code=response.status_code,
                         retry_after=response.headers.get("Retry-After"))


def attempt_delivery(destination: str, message_id: str, body: str, attempt: int) -> Outcome:
    """Make attempt number `attempt` (1-based) of one delivery and decide what follows.

    Args:
        destination: a name in COMPARE_DESTINATIONS.
        message_id: the event's `webhook-id`, the same on every attempt and destination.
        body: the event's exact body (JSON text; sent UTF-8 encoded, byte for byte the
            body the front door received).
        attempt: the number of this attempt, 1 for the first.

    Returns:
        Done, Retry (the caller re-queues it `delay_s` seconds later) or Dead.

    Raises:
        KeyError: unknown destination.
    """
    url, secret = DESTINATIONS[destination]
    result = post_signed(url, secret, message_id, body.encode())
    return next_attempt(attempt, result, time.time(), BACKOFF)


def is_final(outcome: Outcome) -> bool:
    """Whether `outcome` ends the delivery (Done or Dead, not Retry)."""
    return isinstance(outcome, Done | Dead)

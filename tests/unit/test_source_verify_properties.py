"""Properties of the inbound signature parsers (ingest/source_verify.py), for any input:
header text never raises anything but SignatureInvalid or InvalidEvent, a correctly signed
body always passes the signature check, and changing any one byte of it always fails it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.ingest.source_verify import (
    verify_github,
    verify_standard,
    verify_stripe,
    verify_token,
)
from hookline.shared.errors import InvalidEvent, SignatureInvalid

NOW = 1_800_000_000
PROPERTY = settings(max_examples=200, derandomize=True, database=None, deadline=None)

texts = st.text(max_size=200)
"""Arbitrary header text: any code point (aiohttp hands header values over as str)."""

secrets_text = st.text(alphabet=st.characters(codec="utf-8"), min_size=16, max_size=64)
std_keys = st.binary(min_size=16, max_size=64)
bodies = st.binary(max_size=512)
ids = st.from_regex(r"[A-Za-z0-9_:-]{1,40}", fullmatch=True)
types = st.from_regex(r"[A-Za-z0-9_:-]{1,20}(\.[A-Za-z0-9_:-]{1,20})?", fullmatch=True)


def header_sets(names: tuple[str, ...]) -> st.SearchStrategy[dict[str, str]]:
    """Each of `names` absent or arbitrary, plus digit-like values where parsers read numbers
    (non-ASCII digits such as '²' and '٣' included, and absurdly long numbers)."""
    numberish = st.one_of(st.text(alphabet="0123456789²٣", min_size=1, max_size=30),
                          st.integers(1, 5000).map(lambda n: "9" * n))
    return st.fixed_dictionaries({}, optional={name: st.one_of(texts, numberish)
                                               for name in names})


def stripe_like() -> st.SearchStrategy[str]:
    """Stripe-Signature-shaped text: `k=v` items with arbitrary keys and values."""
    item = st.tuples(st.sampled_from(["t", "v1", "v0", "x", ""]),
                     st.one_of(texts, st.text(alphabet="0123456789²", max_size=12),
                               st.integers(1, 5000).map(lambda n: "9" * n)))
    return st.lists(item, max_size=5).map(lambda items: ",".join(f"{k}={v}" for k, v in items))


def envelope(event_id: str, event_type: str, extra: Any) -> bytes:
    return json.dumps({"id": event_id, "type": event_type, "data": extra}).encode()


def github_signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def stripe_signature(secret: str, body: bytes, t: int = NOW) -> str:
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def standard_headers(key: bytes, body: bytes, msg_id: str, t: int = NOW) -> dict[str, str]:
    digest = hmac.new(key, f"{msg_id}.{t}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": str(t),
            "webhook-signature": "v1," + base64.b64encode(digest).decode()}


def whsec(key: bytes) -> str:
    return "whsec_" + base64.b64encode(key).decode()


def one_byte_changed(body: bytes, data: st.DataObject) -> bytes:
    index = data.draw(st.integers(0, len(body) - 1), label="index")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != body[index]), label="byte")
    return body[:index] + bytes([new]) + body[index + 1:]


# -- arbitrary header text -----------------------------------------------------------------


@PROPERTY
@given(headers=header_sets(("X-Hub-Signature-256", "X-GitHub-Delivery", "X-GitHub-Event")),
       body=bodies, secret=secrets_text)
def test_github_arbitrary_headers_raise_only_signature_invalid(headers, body, secret):
    """Arbitrary GitHub headers never verify (nor raise anything else) on an arbitrary body."""
    try:
        verify_github(body, headers, secret)
    except SignatureInvalid:
        return
    raise AssertionError("arbitrary headers verified")


@PROPERTY
@given(signature=st.one_of(texts, stripe_like()), body=bodies, secret=secrets_text)
def test_stripe_arbitrary_header_raises_only_signature_invalid(signature, body, secret):
    """Any Stripe-Signature text (non-ASCII digits and 5,000-digit timestamps included) is
    refused with SignatureInvalid, never another exception."""
    try:
        verify_stripe(body, {"Stripe-Signature": signature}, secret, NOW)
    except SignatureInvalid:
        return
    raise AssertionError("an arbitrary Stripe-Signature verified")


@PROPERTY
@given(headers=header_sets(("webhook-id", "webhook-timestamp", "webhook-signature")),
       body=bodies, key=std_keys)
def test_standard_arbitrary_headers_raise_only_signature_invalid(headers, body, key):
    """Any webhook-id/-timestamp/-signature text is refused with SignatureInvalid."""
    try:
        verify_standard(body, headers, whsec(key), NOW)
    except SignatureInvalid:
        return
    raise AssertionError("arbitrary Standard Webhooks headers verified")


@PROPERTY
@given(headers=header_sets(("Authorization", "Idempotency-Key", "X-Event-Type")),
       body=bodies, token=secrets_text)
def test_token_arbitrary_headers_raise_only_the_modules_errors(headers, body, token):
    """Any header text gives SignatureInvalid unless it is exactly `Bearer <token>`, in which
    case only InvalidEvent (an unusable body or id) or a result may follow."""
    presented = headers.get("Authorization", "").strip()
    try:
        verify_token(body, headers, token)
    except SignatureInvalid:
        return
    except InvalidEvent:
        pass
    scheme, _, given_token = presented.partition(" ")
    assert scheme.lower() == "bearer" and given_token.strip() == token


# -- correctly signed bodies verify; one changed byte fails --------------------------------


@PROPERTY
@given(body=bodies, secret=secrets_text, delivery=ids, event=types)
def test_github_signed_arbitrary_body_passes_the_signature(body, secret, delivery, event):
    """A correctly signed body, whatever its bytes, never fails the signature check (it may
    still be an InvalidEvent when it is not JSON)."""
    headers = {"X-Hub-Signature-256": github_signature(secret, body),
               "X-GitHub-Delivery": delivery, "X-GitHub-Event": event}
    try:
        verify_github(body, headers, secret)
    except InvalidEvent:
        pass


@PROPERTY
@given(event_id=ids, event_type=types, extra=st.text(max_size=50), secret=secrets_text,
       data=st.data())
def test_each_scheme_verifies_a_signed_envelope_and_refuses_any_one_byte_change(
        event_id, event_type, extra, secret, data):
    """A signed JSON envelope verifies to its (id, type) under github, stripe and standard;
    the same headers with any one byte of the body changed raise SignatureInvalid."""
    body = envelope(event_id, event_type, extra)
    key = hashlib.sha256(secret.encode()).digest()
    assert verify_github(body, {"X-Hub-Signature-256": github_signature(secret, body),
                                "X-GitHub-Delivery": event_id, "X-GitHub-Event": event_type},
                         secret) == (event_id, event_type)
    assert verify_stripe(body, {"Stripe-Signature": stripe_signature(secret, body)}, secret,
                         NOW) == (event_id, event_type)
    assert verify_standard(body, standard_headers(key, body, event_id), whsec(key),
                           NOW) == (event_id, event_type)

    changed = one_byte_changed(body, data)
    for check in (
        lambda: verify_github(changed, {"X-Hub-Signature-256": github_signature(secret, body),
                                        "X-GitHub-Delivery": event_id,
                                        "X-GitHub-Event": event_type}, secret),
        lambda: verify_stripe(changed, {"Stripe-Signature": stripe_signature(secret, body)},
                              secret, NOW),
        lambda: verify_standard(changed, standard_headers(key, body, event_id), whsec(key),
                                NOW),
    ):
        try:
            check()
        except SignatureInvalid:
            continue
        raise AssertionError("a body with one byte changed verified")


@PROPERTY
@given(body=bodies.filter(bool), secret=secrets_text, data=st.data())
def test_one_byte_change_of_any_signed_body_fails(body, secret, data):
    """For arbitrary (non-JSON included) bodies: one changed byte fails GitHub and Stripe."""
    changed = one_byte_changed(body, data)
    for check in (
        lambda: verify_github(changed, {"X-Hub-Signature-256": github_signature(secret, body),
                                        "X-GitHub-Delivery": "d", "X-GitHub-Event": "e"},
                              secret),
        lambda: verify_stripe(changed, {"Stripe-Signature": stripe_signature(secret, body)},
                              secret, NOW),
    ):
        try:
            check()
        except SignatureInvalid:
            continue
        raise AssertionError("a body with one byte changed verified")

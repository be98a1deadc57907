"""Inbound verification (ingest/source_verify.py): each scheme accepts what its provider signs
and rejects re-serialised or mangled bodies, missing or malformed headers, stale timestamps
and wrong secrets. Standard Webhooks requests are signed with the `standardwebhooks` package
(an independent signer); GitHub's documented test vector pins our HMAC."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook

from hookline.ingest.source_verify import (
    verify,
    verify_github,
    verify_standard,
    verify_stripe,
    verify_token,
)
from hookline.shared.endpoint_models import Source
from hookline.shared.errors import InvalidEvent, SignatureInvalid
from hookline.shared.policy.sources import check_source, generate_source_secret
from hookline.shared.signing import generate_secret

NOW = 1_800_000_000
GH_SECRET = "It's a Secret to Everybody"
STRIPE_SECRET = "whsec_test_3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
TOKEN = "tok_abcdefghijklmnopqrstuvwxyz012345"
# Non-ASCII on purpose: a re-encoding (ensure_ascii, NFC/NFD, Latin-1) changes these bytes.
BODY = ('{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid",'
        '"data":{"name":"Zoë ✓"}}').encode()


def gh_headers(body: bytes, secret: str = GH_SECRET, event: str = "push",
               delivery: str = "72d3162e-cc78-11e3-81ab-4c9367dc0958") -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}


def stripe_header(body: bytes, t: int = NOW, secret: str = STRIPE_SECRET) -> str:
    """As Stripe documents it: hex HMAC-SHA256(secret, f"{t}." + body), header t=..,v1=.."""
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def std_headers(body: bytes, secret: str, t: int = NOW,
                msg_id: str = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W") -> dict[str, str]:
    """Signed by the standardwebhooks package, not by our code."""
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(t, tz=UTC), body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(t), "webhook-signature": signature}


def reserialised(body: bytes) -> bytes:
    """The same JSON value, encoded the way json.dumps does (spaces, \\u escapes)."""
    return json.dumps(json.loads(body)).encode()


def ascii_mangled(body: bytes) -> bytes:
    """What a sender that mangles non-ASCII to '?' would have signed."""
    return body.decode().encode("ascii", "replace")


# -- GitHub --------------------------------------------------------------------------------


def test_github_documented_test_vector():
    """GitHub's published vector: secret "It's a Secret to Everybody", body "Hello, World!"
    verifies with sha256=757107ea...; any other digest is refused. (The body is not JSON, so
    verification passes and the body check then refuses it as an unusable event.)"""
    headers = {"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c"
                                      "22c46f4379c8b043e17",
               "X-GitHub-Event": "ping", "X-GitHub-Delivery": "d-1"}
    with pytest.raises(InvalidEvent, match="JSON"):
        verify_github(b"Hello, World!", headers, GH_SECRET)  # signature passed, body refused
    headers["X-Hub-Signature-256"] = headers["X-Hub-Signature-256"][:-1] + "0"
    with pytest.raises(SignatureInvalid, match="does not match"):
        verify_github(b"Hello, World!", headers, GH_SECRET)
    assert gh_headers(b"Hello, World!")["X-Hub-Signature-256"].endswith("b043e17")


def test_github_accepts_and_extracts_delivery_and_event_action():
    """A correctly signed delivery yields (X-GitHub-Delivery, X-GitHub-Event.action), or the
    event alone when the payload has no action; header names are case-insensitive."""
    body = b'{"action": "opened", "number": 1}'
    headers = {k.lower(): v for k, v in gh_headers(body, event="pull_request").items()}
    assert verify_github(body, headers, GH_SECRET) == (
        "72d3162e-cc78-11e3-81ab-4c9367dc0958", "pull_request.opened")
    assert verify_github(BODY, gh_headers(BODY), GH_SECRET)[1] == "push"


@pytest.mark.parametrize("tamper", [reserialised, ascii_mangled], ids=["reserialised",
                                                                     "ascii-mangled"])
def test_github_rejects_body_other_than_the_signed_bytes(tamper):
    """Signed over one byte string, sent with another that is the 'same' JSON: refused."""
    sent, signed = (reserialised(BODY), BODY) if tamper is reserialised else (BODY, tamper(BODY))
    assert sent != signed
    with pytest.raises(SignatureInvalid, match="does not match"):
        verify_github(sent, gh_headers(signed), GH_SECRET)


@pytest.mark.parametrize("value,reason", [
    (None, "missing X-Hub-Signature-256"),
    ("", "empty X-Hub-Signature-256"),
    ("sha1=0123456789abcdef0123456789abcdef01234567", "malformed"),
    ("sha256=xyz", "malformed"),
    ("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "malformed"),
])
def test_github_rejects_missing_or_malformed_signature_header(value, reason):
    """No header, an empty one, the legacy sha1 header format, non-hex, no prefix: refused."""
    headers = gh_headers(BODY)
    del headers["X-Hub-Signature-256"]
    if value is not None:
        headers["X-Hub-Signature-256"] = value
    with pytest.raises(SignatureInvalid, match=reason):
        verify_github(BODY, headers, GH_SECRET)


def test_github_rejects_wrong_secret_and_repeated_header():
    """A signature made with another secret is refused, and so is a second signature header
    (we never pick one of several)."""
    with pytest.raises(SignatureInvalid, match="does not match"):
        verify_github(BODY, gh_headers(BODY, secret="another secret entirely"), GH_SECRET)
    good = gh_headers(BODY)["X-Hub-Signature-256"]
    pairs = [("X-Hub-Signature-256", good), ("x-hub-signature-256", good)]

    class Multi(dict):  # headers with a repeated name, as a multidict's items() shows them
        def items(self):
            return pairs

    with pytest.raises(SignatureInvalid, match="appears 2 times"):
        verify_github(BODY, Multi(), GH_SECRET)


def test_github_signed_but_missing_delivery_header_is_invalid_event():
    """A well-signed request without X-GitHub-Delivery is an unusable event, not a bad
    signature."""
    headers = gh_headers(BODY)
    del headers["X-GitHub-Delivery"]
    with pytest.raises(InvalidEvent) as info:
        verify_github(BODY, headers, GH_SECRET)
    assert info.value.field == "X-GitHub-Delivery"


# -- Stripe --------------------------------------------------------------------------------


def test_stripe_accepts_and_extracts_body_id_and_type():
    """t=..,v1=.. over `t.body` with the whole whsec_ string as key: (body id, body type)."""
    assert verify_stripe(BODY, {"Stripe-Signature": stripe_header(BODY)}, STRIPE_SECRET,
                         NOW + 10) == ("evt_1NG8Du2eZvKYlo2CUI79vXWy", "invoice.paid")


def test_stripe_any_v1_entry_passes_while_rolling_secrets():
    """Stripe sends one v1 per active secret (and a v0); one matching entry is enough."""
    old = stripe_header(BODY, secret="whsec_the_old_secret_0000000000").split("v1=")[1]
    header = f"t={NOW},v1={old},{stripe_header(BODY).split(',')[1]},v0=deadbeef"
    assert verify_stripe(BODY, {"stripe-signature": header}, STRIPE_SECRET, NOW)[0] == \
        "evt_1NG8Du2eZvKYlo2CUI79vXWy"


@pytest.mark.parametrize("tamper", [reserialised, ascii_mangled], ids=["reserialised",
                                                                     "ascii-mangled"])
def test_stripe_rejects_body_other_than_the_signed_bytes(tamper):
    """Signed over one byte string, sent with another: refused."""
    sent, signed = (reserialised(BODY), BODY) if tamper is reserialised else (BODY, tamper(BODY))
    with pytest.raises(SignatureInvalid, match=r"no v1 signature .* matches"):
        verify_stripe(sent, {"Stripe-Signature": stripe_header(signed)}, STRIPE_SECRET, NOW)


@pytest.mark.parametrize("header,reason", [
    (None, "missing Stripe-Signature"),
    ("garbage", "malformed"),
    (f"v1={'a' * 64}", "exactly one t="),
    (f"t=abc,v1={'a' * 64}", "exactly one t="),
    (f"t={NOW},t={NOW},v1={'a' * 64}", "exactly one t="),
    (f"t={NOW},v0={'a' * 64}", "no v1 signature"),
])
def test_stripe_rejects_missing_or_malformed_header(header, reason):
    """No header, no t, a non-numeric or repeated t, or no v1 entry: refused."""
    headers = {} if header is None else {"Stripe-Signature": header}
    with pytest.raises(SignatureInvalid, match=reason):
        verify_stripe(BODY, headers, STRIPE_SECRET, NOW)


def test_stripe_rejects_stale_or_future_timestamp_and_wrong_secret():
    """A correctly signed header 301 s old (or 301 s ahead) is refused; 300 s passes; a
    signature by another secret is refused."""
    stale = {"Stripe-Signature": stripe_header(BODY, t=NOW - 301)}
    with pytest.raises(SignatureInvalid, match="301 s old"):
        verify_stripe(BODY, stale, STRIPE_SECRET, NOW)
    with pytest.raises(SignatureInvalid, match="in the future"):
        verify_stripe(BODY, {"Stripe-Signature": stripe_header(BODY, t=NOW + 301)},
                      STRIPE_SECRET, NOW)
    verify_stripe(BODY, {"Stripe-Signature": stripe_header(BODY, t=NOW - 300)},
                  STRIPE_SECRET, NOW)
    with pytest.raises(SignatureInvalid, match="no v1"):
        verify_stripe(BODY, {"Stripe-Signature": stripe_header(
            BODY, secret="whsec_someone_else_1234567890")}, STRIPE_SECRET, NOW)


def test_stripe_signed_body_without_type_is_invalid_event():
    """Well signed, but the body has no `type`: InvalidEvent naming the field."""
    body = b'{"id": "evt_1"}'
    with pytest.raises(InvalidEvent) as info:
        verify_stripe(body, {"Stripe-Signature": stripe_header(body)}, STRIPE_SECRET, NOW)
    assert info.value.field == "type"


# -- Standard Webhooks ---------------------------------------------------------------------


def test_standard_accepts_package_signed_request():
    """Signed by the standardwebhooks package: (webhook-id, body type)."""
    secret = generate_secret()
    assert verify_standard(BODY, std_headers(BODY, secret), secret, NOW) == (
        "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "invoice.paid")


def test_standard_any_valid_v1_entry_among_several_passes():
    """Space-separated entries (rotation, other versions): one valid v1 is enough; with none
    valid the request is refused."""
    secret, other = generate_secret(), generate_secret()
    mine = std_headers(BODY, secret)["webhook-signature"]
    theirs = std_headers(BODY, other)["webhook-signature"]
    headers = std_headers(BODY, secret)
    headers["webhook-signature"] = f"{theirs} v1a,bm90LWNoZWNrZWQ= v1,!!notbase64!! {mine}"
    assert verify_standard(BODY, headers, secret, NOW)[0] == "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
    headers["webhook-signature"] = theirs
    with pytest.raises(SignatureInvalid, match=r"no v1 signature .* matches"):
        verify_standard(BODY, headers, secret, NOW)


@pytest.mark.parametrize("tamper", [reserialised, ascii_mangled], ids=["reserialised",
                                                                     "ascii-mangled"])
def test_standard_rejects_body_other_than_the_signed_bytes(tamper):
    """Signed over one byte string, sent with another: refused."""
    secret = generate_secret()
    sent, signed = (reserialised(BODY), BODY) if tamper is reserialised else (BODY, tamper(BODY))
    with pytest.raises(SignatureInvalid, match="matches"):
        verify_standard(sent, std_headers(signed, secret), secret, NOW)


@pytest.mark.parametrize("name,value,reason", [
    ("webhook-id", None, "missing webhook-id"),
    ("webhook-timestamp", None, "missing webhook-timestamp"),
    ("webhook-signature", None, "missing webhook-signature"),
    ("webhook-timestamp", "2027-01-15T08:00:00Z", "malformed webhook-timestamp"),
    ("webhook-signature", "c2lnbmF0dXJl", "malformed webhook-signature entry"),
    ("webhook-signature", "v1a,c2lnbmF0dXJl", "no v1 signature"),
])
def test_standard_rejects_missing_or_malformed_headers(name, value, reason):
    """Each of the three headers missing, a non-integer timestamp, an entry without a
    version, only non-v1 entries: refused."""
    secret = generate_secret()
    headers = std_headers(BODY, secret)
    del headers[name]
    if value is not None:
        headers[name] = value
    with pytest.raises(SignatureInvalid, match=reason):
        verify_standard(BODY, headers, secret, NOW)


def test_standard_rejects_stale_timestamp_and_wrong_secret():
    """Correctly signed but 301 s old: refused; signed with another secret: refused."""
    secret = generate_secret()
    with pytest.raises(SignatureInvalid, match="old"):
        verify_standard(BODY, std_headers(BODY, secret, t=NOW - 301), secret, NOW)
    with pytest.raises(SignatureInvalid, match="matches"):
        verify_standard(BODY, std_headers(BODY, generate_secret()), secret, NOW)


def test_standard_id_is_signed():
    """Changing webhook-id after signing breaks the signature (the id is the dedupe key)."""
    secret = generate_secret()
    headers = std_headers(BODY, secret)
    headers["webhook-id"] = "msg_somethingelse"
    with pytest.raises(SignatureInvalid):
        verify_standard(BODY, headers, secret, NOW)


# -- token ---------------------------------------------------------------------------------


def test_token_accepts_bearer_and_reads_id_from_header_or_body():
    """Bearer token matches: the id comes from Idempotency-Key (else body id), the type from
    X-Event-Type (else body type)."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert verify_token(BODY, auth, TOKEN) == ("evt_1NG8Du2eZvKYlo2CUI79vXWy", "invoice.paid")
    headers = {**auth, "Idempotency-Key": "key-7", "X-Event-Type": "order.created"}
    assert verify_token(b"[1, 2]", headers, TOKEN) == ("key-7", "order.created")


@pytest.mark.parametrize("value,reason", [
    (None, "missing Authorization"),
    (f"Basic {TOKEN}", "malformed"),
    ("Bearer ", "empty|malformed"),
    (f"Bearer {TOKEN}x", "does not match"),
    ("Bearer wrong-token", "does not match"),
])
def test_token_rejects_missing_malformed_or_wrong_token(value, reason):
    """No header, another auth scheme, an empty or wrong token: refused."""
    headers = {} if value is None else {"Authorization": value}
    with pytest.raises(SignatureInvalid, match=reason):
        verify_token(BODY, headers, TOKEN)


def test_token_without_id_anywhere_is_invalid_event():
    """Authenticated, but no Idempotency-Key and no body id: InvalidEvent naming `id`."""
    with pytest.raises(InvalidEvent) as info:
        verify_token(b'{"type": "x"}', {"Authorization": f"Bearer {TOKEN}"}, TOKEN)
    assert info.value.field == "id"


# -- dispatch and source rules -------------------------------------------------------------


def test_verify_dispatches_by_scheme():
    """verify() uses the source's scheme: a GitHub-signed request to a token source fails."""
    github = Source(id=1, name="gh", scheme="github", secret=GH_SECRET, created_at=0.0)
    token = Source(id=2, name="tk", scheme="token", secret=TOKEN, created_at=0.0)
    assert verify(github, BODY, gh_headers(BODY), NOW)[1] == "push"
    with pytest.raises(SignatureInvalid, match="missing Authorization"):
        verify(token, BODY, gh_headers(BODY), NOW)


def test_source_rules_and_generated_secrets():
    """Names are URL-safe tokens (not `api`), schemes are the four known, standard needs a
    whsec_ secret, others 16+ characters; generated secrets pass the rules; stripe secrets
    are never generated."""
    from hookline.shared.errors import ConfigError

    for scheme in ("github", "standard", "token"):
        assert check_source("src", scheme, generate_source_secret(scheme)) == scheme
    for args in [("a/b", "github", GH_SECRET), ("api", "github", GH_SECRET),
                 ("ok", "gitlab", GH_SECRET), ("ok", "standard", GH_SECRET),
                 ("ok", "token", "short"), ("ok", "github", f" {GH_SECRET}")]:
        with pytest.raises(ConfigError):
            check_source(*args)
    with pytest.raises(ConfigError, match="Stripe"):
        generate_source_secret("stripe")

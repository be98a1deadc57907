"""The receiver kit's verify() agrees with the `standardwebhooks` package (the oracle) on
hookline's own signatures: rotation's two signatures, tampering, old and future timestamps,
and random bodies and secrets."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from hookline_client import InvalidSignature, TimestampOutOfTolerance, verify
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from hookline.shared.signing import generate_secret, signed_headers

OLD, NEW, OTHER = generate_secret(), generate_secret(32), generate_secret()
BODY = b'{"id":"evt_1","type":"invoice.paid","data":{"amount":42}}'


def oracle_accepts(body: bytes, headers: dict[str, str], secret: str) -> bool:
    try:
        Webhook(secret).verify(body, headers, json_parse=False)
    except WebhookVerificationError:
        return False
    return True


def kit_accepts(body: bytes, headers: Any, secret: str | list[str]) -> bool:
    try:
        verify(body, headers, secret)
    except (InvalidSignature, TimestampOutOfTolerance):
        return False
    return True


def test_a_delivery_verifies_and_the_wrong_secret_does_not() -> None:
    headers = signed_headers("msg_1", BODY, [NEW])
    assert kit_accepts(BODY, headers, NEW) and oracle_accepts(BODY, headers, NEW)
    assert not kit_accepts(BODY, headers, OTHER) and not oracle_accepts(BODY, headers, OTHER)
    # header names in any case (WSGI and aiohttp both hand them over capitalised)
    assert kit_accepts(BODY, {k.title(): v for k, v in headers.items()}, NEW)


def test_rotation_two_signatures_in_one_header_either_secret_verifies() -> None:
    headers = signed_headers("msg_2", BODY, [NEW, OLD])
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (NEW, OLD):
        assert kit_accepts(BODY, headers, secret) and oracle_accepts(BODY, headers, secret)
    assert not kit_accepts(BODY, headers, OTHER) and not oracle_accepts(BODY, headers, OTHER)
    # a receiver holding both secrets (mid-rotation on its side) accepts either signer
    assert kit_accepts(BODY, signed_headers("msg_3", BODY, [OLD]), [OTHER, OLD])
    assert not kit_accepts(BODY, signed_headers("msg_3", BODY, [NEW]), [OTHER, OLD])


def test_tampered_body_id_or_timestamp_is_an_invalid_signature() -> None:
    headers = signed_headers("msg_4", BODY, [NEW])
    tampered = BODY.replace(b"42", b"43")
    assert not oracle_accepts(tampered, headers, NEW)
    with pytest.raises(InvalidSignature):
        verify(tampered, headers, NEW)
    for name, value in (("webhook-id", "msg_5"),
                        ("webhook-timestamp", str(int(headers["webhook-timestamp"]) + 1))):
        changed = {**headers, name: value}
        assert not oracle_accepts(BODY, changed, NEW)
        with pytest.raises(InvalidSignature):
            verify(BODY, changed, NEW)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_an_invalid_signature(missing: str) -> None:
    headers = signed_headers("msg_6", BODY, [NEW])
    del headers[missing]
    with pytest.raises(InvalidSignature, match=missing):
        verify(BODY, headers, NEW)


def test_junk_signatures_and_timestamps_are_refused_not_crashed_on() -> None:
    headers = signed_headers("msg_7", BODY, [NEW])
    for signature in ("v1,", "v1,!!!", "garbage", "v2," + headers["webhook-signature"][3:]):
        with pytest.raises(InvalidSignature):
            verify(BODY, {**headers, "webhook-signature": signature}, NEW)
    for timestamp in ("soon", "-5", "1e9", "9" * 40):
        with pytest.raises(InvalidSignature, match="webhook-timestamp"):
            verify(BODY, {**headers, "webhook-timestamp": timestamp}, NEW)


@pytest.mark.parametrize("offset_s", [-301, 301, -3600, 3600])
def test_a_timestamp_outside_the_tolerance_either_way_is_refused(offset_s: int) -> None:
    headers = signed_headers("msg_8", BODY, [NEW], now_s=time.time() + offset_s)
    assert not oracle_accepts(BODY, headers, NEW)
    with pytest.raises(TimestampOutOfTolerance, match="too old" if offset_s < 0 else "too new"):
        verify(BODY, headers, NEW)
    verify(BODY, headers, NEW, tolerance_s=abs(offset_s) + 5)  # a wider tolerance admits it


def test_inside_the_tolerance_is_accepted_and_now_can_be_given() -> None:
    headers = signed_headers("msg_9", BODY, [NEW], now_s=1_800_000_000)
    verify(BODY, headers, NEW, now_s=1_800_000_000 + 299)
    verify(BODY, headers, NEW, now_s=1_800_000_000 - 299)
    with pytest.raises(TimestampOutOfTolerance):
        verify(BODY, headers, NEW, now_s=1_800_000_000 + 301)


def test_a_malformed_secret_is_a_configuration_error() -> None:
    headers = signed_headers("msg_10", BODY, [NEW])
    for secret in ("whsec_***", "whsec_", []):
        with pytest.raises(ValueError, match="secret"):
            verify(BODY, headers, secret)  # type: ignore[arg-type]
    # the prefix and base64 padding are optional, as in the Standard Webhooks libraries
    verify(BODY, headers, NEW.removeprefix("whsec_").rstrip("="))


@settings(max_examples=40, deadline=None)
@given(body=st.text(st.characters(codec="utf-8"), max_size=300).map(str.encode),
       key=st.binary(min_size=16, max_size=64),
       message_id=st.from_regex(r"msg_[0-9a-z]{1,26}", fullmatch=True),
       tamper=st.booleans(), skew_s=st.sampled_from([0, 200, -200, 400, -400]))
def test_random_deliveries_agree_with_the_oracle(body: bytes, key: bytes, message_id: str,
                                                 tamper: bool, skew_s: int) -> None:
    secret = "whsec_" + base64.b64encode(key).decode()
    headers = signed_headers(message_id, body, [secret], now_s=time.time() + skew_s)
    sent = body + b" " if tamper else body
    expected = not tamper and abs(skew_s) < 300
    assert oracle_accepts(sent, headers, secret) is expected
    assert kit_accepts(sent, headers, secret) is expected

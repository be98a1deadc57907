"""Outbound signatures, verified by the independent `standardwebhooks` and `svix` packages."""

from __future__ import annotations

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from svix.webhooks import Webhook as SvixWebhook
from svix.webhooks import WebhookVerificationError as SvixVerificationError

from hookline.shared.errors import ConfigError
from hookline.shared.signing import (
    generate_secret,
    new_message_id,
    new_message_ids,
    secret_key,
    signed_headers,
)

BODY = '{"id":"e1","type":"push","data":{"name":"é ✓","n":[1, 2]}}'.encode()


def test_standardwebhooks_and_svix_verify_our_signature():
    """Both reference verifiers accept our headers over the exact body bytes."""
    secret = generate_secret()
    headers = signed_headers(new_message_id(), BODY, [secret])
    assert Webhook(secret).verify(BODY, headers)["data"]["name"] == "é ✓"
    SvixWebhook(secret).verify(BODY, headers)  # raises WebhookVerificationError on mismatch


def test_rotation_sends_both_signatures():
    """During rotation the header carries one entry per secret; each verifies alone."""
    new, old = generate_secret(), generate_secret()
    headers = signed_headers(new_message_id(), BODY, [new, old])
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (new, old):
        Webhook(secret).verify(BODY, headers)
        SvixWebhook(secret).verify(BODY, headers)


def test_tampered_body_or_wrong_secret_fails_verification():
    """A changed byte or another secret does not verify."""
    secret = generate_secret()
    headers = signed_headers(new_message_id(), BODY, [secret])
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"1", b"3"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(BODY, headers)
    with pytest.raises(SvixVerificationError):
        SvixWebhook(generate_secret()).verify(BODY, headers)


def test_message_ids_are_unique_sortable_and_dotless():
    """Message ids never contain '.', sort by creation time and do not repeat."""
    ids = [new_message_id(1_800_000_000 + i) for i in range(1000)]
    assert len(set(ids)) == 1000 and ids == sorted(ids)
    assert all("." not in i and i.startswith("msg_") for i in ids)


@pytest.mark.parametrize("bad", ["abc", "whsec_not base64!", "whsec_QUJD"])
def test_malformed_secrets_are_rejected(bad):
    """A secret without the prefix, not base64, or too short is a ConfigError."""
    with pytest.raises(ConfigError):
        secret_key(bad)


def test_secret_key_refuses_non_ascii_with_config_error():
    """A `whsec_` secret holding non-ASCII characters is a ConfigError (base64 raised a bare
    ValueError before, which the admin API answered 500)."""
    with pytest.raises(ConfigError, match="base64"):
        secret_key("whsec_\u00e9" + "A" * 30)


def test_message_id_is_the_ulid_layout_in_crockford_base32(monkeypatch):
    """msg_ + 26 digits: 48 bits of milliseconds then the 80 random bits, most significant
    first, in lower-case Crockford base32 (checked against a digit-by-digit encoding)."""
    random_bits = bytes(range(1, 11))
    monkeypatch.setattr("hookline.shared.signing.os.urandom", lambda n: random_bits)
    now_s = 1_796_000_000.123
    value = (int(now_s * 1000) << 80) | int.from_bytes(random_bits, "big")
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    digits = "".join(alphabet[(value >> (5 * (25 - n))) & 31] for n in range(26))
    assert new_message_id(now_s) == "msg_" + digits


def test_message_ids_of_one_batch_are_distinct_and_sort_after_earlier_ones():
    """A batch's ids (one OS read of random bits for all) are distinct, of the ULID layout,
    and sort after the ids of an earlier millisecond."""
    earlier = new_message_id(1_700_000_000.0)
    batch = new_message_ids(500, 1_700_000_000.002)
    assert len(set(batch)) == 500
    assert all(len(i) == 30 and i.startswith("msg_") and "." not in i for i in batch)
    assert all(i[4:13] == batch[0][4:13] for i in batch)  # the same 48-bit millisecond
    assert min(batch) > earlier


def test_message_id_digits_are_the_ulid_layout_in_crockford_base32():
    """The 128-bit value (48 bits of milliseconds, 80 random) reads back from its 26 digits,
    as RFC 4648 base32 with Crockford's alphabet would write it."""
    import base64

    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    to_id = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", alphabet.encode())
    for message_id in new_message_ids(200, 1_700_000_000.123):
        value = int("".join(f"{alphabet.index(c):05b}" for c in message_id[4:]), 2)
        assert value >> 80 == 1_700_000_000_123
        reference = base64.b32encode(value.to_bytes(20, "big"))[6:].translate(to_id).decode()
        assert message_id == "msg_" + reference

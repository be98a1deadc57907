"""Both receivers `hookline bench --compare` can deliver to (the lean one,
rehearsal/fast_receiver.py, and the fixture, rehearsal/receiver.py), each in its own process
on 127.0.0.1, read through the compare's one adapter: a signed delivery is one effect with
its body's SHA-256 and arrival time, a repeat of its webhook-id is a request but no second
effect, a bad signature is an unverified request and no effect."""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from hookline.rehearsal.compare.run import receiver
from hookline.rehearsal.compare.workload import read_receipts
from hookline.rehearsal.harness import ReceiverNotStarted, child_env, receiver_child
from hookline.shared.signing import generate_secret, new_message_id, signed_headers

BODY = b'{"id": "e1", "type": "bench.event", "data": {"n": 1}}'


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST `body` to `url`; the HTTP status."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("kind", ["lean", "fixture"])
def test_receipts_count_one_effect_per_webhook_id_and_refuse_bad_signatures(tmp_path, kind):
    """Signed, repeated, then badly signed: one effect (d1, the body's SHA-256, received
    within the test's window), 3 requests of which 1 unverified, and `/_count` agrees."""
    with receiver(tmp_path, "probe", kind) as (base, dests):
        d1 = dests[0]
        message_id = new_message_id()
        before = time.time()
        first = post(d1.url, BODY, signed_headers(message_id, BODY, [d1.secret]))
        again = post(d1.url, BODY, signed_headers(message_id, BODY, [d1.secret]))
        forged = post(d1.url, BODY, signed_headers(new_message_id(), BODY, [generate_secret()]))
        after = time.time()
        raw = get_json(f"{base}/_receipts")
        count = get_json(f"{base}/_count")
    assert 200 <= first < 300 and 200 <= again < 300
    assert forged == 401
    effects, requests, unverified = read_receipts(raw)
    assert [(e["endpoint"], e["body_sha256"]) for e in effects] == [
        ("d1", hashlib.sha256(BODY).hexdigest())]
    assert before <= effects[0]["received_at"] <= after
    assert (requests, unverified) == (3, 1)
    assert count["effects"] == 1


def test_the_lean_receiver_serves_counts_not_requests(tmp_path):
    """The lean receiver's `/_receipts` counts verified and unverified requests instead of
    listing them, and `/_summary` still counts per endpoint (what `hookline bench` reads)."""
    with receiver(tmp_path, "lean", "lean") as (base, dests):
        d2 = dests[1]
        message_id = new_message_id()
        for _ in range(2):
            post(d2.url, BODY, signed_headers(message_id, BODY, [d2.secret]))
        post(d2.url, BODY, signed_headers(message_id, BODY, [dests[0].secret]))
        raw = get_json(f"{base}/_receipts")
        count = get_json(f"{base}/_count")
        summary = get_json(f"{base}/_summary")
    assert (raw["requests"], raw["unverified"], len(raw["effects"])) == (2, 1, 1)
    assert count == {"requests": 2, "effects": 1}
    assert summary["endpoints"]["d2"] == {"requests": 2, "effects": 1, "duplicates": 1,
                                          "bad_signatures": 1}
    assert summary["endpoints"]["d1"]["requests"] == 0


def test_an_unknown_receiver_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="unknown receiver"), receiver(tmp_path, "x", "bare"):
        pass
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("module", ["hookline.rehearsal.fast_receiver",
                                    "hookline.rehearsal.receiver"])
def test_a_receiver_that_exits_before_announcing_its_port_is_reported(module):
    """A spec the receiver refuses (no secret) ends it before its first stdout line: the
    harness says so, and leaves no process behind."""
    with pytest.raises(ReceiverNotStarted, match="did not start"), \
            receiver_child(module, ["d1"], child_env()):
        pass

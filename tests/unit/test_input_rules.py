"""The rule book's shared pieces: every Config setting's rule names the setting, the one
header rule with its leniency for stored rows, and refuse_unknown."""

from __future__ import annotations

from typing import Any

import pytest

from hookline.shared.config import Config
from hookline.shared.errors import InvalidInput, InvalidSetting
from hookline.shared.policy import inputs
from hookline.shared.policy.inputs import refuse_unknown
from hookline.shared.policy.rules import header_problem

BAD_SETTINGS: list[tuple[dict[str, Any], str]] = [
    ({"workers": -1}, "workers"),
    ({"log_level": "loud"}, "log_level"),
    ({"synchronous": "OFF"}, "synchronous"),
    ({"listen": "8080"}, "listen"),
    ({"lease_s": 0}, "lease_s"),
    ({"lease_s": float("inf")}, "lease_s"),  # a lost worker's job never taken over
    ({"lease_s": 5}, "attempt_timeout_s"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"pg_lock_timeout_s": float("inf")}, "pg_lock_timeout_s"),
    ({"quick_check_timeout_s": -1}, "quick_check_timeout_s"),
    ({"admin_token": "  "}, "admin_token"),
    ({"ingest_closed": True, "ingest_token": "t"}, "ingest_closed"),
    ({"ingest_rate_per_s": -1}, "ingest_rate_per_s"),
    ({"allow_networks": "10.0.0.0/99"}, "allow_networks"),
    ({"permanent_statuses": "400,503"}, "permanent_statuses"),
    ({"wal_degraded_bytes": -1}, "wal_degraded_bytes"),
    ({"breaker_failures": -1}, "breaker_failures"),
    ({"late_retry_after_attempts": 0}, "late_retry_after_attempts"),
    ({"batch_interval_s": 2}, "batch_interval_s"),
    ({"late_retry_share": 0}, "late_retry_share"),
    ({"destination_slot_share": 1.5}, "destination_slot_share"),
    ({"retention_bodies_s": -1}, "retention_bodies_s"),
    ({"retention_bodies_s": 10**9}, "retention_bodies_s"),
    ({"retention_dead_letters_s": float("nan")}, "retention_dead_letters_s"),
]


@pytest.mark.parametrize(("settings", "field"), BAD_SETTINGS,
                         ids=[f for _, f in BAD_SETTINGS])
def test_each_bad_setting_is_refused_naming_it(settings: dict[str, Any], field: str):
    """A Config with one bad setting raises InvalidSetting naming it, text `field: why`."""
    with pytest.raises(InvalidSetting) as refused:
        Config(**settings)
    assert refused.value.field == field
    assert str(refused.value).startswith(f"{field}: ")


def test_every_setting_has_a_rule_or_takes_any_value_of_its_type():
    """The defaults pass their own rules (good input is unchanged)."""
    assert Config().permanent_status_set == frozenset({400, 401, 403, 404, 405, 410, 413,
                                                       415, 422})


@pytest.mark.parametrize(("name", "value"), [
    ("X-Long", "v" * 2000), ("X-Tab", "a\tb"), ("X-Utf8", "café"), ("X-" + "n" * 100, "v")])
def test_stored_headers_are_held_to_the_wire_rule_only(name: str, value: str):
    """A header the strict rule refuses when it is saved can still be sent when it is
    already stored (leniency is the explicit `stored` flag); CR and LF never can."""
    assert header_problem(name, value) is not None
    assert header_problem(name, value, stored=True) is None
    assert "CR" in (header_problem(name, value + "\r", stored=True) or "")


def test_refuse_unknown_names_the_first_and_caps_the_list():
    """One message shape everywhere: the first unknown name is the field, at most five are
    listed (each cut to 40 characters), and the accepted ones follow."""
    refuse_unknown({"a": 1}, ("a", "b"))
    with pytest.raises(InvalidInput) as refused:
        refuse_unknown({"z" * 100: 1, **{f"x{i}": i for i in range(10)}}, ("a",))
    assert refused.value.field == "x0"
    assert "and 6 more" in refused.value.detail and "accepted: a" in refused.value.detail
    assert "z" * 41 not in refused.value.detail
    with pytest.raises(InvalidSetting):
        refuse_unknown({"b": 1}, (), error=InvalidSetting)


def test_an_id_refused_says_which_character_without_echoing_the_value():
    """A refused id names its first refused character by position and code point (and the
    character itself only when it is printable ASCII), or its length; never the value."""
    def refusal(value: str) -> str:
        with pytest.raises(InvalidInput) as caught:
            inputs.token("id", value, inputs.EVENT_ID_RE)
        return caught.value.detail

    assert refusal("acme/evil").endswith("(character 5, U+002F '/', is not allowed)")
    assert refusal("ok\x00\x1b[2J").endswith("(character 3, U+0000, is not allowed)")
    assert refusal("é" * 3).endswith("(character 1, U+00E9, is not allowed)")
    assert refusal("a" * 129).endswith("(got 129 characters)")
    assert refusal("").endswith("(got 0 characters)")

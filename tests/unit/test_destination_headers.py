"""Custom destination headers: the validation rules, and the round trip through
each store backend into a claim."""

from __future__ import annotations

import pytest

from hookline.shared.errors import ConfigError
from hookline.shared.policy.rules import MAX_CUSTOM_HEADERS
from hookline.shared.policy.rules import headers as check_headers
from hookline.shared.signing import generate_secret
from hookline.supervisor.cli.destinations import parse_header_options
from tests.conftest import new_event


@pytest.mark.parametrize("headers", [
    {"X-Api-Key": "k"}, {"Authorization": "Bearer abc.def"}, {"x_custom~1": ""},
    {f"X-H{i}": "v" for i in range(MAX_CUSTOM_HEADERS)}, {"X-Long": "v" * 1024},
])
def test_valid_headers_pass_unchanged(headers):
    assert check_headers(headers) == headers


@pytest.mark.parametrize(("headers", "reason"), [
    ({"X-A": "1\r\nX-Injected: 1"}, "printable ASCII"),
    ({"X-A": "1\nX-Injected: 1"}, "printable ASCII"),
    ({"X-A": "tab\there"}, "printable ASCII"),
    ({"X-A": "caf\u00e9"}, "printable ASCII"),
    ({"X-A": "v" * 1025}, "printable ASCII"),
    ({"X-A": 1}, "printable ASCII"),
    ({"X A": "1"}, "token"),
    ({"X-A:": "1"}, "token"),
    ({"X-A\r\nX-Injected": "1"}, "token"),
    ({"": "1"}, "token"),
    ({"X" * 65: "1"}, "token"),
    ({"Webhook-Signature": "v1,forged"}, "cannot be overridden"),
    ({"content-type": "text/plain"}, "cannot be overridden"),
    ({"Host": "internal"}, "cannot be overridden"),
    ({"Transfer-Encoding": "chunked"}, "cannot be overridden"),
    ({"X-A": "1", "x-a": "2"}, "twice"),
    ({f"X-H{i}": "v" for i in range(MAX_CUSTOM_HEADERS + 1)}, "at most"),
    (["X-A", "1"], "object"),
])
def test_invalid_headers_are_refused_naming_the_problem(headers, reason):
    with pytest.raises(ConfigError, match=reason):
        check_headers(headers)


def test_cli_header_options_parse():
    assert parse_header_options(["X-Api-Key: k:with:colons", "X-B:  spaced "]) == {
        "X-Api-Key": "k:with:colons", "X-B": "spaced"}
    with pytest.raises(ConfigError, match="NAME: VALUE"):
        parse_header_options(["no colon"])


async def test_headers_reach_the_claim_and_follow_updates(store):
    """Headers given at creation come back on the destination (names only when redacted)
    and in each claim; an update changes what later claims carry; invalid ones are refused
    by the store itself and change nothing."""
    dest = await store.add_destination(name="d", url="https://example.com/",
                                       secret=generate_secret(), event_types=["*"],
                                       max_in_flight=5,
                                       headers={"X-Api-Key": "k1", "X-Tenant": "t"})
    assert dest.headers == (("X-Api-Key", "k1"), ("X-Tenant", "t"))
    assert dest.redacted()["headers"] == {"X-Api-Key": "***", "X-Tenant": "***"}
    await store.add_events([new_event("e1"), new_event("e2")])
    [first] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    assert first.headers == (("X-Api-Key", "k1"), ("X-Tenant", "t"))
    await store.update_destination("d", headers={"X-Api-Key": "k2"})
    [second] = await store.claim("w1", 1, lease_s=30, max_attempts=5)
    assert second.headers == (("X-Api-Key", "k2"),)
    with pytest.raises(ConfigError):
        await store.update_destination("d", headers={"X-A": "1\r\nX-B: 2"})
    with pytest.raises(ConfigError):
        await store.add_destination(name="e", url="https://example.com/",
                                    secret=generate_secret(), event_types=["*"],
                                    max_in_flight=5, headers={"Host": "x"})
    assert (await store.get_destination("d")).headers == (("X-Api-Key", "k2"),)
    assert [d.name for d in await store.list_destinations()] == ["d"]

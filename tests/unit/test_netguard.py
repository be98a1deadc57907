"""The outbound address guard: every non-global address form is refused, at creation time
and at connection time, and the allow-list opens exactly what it names."""

from __future__ import annotations

import ipaddress
import socket

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver
from hypothesis import given
from hypothesis import strategies as st

from hookline.rehearsal.receiver import Endpoint, Receiver
from hookline.shared.errors import DestinationBlocked
from hookline.shared.policy.guarded_resolver import BlockedAddress, GuardedResolver
from hookline.shared.policy.netguard import (
    AddressPolicy,
    blocked_reason,
    is_legacy_ipv4,
    parse_numeric_host,
    vet_url,
)
from hookline.shared.policy.rules import destination_url
from hookline.shared.signing import generate_secret

DEFAULT = AddressPolicy()
BLOCKED_HOSTS = [
    "127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::1]",
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "10.1.2.3", "172.16.0.1",
    "192.168.1.1", "169.254.169.254", "100.64.0.1", "[fd00::1]", "[fe80::1]", "0.0.0.0",
    "[::]", "224.0.0.1", "[ff02::1]", "240.0.0.1", "192.0.2.10", "198.51.100.1",
    "203.0.113.5", "[2001:db8::1]", "[64:ff9b::7f00:1]", "[2002:a00:1::]",
]


@pytest.mark.parametrize("host", BLOCKED_HOSTS)
def test_non_global_hosts_are_refused_at_creation(host):
    """Each loopback/private/link-local/CGNAT/ULA/multicast/reserved/documentation form,
    including mapped, compatible and legacy numeric spellings, is refused with the setting named."""
    with pytest.raises(DestinationBlocked, match="allow_networks"):
        vet_url(f"http://{host}:8080/hook", DEFAULT)


@pytest.mark.parametrize("host", ["8.8.8.8", "[2606:4700::1111]", "example.com"])
def test_global_addresses_and_names_pass_creation(host):
    """Global addresses pass; names are checked later, when they resolve."""
    vet_url(f"https://{host}/hook", DEFAULT)


def test_allow_list_opens_only_what_it_names():
    """127.0.0.0/8 on the allow-list lets loopback through, not 10/8 or the metadata address."""
    policy = AddressPolicy.parse("127.0.0.0/8, receiver.internal")
    vet_url("http://127.0.0.1:9/x", policy)
    vet_url("http://[::ffff:127.0.0.1]:9/x", policy)
    vet_url("http://receiver.internal/x", policy)
    for host in ("10.0.0.1", "169.254.169.254"):
        with pytest.raises(DestinationBlocked):
            vet_url(f"http://{host}/x", policy)


def test_https_only_and_bad_schemes():
    """https_only refuses http://; other schemes are always refused."""
    with pytest.raises(DestinationBlocked, match="https_only"):
        vet_url("http://8.8.8.8/", AddressPolicy(https_only=True))
    with pytest.raises(DestinationBlocked):
        vet_url("file:///etc/passwd", DEFAULT)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_ipv4_and_its_mapped_form_get_the_same_verdict(value):
    """An IPv4 address and its ::ffff: and NAT64 spellings are judged alike."""
    v4 = ipaddress.IPv4Address(value)
    verdict = blocked_reason(v4, DEFAULT) is None
    assert (blocked_reason(ipaddress.IPv6Address(f"::ffff:{v4}"), DEFAULT) is None) == verdict
    assert (blocked_reason(ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::"))
                                                  + value), DEFAULT) is None) == verdict
    assert parse_numeric_host(str(value)) == v4


class RebindingResolver(AbstractResolver):
    """Answers a public address first, then 127.0.0.1 (a DNS rebinding attack)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.calls = 0

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.calls += 1
        address = "93.184.216.34" if self.calls == 1 else "127.0.0.1"
        return [{"hostname": host, "host": address, "port": self.port, "family": socket.AF_INET,
                 "proto": 0, "flags": 0}]

    async def close(self) -> None:
        pass


async def test_rebinding_answer_is_vetted_and_no_connection_is_made():
    """The first (public) answer passes the vet; the second lookup, answering 127.0.0.1, is
    refused inside the connector, and the local receiver sees no request."""
    secret = generate_secret()
    async with Receiver([Endpoint("x", secret)]) as receiver:
        stub = RebindingResolver(receiver.port)
        guard = GuardedResolver(DEFAULT, inner=stub)
        assert (await guard.resolve("rebind.example", 80))[0]["host"] == "93.184.216.34"
        connector = aiohttp.TCPConnector(resolver=guard, use_dns_cache=False)
        async with aiohttp.ClientSession(connector=connector) as session:
            with pytest.raises(aiohttp.ClientConnectorError) as info:
                await session.post(f"http://rebind.example:{receiver.port}/x", data=b"{}")
        assert isinstance(info.value.os_error, BlockedAddress)
        assert "loopback" in str(info.value.os_error)
        assert receiver.requests == []


@pytest.mark.parametrize("url", ["http://[::1/hook", "http://[]/x", "http://[fe80::1%zz/x",
                                 "http://[127.0.0.1]/x"])
def test_unparsable_urls_are_destination_blocked_not_value_error(url):
    """URLs urlsplit refuses (unclosed or invalid bracketed hosts) are DestinationBlocked
    naming the URL, not a bare ValueError (found by the hypothesis properties)."""
    with pytest.raises(DestinationBlocked, match="not a valid URL"):
        vet_url(url, DEFAULT)


@pytest.mark.parametrize("url", [
    "https://example.com/hook", "http://1.2.3.4:8080/a?b=c%20d", "https://bücher.example/x",
    "http://a_b.example/", "http://[::1]:80/", "http://[::ffff:127.0.0.1]/",
    "http://8bad.cafe/", "http://example.com:/x", "http://user:pw@example.com/x",
    "https://example.com:65535/",
])
def test_a_reachable_destination_url_is_taken_unchanged(url: str) -> None:
    """Names (IDN, underscores, hex-looking labels), canonical IP literals, an empty port
    and credentials pass the URL rule unchanged; the guard judges their addresses."""
    assert destination_url(url) == url


@pytest.mark.parametrize(("host", "legacy"), [
    ("127.0.0.1", False), ("8.8.8.8", False), ("[::1]", False), ("example.com", False),
    ("8bad.cafe", False), ("2130706433", True), ("0x7f000001", True), ("127.1", True),
    ("0177.0.0.1", True), ("01.2.3.4", True),
])
def test_legacy_ipv4_spellings_are_told_apart_from_dotted_quads(host: str, legacy: bool) -> None:
    assert is_legacy_ipv4(host) is legacy

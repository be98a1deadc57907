"""Properties of the outbound address guard (shared/policy/netguard.py) for any address or string.

The oracle is the standard library: an address is allowed exactly when the IPv4 address it
embeds (or the address itself) `is_global`, less what netguard refuses on purpose on top:
multicast (global multicast groups are not webhook receivers), IETF-reserved space (e.g.
IPv6 outside 2000::/3, unallocated and unroutable, though `is_global` calls some of it
global), and the documentation and benchmarking networks of its `_EXTRA_BLOCKED` list (newer
Pythons call a few of those global). The embedded address is unwrapped here independently of
`netguard.unwrap`.
"""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.shared.errors import DestinationBlocked
from hookline.shared.policy.netguard import (
    _EXTRA_BLOCKED,
    AddressPolicy,
    blocked_reason,
    parse_numeric_host,
    vet_url,
)

PROPERTY = settings(max_examples=200, derandomize=True, database=None, deadline=None)
DEFAULT = AddressPolicy()
IPv4 = ipaddress.IPv4Address
IPv6 = ipaddress.IPv6Address

interesting_v4 = st.sampled_from([
    "0.0.0.0", "127.0.0.1", "10.0.0.1", "100.64.0.1", "169.254.169.254", "172.16.0.1",
    "192.0.0.9", "192.0.2.1", "192.88.99.1", "192.168.0.1", "198.18.0.1", "224.0.0.1",
    "239.255.255.250", "240.0.0.1", "255.255.255.255", "8.8.8.8", "1.1.1.1",
]).map(lambda text: int(IPv4(text)))
v4_ints = st.one_of(st.integers(0, 2**32 - 1), interesting_v4)


def v6_addresses() -> st.SearchStrategy[IPv6]:
    """Random IPv6 plus every wrapped form of an IPv4 address and the special ranges."""
    def prefixed(prefix: str, bits: int) -> st.SearchStrategy[IPv6]:
        base = int(IPv6(prefix))
        return st.integers(0, 2**bits - 1).map(lambda low: IPv6(base | low))

    return st.one_of(
        st.integers(0, 2**128 - 1).map(IPv6),
        v4_ints.map(lambda n: IPv6((0xFFFF << 32) | n)),               # ::ffff:a.b.c.d
        v4_ints.map(IPv6),                                              # ::a.b.c.d
        v4_ints.map(lambda n: IPv6((0x2002 << 112) | (n << 80))),       # 2002:AABB:CCDD::
        v4_ints.map(lambda n: IPv6(int(IPv6("64:ff9b::")) | n)),        # NAT64
        prefixed("fe80::", 64), prefixed("fc00::", 120), prefixed("ff00::", 112),
        prefixed("2001:db8::", 96), prefixed("2001::", 96),
        st.sampled_from(["::", "::1", "2606:4700::1111", "2001:4860:4860::8888"]).map(IPv6),
    )


def embedded_v4(ip: IPv6) -> IPv4 | IPv6:
    """The IPv4 address an IPv6 address stands for, by the RFCs (the test's own unwrapping)."""
    value = int(ip)
    if value >> 32 == 0xFFFF:                                   # RFC 4291 mapped
        return IPv4(value & 0xFFFFFFFF)
    if value >> 32 == 0 and value > 1:                          # RFC 4291 compatible
        return IPv4(value)
    if value >> 112 == 0x2002:                                  # RFC 3056 6to4
        return IPv4((value >> 80) & 0xFFFFFFFF)
    if value >> 32 == int(IPv6("64:ff9b::")) >> 32:             # RFC 6052 NAT64
        return IPv4(value & 0xFFFFFFFF)
    return ip


def expected_allowed(ip: IPv4 | IPv6) -> bool:
    target = embedded_v4(ip) if isinstance(ip, IPv6) else ip
    deliberately_blocked = any(target in net for net in _EXTRA_BLOCKED
                               if net.version == target.version)
    return (target.is_global and not target.is_multicast and not target.is_reserved
            and not deliberately_blocked)


@PROPERTY
@given(number=v4_ints)
def test_ipv4_decision_is_is_global(number):
    """Any IPv4 address: allowed exactly when the standard library calls it global (less
    multicast, reserved and the deliberately blocked networks); a refusal names the
    setting."""
    ip = IPv4(number)
    reason = blocked_reason(ip, DEFAULT)
    assert (reason is None) == expected_allowed(ip), (str(ip), reason)
    if reason is not None:
        assert "allow_networks" in reason


@PROPERTY
@given(ip=v6_addresses())
def test_ipv6_decision_is_is_global_of_the_embedded_address(ip):
    """Any IPv6 address, mapped/compatible/6to4/NAT64 forms unwrapped first, is decided as
    the address it embeds is."""
    assert (blocked_reason(ip, DEFAULT) is None) == expected_allowed(ip), str(ip)


def spellings(number: int) -> list[str]:
    """Every legacy numeric form inet_aton reads for one IPv4 address."""
    a, b, c, d = IPv4(number).packed
    return [
        str(number), hex(number), f"0{number:o}",                          # one number
        f"{a}.{b}.{c}.{d}", f"0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}",             # dotted hex
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",                                     # dotted octal
        f"{a}.{(b << 16) | (c << 8) | d}",                                  # a.24 bits
        f"{a}.{b}.{(c << 8) | d}", f"0x{a:x}.{b}.0{(c << 8) | d:o}",        # a.b.16, mixed
    ]


@PROPERTY
@given(number=v4_ints, port=st.sampled_from(["", ":8080"]))
def test_every_numeric_spelling_is_decided_as_the_address(number, port):
    """Decimal, hex, octal, short and mixed spellings of an address parse to it, and vet_url
    decides each exactly as it decides the address (a blocked one stays blocked)."""
    ip = IPv4(number)
    allowed = expected_allowed(ip)
    for spelling in spellings(number):
        assert parse_numeric_host(spelling) == ip, spelling
        url = f"http://{spelling}{port}/hook"
        try:
            vet_url(url, DEFAULT)
        except DestinationBlocked:
            assert not allowed, url
        else:
            assert allowed, url


@PROPERTY
@given(text=st.one_of(
    st.text(max_size=80),
    st.builds(lambda scheme, rest: f"{scheme}://{rest}",
              st.sampled_from(["http", "https", "ftp", "HTTP", ""]), st.text(max_size=60)),
    st.builds(lambda host: f"http://[{host}]/x", st.text(alphabet="0123456789abcdef:.%[]",
                                                         max_size=45)),
))
def test_arbitrary_urls_raise_only_destination_blocked(text):
    """Any string given as a destination URL is either accepted or refused with
    DestinationBlocked: never a ValueError from URL parsing (e.g. `http://[::1`)."""
    try:
        vet_url(text, DEFAULT)
    except DestinationBlocked:
        pass


@PROPERTY
@given(text=st.text(max_size=60))
def test_parse_numeric_host_never_raises(text):
    """parse_numeric_host answers an address or None for any text."""
    result = parse_numeric_host(text)
    assert result is None or isinstance(result, IPv4 | IPv6)

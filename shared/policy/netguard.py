"""The outbound address guard (SSRF): destinations may only reach global addresses.

A webhook sender connects to URLs its users type in. By default hookline refuses any address
that is not globally routable: loopback, private (RFC 1918, fc00::/7), link-local (including
the cloud metadata address 169.254.169.254), CGNAT 100.64.0.0/10, unspecified, multicast,
reserved and documentation ranges. IPv6 forms that embed an IPv4 address (IPv4-mapped
`::ffff:127.0.0.1`, IPv4-compatible `::127.0.0.1`, 6to4 `2002::/16`, NAT64 `64:ff9b::/96`)
are unwrapped first. Legacy numeric host spellings (`2130706433`, `0x7f000001`,
`0177.0.0.1`) are read the way the C resolver reads them, so they cannot slip past.

The check runs twice: when a destination is created (`vet_url`) and on every connection, on
the exact addresses the socket will use (`GuardedResolver` for names, in
shared/policy/guarded_resolver.py; `vet_url` for IP literals, which aiohttp connects to
without resolving), so a DNS answer that changes between the two (rebinding) is vetted too.
Operators open holes with `allow_networks` (CIDRs) and `allow_hosts`; the error message
names the setting.

This module imports no aiohttp at load (only vet_destination's lookup does): the config, and
with it every `hookline` command, imports it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from hookline.shared.errors import ConfigError, DestinationBlocked

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
ALLOW_SETTING = "allow_networks (HOOKLINE_ALLOW_NETWORKS)"

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_EXTRA_BLOCKED = tuple(ipaddress.ip_network(n) for n in (
    "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32", "2001:db8::/32", "fc00::/7",
    "fe80::/10", "ff00::/8"))


@dataclass(frozen=True, slots=True, kw_only=True)
class AddressPolicy:
    """What the guard lets through besides global addresses.

    Attributes:
        allow_networks: CIDRs that are allowed even if not global (e.g. 127.0.0.0/8 for a
            local receiver, 10.0.0.0/8 for an internal network).
        allow_hosts: host names allowed whatever they resolve to (exact, lower case).
        https_only: refuse http:// destinations.
    """

    allow_networks: tuple[IPNetwork, ...] = ()
    allow_hosts: frozenset[str] = field(default_factory=frozenset)
    https_only: bool = False

    @classmethod
    def parse(cls, allow: str = "", *, https_only: bool = False) -> AddressPolicy:
        """Build from a comma-separated list of CIDRs and host names.

        Raises:
            ConfigError: an entry is neither a CIDR/address nor a plausible host name.
        """
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in (e.strip() for e in allow.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if not all(c.isalnum() or c in "-._" for c in entry):
                    raise ConfigError(f"allow_networks entry {entry!r} is neither a CIDR "
                                      "nor a host name") from None
                hosts.add(entry.lower())
        return cls(allow_networks=tuple(networks), allow_hosts=frozenset(hosts),
                   https_only=https_only)


def unwrap(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, 6to4, NAT64), else ip."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR and ip.sixtofour is not None:
        return ip.sixtofour
    if int(ip) >> 32 == 0 and int(ip) > 1:  # IPv4-compatible ::a.b.c.d (deprecated)
        return ipaddress.IPv4Address(int(ip))
    return ip


def blocked_reason(ip: IPAddress, policy: AddressPolicy) -> str | None:
    """Why `ip` may not be connected to under `policy`, or None when it may."""
    for candidate in {ip, unwrap(ip)}:
        if any(candidate in net for net in policy.allow_networks
               if net.version == candidate.version):
            return None
    target = unwrap(ip)
    kinds = [name for name, flag in (
        ("loopback", target.is_loopback), ("private", target.is_private),
        ("link-local", target.is_link_local), ("multicast", target.is_multicast),
        ("unspecified", target.is_unspecified), ("reserved", target.is_reserved),
    ) if flag]
    if not kinds and any(target in net for net in _EXTRA_BLOCKED if net.version == target.version):
        kinds = ["non-global"]
    if not kinds and not target.is_global:
        kinds = ["non-global"]
    if not kinds:
        return None
    shown = f"{ip}" if target == ip else f"{ip} (= {target})"
    return (f"destination address {shown} is {'/'.join(kinds)}; hookline only delivers to "
            f"global addresses unless the network is listed in {ALLOW_SETTING}")


def parse_numeric_host(host: str) -> IPAddress | None:
    """An IP address if `host` is one in any spelling the C resolver accepts, else None.

    Covers `[::1]`, dotted quads, and legacy forms inet_aton reads: a single decimal or hex
    number (`2130706433`, `0x7f000001`), octal parts (`0177.0.0.1`), short forms (`127.1`).
    """
    bare = host.strip("[]")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if bare and all(c in "0123456789abcdefxABCDEFX." for c in bare) and bare[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


def is_legacy_ipv4(host: str) -> bool:
    """Whether `host` is an IPv4 address in a spelling other than four decimal numbers
    (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`): the C resolver reads them, but
    HTTP clients differ on them, so destinations may not use them."""
    ip = parse_numeric_host(host)
    return isinstance(ip, ipaddress.IPv4Address) and str(ip) != host.strip("[]")


def vet_url(url: str, policy: AddressPolicy) -> None:
    """Check a destination URL's scheme and, for a numeric host, its address.

    Host names are checked when they resolve (see GuardedResolver, guarded_resolver.py).

    Raises:
        DestinationBlocked: not a parsable URL (e.g. an unclosed `[` of an IPv6 host), scheme
            refused, no host, or the numeric host is not allowed. Nothing else, whatever
            `url` holds.
    """
    try:
        parts = urlsplit(url)
        hostname = parts.hostname  # validates a bracketed IPv6 host (ValueError)
    except ValueError as exc:
        raise DestinationBlocked(f"destination URL {url[:80]!r} is not a valid URL: "
                                 f"{exc}") from None
    if parts.scheme not in ("http", "https"):
        raise DestinationBlocked(f"destination URL must be http:// or https://, not {url!r}")
    if policy.https_only and parts.scheme != "https":
        raise DestinationBlocked("https_only is set: destination URLs must use https://")
    host = (hostname or "").lower()
    if not host:
        raise DestinationBlocked(f"destination URL {url!r} has no host")
    if host in policy.allow_hosts:
        return
    ip = parse_numeric_host(host)
    if ip is not None and (reason := blocked_reason(ip, policy)) is not None:
        raise DestinationBlocked(reason)


def vet_addresses(host: str, addresses: Iterable[str], policy: AddressPolicy) -> None:
    """Raise DestinationBlocked unless every resolved address of `host` is allowed."""
    if host.lower() in policy.allow_hosts:
        return
    for address in addresses:
        reason = blocked_reason(ipaddress.ip_address(address.split("%", 1)[0]), policy)
        if reason is not None:
            raise DestinationBlocked(f"{host}: {reason}")


async def vet_destination(url: str, policy: AddressPolicy,
                          resolver: AbstractResolver | None = None) -> None:
    """The creation-time check of a destination URL: :func:`vet_url`, then, for a host name,
    every address it resolves to now.

    A name that does not resolve at all is let through: DNS may be down or the name not yet
    published, and the send-time check (:class:`GuardedResolver`) vets whatever it later
    resolves to.

    Args:
        url: the destination URL as typed by the user.
        policy: the allow-list and https-only setting.
        resolver: an aiohttp resolver (default: aiohttp's ThreadedResolver).

    Raises:
        DestinationBlocked: with a reason naming the setting that would allow it.
    """
    vet_url(url, policy)
    host = (urlsplit(url).hostname or "").lower()
    if host in policy.allow_hosts or parse_numeric_host(host) is not None:
        return
    from aiohttp.resolver import ThreadedResolver  # noqa: PLC0415  (aiohttp loads only when a name is looked up, not with the config)

    own = resolver is None
    active = resolver or ThreadedResolver()
    try:
        answers = await active.resolve(host, 0, socket.AF_UNSPEC)
    except UnicodeError as exc:  # IDNA refuses it: empty or over-long labels, odd bytes
        raise DestinationBlocked(f"destination host {host!r} is not a valid host name: "
                                 f"{exc}") from None
    except OSError:
        return
    finally:
        if own:
            await active.close()
    vet_addresses(host, [a["host"] for a in answers], policy)

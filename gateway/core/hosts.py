"""Which hosts and addresses a client-chosen upstream may reach (`requestConfig.allowedHosts`).

An entry is a host name (matched exactly, case-insensitively, without a trailing dot), an IP
address, a network (`10.0.0.0/8`), or `*` (any host); ports play no part. Whatever admits a
host, every address it is reached at, the literal one or each one DNS answers, must be public or
be listed itself (as an address or inside a listed network): private, loopback, link-local,
multicast, reserved, shared and unspecified addresses are refused otherwise, also in the IPv6
forms that carry an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64). So a listed name
that starts resolving to 127.0.0.1 is refused until 127.0.0.1 itself is listed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

ANY_HOST: Final = "*"
_LABEL: Final = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052's well-known prefix
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")  # deprecated ::a.b.c.d (:: and ::1 are caught first)
_IPV4_TRANSLATED: Final = ipaddress.IPv6Network("::ffff:0:0:0/96")  # SIIT's ::ffff:0:a.b.c.d
_SHARED: Final = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT


def parse_address(host: str) -> IPAddress | None:
    """`host` as an IP address (brackets around IPv6 allowed), or None when it is a name.

    Only canonical dotted IPv4 counts: `127.1` or `2130706433` are names here, so they pass the
    name rules and then the resolved-address check, which sees 127.0.0.1.
    """
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (and may be delivered to), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _IPV4_TRANSLATED or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def non_public_kind(address: IPAddress) -> str | None:
    """What makes `address` not a public unicast address ("loopback", "private", ...), or None."""
    inner = embedded_ipv4(address)
    if inner is not None:
        kind = non_public_kind(inner)
        return None if kind is None else f"{kind} (in an IPv6 form)"
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("site-local", isinstance(address, ipaddress.IPv6Address) and address.is_site_local),
        ("shared (carrier-grade NAT)", address in _SHARED),
    )
    for kind, matched in checks:
        if matched:
            return kind
    return None if address.is_global else "non-public"


def _name(host: str) -> str:
    return host.lower().rstrip(".")


def entry_problem(entry: str) -> str | None:
    """Why `entry` cannot be an allowedHosts entry, or None when it can."""
    if entry == ANY_HOST or parse_address(entry) is not None:
        return None
    if "/" in entry:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return f"{entry!r} is not a network (expected e.g. 10.0.0.0/8)"
        return None
    try:
        name = _name(entry).encode("idna").decode("ascii")
    except UnicodeError:
        name = ""
    if not name or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return f"{entry!r} is not a host name, an IP address, a network or '*' (no scheme, port or path)"
    return None


def allowed_host_problems(entries: Sequence[str]) -> list[str]:
    """`[i]: ...` for every entry of allowedHosts that is not a host, address, network or `*`."""
    return [f"[{i}]: {problem}" for i, entry in enumerate(entries) if (problem := entry_problem(entry)) is not None]


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """allowedHosts, read: the names, the listed addresses and networks, and whether `*` is there."""

    names: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()
    any_host: bool = False

    @classmethod
    def parse(cls, entries: Iterable[str]) -> HostPolicy:
        """The policy of `entries`; entries `entry_problem` refuses are left out (they admit nothing)."""
        names: set[str] = set()
        networks: list[IPNetwork] = []
        any_host = False
        for entry in entries:
            if entry_problem(entry) is not None:
                continue
            address = parse_address(entry)
            if entry == ANY_HOST:
                any_host = True
            elif address is not None:
                networks.append(ipaddress.ip_network(embedded_ipv4(address) or address))
            elif "/" in entry:
                networks.append(ipaddress.ip_network(entry, strict=False))
            else:
                names.add(_name(entry).encode("idna").decode("ascii"))
        return cls(frozenset(names), tuple(networks), any_host)

    def listed(self, address: IPAddress) -> bool:
        """Whether `address` (or the IPv4 address it carries) is listed, itself or in a network."""
        unwrapped = embedded_ipv4(address) or address
        return any(unwrapped in network or address in network for network in self.networks)

    def refuse_address(self, address: IPAddress) -> str | None:
        """Why a connection to `address` is refused ("a loopback address"), or None."""
        kind = non_public_kind(address)
        if kind is None or self.listed(address):
            return None
        return f"a {kind} address"

    def refuse_host(self, host: str) -> str | None:
        """Why `host` (a URL's host: a name or an IP literal) may not be reached, or None.

        For a name this is the name rule alone: its addresses are checked once DNS answers.
        """
        address = parse_address(host)
        if address is None:
            if self.any_host or _name(host) in self.names:
                return None
            return f"host {host!r} is not in requestConfig.allowedHosts"
        if not (self.any_host or self.listed(address)):
            return f"host {host!r} is not in requestConfig.allowedHosts"
        reason = self.refuse_address(address)
        return None if reason is None else f"{host} is {reason}, not listed in requestConfig.allowedHosts"

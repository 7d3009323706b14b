"""Which hosts and addresses a client-chosen upstream may reach (gateway.core.hosts): pure rules, no sockets."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.core.hosts import HostPolicy, allowed_host_problems, non_public_kind, parse_address


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("fe80::1%eth0", "link-local"),
        ("224.0.0.1", "multicast"),  # is_global is True for it: checked on its own
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "private"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("fec0::1", "site-local"),
        ("::ffff:127.0.0.1", "loopback (in an IPv6 form)"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local (in an IPv6 form)"),
        ("2002:7f00:1::", "loopback (in an IPv6 form)"),  # 6to4 of 127.0.0.1
        ("2002:a00:1::1", "private (in an IPv6 form)"),  # 6to4 of 10.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local (in an IPv6 form)"),  # NAT64 of 169.254.169.254
        ("::7f00:1", "loopback (in an IPv6 form)"),  # IPv4-compatible ::127.0.0.1
        ("::ffff:0:a00:1", "private (in an IPv6 form)"),  # IPv4-translated 10.0.0.1
        ("2002:808:808::", None),  # 6to4 of a public address
    ],
)
def test_non_public_addresses_are_named(address: str, kind: str | None) -> None:
    parsed = parse_address(address)
    assert parsed is not None
    assert non_public_kind(parsed) == kind


def test_only_canonical_addresses_are_addresses() -> None:
    assert parse_address("[::1]") == ipaddress.IPv6Address("::1")
    for name in ("127.1", "2130706433", "0x7f000001", "017700000001", "localhost", "example.com"):
        assert parse_address(name) is None  # names: their resolved addresses are what get checked


def test_allowed_host_entries_are_hosts_addresses_networks_or_any() -> None:
    good = ["api.example.com", "localhost", "127.0.0.1", "[::1]", "10.0.0.0/8", "fd00::/8", "*", "bücher.de", "vllm.internal."]
    assert allowed_host_problems(good) == []
    bad = ["https://api.example.com", "api.example.com:443", "10.0.0.0/33", "a b", "api.example.com/v1", "-x-.com"]
    problems = allowed_host_problems(bad)
    assert [p.split(":")[0] for p in problems] == [f"[{i}]" for i in range(len(bad))]


def test_host_names_match_exactly() -> None:
    policy = HostPolicy.parse(["api.example.com"])
    assert policy.refuse_host("api.example.com") is None
    assert policy.refuse_host("API.Example.COM.") is None  # case and the FQDN dot do not matter
    for other in ("example.com", "evil.api.example.com", "api.example.com.evil.net", "127.0.0.1"):
        assert policy.refuse_host(other) == f"host {other!r} is not in requestConfig.allowedHosts"


def test_a_literal_address_must_be_listed_or_public_under_any() -> None:
    listed = HostPolicy.parse(["127.0.0.1"])
    assert listed.refuse_host("127.0.0.1") is None
    assert listed.refuse_host("::ffff:127.0.0.1") is None  # the same destination
    assert listed.refuse_host("127.0.0.2") is not None

    anywhere = HostPolicy.parse(["*"])
    assert anywhere.refuse_host("8.8.8.8") is None
    assert anywhere.refuse_host("any.name.example") is None  # its addresses are checked once resolved
    assert anywhere.refuse_host("127.0.0.1") == "127.0.0.1 is a loopback address, not listed in requestConfig.allowedHosts"
    assert anywhere.refuse_host("::ffff:7f00:1") is not None
    assert anywhere.refuse_host("169.254.169.254") is not None

    network = HostPolicy.parse(["*", "10.0.0.0/8"])
    assert network.refuse_host("10.9.8.7") is None
    assert network.refuse_host("192.168.0.1") is not None


def test_resolved_addresses_must_be_public_or_listed() -> None:
    policy = HostPolicy.parse(["vllm.internal", "10.0.0.5"])
    assert policy.refuse_address(ipaddress.ip_address("10.0.0.5")) is None
    assert policy.refuse_address(ipaddress.ip_address("10.0.0.6")) == "a private address"
    assert policy.refuse_address(ipaddress.ip_address("1.1.1.1")) is None


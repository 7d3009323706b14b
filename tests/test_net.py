"""Where a client-chosen upstream may connect: the address rules (pure), then the guarded session on real sockets."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from gateway.config.loader import ConfigError, parse_config
from gateway.core.hosts import HostPolicy, allowed_host_problems, non_public_kind, parse_address
from gateway.upstream.guarded import (
    GuardedResolver,
    RefusedDestination,
    RefusedTarget,
    SplitProvider,
    guarded_session,
    split_providers,
)
from gateway.upstream.providers.base import Call, EventStream, Reply, TransportError
from gateway.upstream.providers.registry import Resources


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


def test_the_config_refuses_entries_that_admit_nothing() -> None:
    text = "requestConfig: {enabled: true, allowedHosts: [api.example.com, 'https://x.example', 'h.example:443']}\nroutes: {m: {provider: mock}}"
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert [error.split(":")[0] for error in caught.value.errors] == [
        "requestConfig.allowedHosts[1]",
        "requestConfig.allowedHosts[2]",
    ]


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


class ScriptedResolver(AbstractResolver):
    """Answers every name with the addresses it is given, and counts the lookups."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups += 1
        return [
            ResolveResult(hostname=host, host=a, port=port, family=socket.AF_INET6 if ":" in a else socket.AF_INET, proto=0, flags=0)
            for a in self.addresses
        ]

    async def close(self) -> None:
        pass


async def test_every_resolved_address_must_pass() -> None:
    policy = HostPolicy.parse(["api.example.com"])
    assert [r["host"] for r in await GuardedResolver(policy, ScriptedResolver("1.1.1.1")).resolve("api.example.com")] == ["1.1.1.1"]
    with pytest.raises(OSError, match="resolves to a private address") as refused:
        await GuardedResolver(policy, ScriptedResolver("1.1.1.1", "10.0.0.1")).resolve("api.example.com")
    assert "10.0.0.1" not in str(refused.value)  # an internal address is not told to the client
    with pytest.raises(OSError, match=r"is not in requestConfig\.allowedHosts"):
        await GuardedResolver(policy, ScriptedResolver("1.1.1.1")).resolve("other.example.com")


async def test_the_real_resolver_sees_localhost_as_loopback() -> None:
    """Resolution goes through the loop's getaddrinfo: a listed name is refused for its address."""
    with pytest.raises(OSError, match="resolves to a loopback address"):
        await GuardedResolver(HostPolicy.parse(["localhost"])).resolve("localhost", 80, socket.AF_UNSPEC)
    allowed = GuardedResolver(HostPolicy.parse(["localhost", "127.0.0.0/8", "::1"]))
    assert {r["host"] for r in await allowed.resolve("localhost", 80, socket.AF_UNSPEC)} <= {"127.0.0.1", "::1"}


@pytest.fixture
async def local(aiohttp_server: Any) -> TestServer:
    """A loopback server: /ok answers, /hop redirects to /ok, and every request is counted."""
    seen: list[str] = []

    async def ok(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({"ok": True})

    async def hop(request: web.Request) -> web.Response:
        seen.append(request.path)
        raise web.HTTPTemporaryRedirect(str(request.url.with_path("/ok")))

    app = web.Application()
    app.router.add_post("/ok", ok)
    app.router.add_post("/hop", hop)
    server: TestServer = await aiohttp_server(app)
    server.seen = seen  # type: ignore[attr-defined]
    return server


TIMEOUT = aiohttp.ClientTimeout(total=10)


async def test_the_session_connects_to_the_checked_address(local: TestServer) -> None:
    """The connector gets addresses only from the guarded resolver: a changed DNS answer is checked before use."""
    scripted, now = ScriptedResolver("127.0.0.1"), [0.0]
    policy = HostPolicy.parse(["upstream.test", "127.0.0.1"])
    resolver = GuardedResolver(policy, scripted, ttl=10, clock=lambda: now[0])
    url = f"http://upstream.test:{local.port}/ok"
    # a new connection per request, as once a keep-alive connection has gone
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session:
        async with session.post(url) as response:
            assert response.status == 200
        scripted.addresses = ["10.0.0.1"]  # the name now points inside the network (rebinding)
        async with session.post(url) as response:  # the checked answer is still the one used
            assert response.status == 200
        assert scripted.lookups == 1
        now[0] = 11.0  # the checked answer expired: the new one is looked up, checked and refused
        with pytest.raises(aiohttp.ClientConnectorDNSError, match="resolves to a private address"):
            await session.post(url)
    assert local.seen == ["/ok", "/ok"]  # type: ignore[attr-defined]


async def test_a_target_is_admitted_on_its_resolved_addresses() -> None:
    config = parse_config("routes: {r: {baseUrl: 'http://upstream.test:8000/v1'}}")
    target = config.routes["r"].first_target
    scripted = ScriptedResolver("127.0.0.1")
    with pytest.raises(RefusedTarget, match=r"upstream\.test resolves to a loopback address") as refused:
        await GuardedResolver(HostPolicy.parse(["upstream.test"]), scripted).admit(target)
    assert refused.value.status == 400 and refused.value.param == "x-gateway-config"
    allowed = GuardedResolver(HostPolicy.parse(["upstream.test", "127.0.0.1"]), scripted)
    await allowed.admit(target)
    await allowed.resolve("upstream.test", 8000, socket.AF_UNSPEC)
    assert scripted.lookups == 2  # the refused lookup, then one the connection reuses


async def test_redirects_are_refused_even_to_an_allowed_host(local: TestServer) -> None:
    policy = HostPolicy.parse(["127.0.0.1"])
    async with guarded_session(GuardedResolver(policy), policy, client_timeout=TIMEOUT) as session:
        with pytest.raises(RefusedDestination, match="307"):
            await session.post(f"http://127.0.0.1:{local.port}/hop")
    assert local.seen == ["/hop"]  # type: ignore[attr-defined]


async def test_an_unlisted_literal_address_is_refused_before_connecting(local: TestServer) -> None:
    anywhere = HostPolicy.parse(["*"])
    async with guarded_session(GuardedResolver(anywhere), anywhere, client_timeout=TIMEOUT) as session:
        with pytest.raises(RefusedDestination, match="loopback"):
            await session.post(f"http://127.0.0.1:{local.port}/ok")
        with pytest.raises(RefusedDestination, match="loopback"):
            await session.post(f"http://[::ffff:127.0.0.1]:{local.port}/ok")
    named = HostPolicy.parse(["api.example.com"])
    async with guarded_session(GuardedResolver(named), named, client_timeout=TIMEOUT) as session:
        with pytest.raises(RefusedDestination, match=r"not in requestConfig\.allowedHosts"):
            await session.post(f"http://127.0.0.1:{local.port}/ok")
    assert local.seen == []  # type: ignore[attr-defined]


class Recorder:
    """A Provider that only says which instance answered."""

    instances = 0

    def __init__(self) -> None:
        Recorder.instances += 1
        self.number = Recorder.instances

    async def complete(self, call: Call) -> Reply:
        return Reply(200, str(self.number).encode())

    async def stream(self, call: Call) -> Reply | EventStream:
        return await self.complete(call)


async def test_targets_outside_the_config_get_guarded_providers_of_their_own() -> None:
    config = parse_config("routes: {r: {provider: openai, baseUrl: 'http://up.example/v1'}}")
    configured = next(iter(config.routes.values())).first_target
    shared = Recorder()
    split = SplitProvider(shared, frozenset({configured}), Recorder, keep=2)
    inline = [parse_config("routes: {x: {provider: openai}}").routes["x"].first_target for _ in range(3)]

    async def answer(target: Any) -> bytes:
        return (await split.complete(Call(target, "chat/completions", {}))).body

    assert await answer(configured) == str(shared.number).encode()
    first = await answer(inline[0])
    assert first != str(shared.number).encode() and await answer(inline[0]) == first  # kept while in the LRU
    await answer(inline[1])
    await answer(inline[2])  # the LRU holds 2: the first inline target's provider is dropped
    assert len(split._own) == 2
    assert await answer(inline[0]) != first


async def test_providers_a_client_may_not_name_refuse_outside_targets() -> None:
    config = parse_config("routes: {r: {provider: anthropic, apiKey: k}}")
    session = aiohttp.ClientSession()
    try:
        resources = Resources(session, max_response_bytes=1024)
        providers = split_providers({"anthropic": Recorder()}, config, resources, GuardedResolver(HostPolicy()))
        assert set(providers) == {"anthropic", "openai", "mock"}
        stray = parse_config("routes: {x: {provider: anthropic, apiKey: k}}").routes["x"].first_target
        with pytest.raises(TransportError, match="cannot serve a target from x-gateway-config"):
            await providers["anthropic"].complete(Call(stray, "chat/completions", {}))
    finally:
        await session.close()

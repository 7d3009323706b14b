"""Where a client-chosen upstream may connect: the guarded session (gateway.upstream.guarded) on real sockets.

The address rules it applies are tested without sockets in tests/core/test_hosts.py.
"""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.core.hosts import HostPolicy
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
        providers = split_providers({"anthropic": Recorder()}, config, guarded=resources, resolver=GuardedResolver(HostPolicy()))
        assert set(providers) == {"anthropic", "openai", "mock"}
        stray = parse_config("routes: {x: {provider: anthropic, apiKey: k}}").routes["x"].first_target
        with pytest.raises(TransportError, match="cannot serve a target from x-gateway-config"):
            await providers["anthropic"].complete(Call(stray, "chat/completions", {}))
    finally:
        await session.close()

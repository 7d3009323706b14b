"""Connections to hosts a client chose (x-gateway-config): checked where they are made.

Targets read from the config file keep the shared session. Every other target, which can only
come from a client's inline tree, is served by providers of its own on a separate session:

- its resolver resolves with the loop's getaddrinfo (in the executor, off the loop), keeps an
  answer only if `HostPolicy` admits every address in it, and is the connector's only source of
  addresses: the address checked is the address connected to, and a DNS answer that changes
  afterwards (rebinding) is checked again before it is used;
- its middleware checks every request's host before a connection is made (IP literals never
  reach a resolver) and refuses any redirect, so an allowed host cannot send the call elsewhere.

Before a client's target is first called, its host is resolved and checked through the same
resolver: a refusal is the client's 400 (`RefusedTarget`), not an upstream failure. Which
targets count as configured is decided by identity against the config, so a target that is not
in the config is guarded whatever else is true of it.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Final

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from gateway.core.errors import InvalidRequestError
from gateway.core.hosts import HostPolicy, parse_address
from gateway.core.settings import Config
from gateway.core.tree import Target, iter_targets
from gateway.upstream.providers.base import Call, EventStream, OwnWords, Provider, Reply, TransportError
from gateway.upstream.providers.registry import Resources, factory_of, loads

INLINE_PROVIDERS: Final = ("openai", "mock")  # what a client's tree may name (server.inline checks it)
REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
DNS_TTL_SECONDS: Final = 10.0  # aiohttp's default DNS cache lifetime
DNS_CACHE_SIZE: Final = 1024
# A configuration whose loads (litellm's import, seconds) are not done by then is not served: at
# start-up the gateway exits saying so, at a reload the configuration before serves on, and the
# next SIGHUP waits for the same load again rather than behind this one.
LOAD_WAIT_SECONDS: Final = 120.0


class RefusedDestination(aiohttp.ClientConnectionError, OwnWords):
    """A client's target tried to reach a host or address requestConfig does not allow."""


class RefusedAddress(OSError, OwnWords):
    """A name resolved to an address requestConfig does not allow."""


class RefusedTarget(InvalidRequestError):
    """A client's target may not be called: the client's 400, not an upstream's failure."""

    code = "config_not_allowed"


class GuardedResolver(AbstractResolver):
    """Resolves a name and returns its addresses only if every one of them is allowed.

    Checked answers are kept for `ttl` seconds (LRU of DNS_CACHE_SIZE names): the admission
    check and the connection that follows it share one lookup.
    """

    def __init__(
        self,
        policy: HostPolicy,
        inner: AbstractResolver | None = None,
        *,
        ttl: float = DNS_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._policy = policy
        self._inner = inner or aiohttp.ThreadedResolver()
        self._ttl = ttl
        self._clock = clock
        self._answers: OrderedDict[tuple[str, int, int], tuple[float, list[ResolveResult]]] = OrderedDict()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        key = (host, port, int(family))
        kept = self._answers.get(key)
        if kept is not None and kept[0] > self._clock():
            self._answers.move_to_end(key)
            return kept[1]
        reason = self._policy.refuse_host(host)
        if reason is not None:
            raise RefusedAddress(errno.EACCES, f"refused: {reason}")
        results = await self._inner.resolve(host, port, family)
        for result in results:
            address = parse_address(result["host"])
            # the address stays out of the message: it may be an internal one a client should not learn
            why = "an address that is not an IP" if address is None else self._policy.refuse_address(address)
            if why is not None:
                raise RefusedAddress(errno.EACCES, f"{host} resolves to {why}, not listed in requestConfig.allowedHosts")
        self._answers[key] = (self._clock() + self._ttl, results)
        self._answers.move_to_end(key)
        if len(self._answers) > DNS_CACHE_SIZE:
            self._answers.popitem(last=False)
        return results

    async def close(self) -> None:
        await self._inner.close()

    async def admit(self, target: Target) -> None:
        """Raise RefusedTarget unless `target`'s host, and every address it resolves to, is allowed.

        A name that does not resolve at all is let through: the call then fails as an
        unreachable upstream does.
        """
        url = URL(target.base_url)
        host = url.raw_host or ""
        reason = self._policy.refuse_host(host)
        if reason is None and parse_address(host) is None:
            try:
                await self.resolve(host, url.port or 0, socket.AF_UNSPEC)
            except RefusedAddress as exc:
                reason = exc.strerror
            except OSError:
                return
        if reason is not None:
            raise RefusedTarget(
                f"x-gateway-config asks for what this gateway does not allow: {target.name}: {reason}",
                param="x-gateway-config",
            )


async def refuse_redirects(request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
    """A client middleware: a redirect fails the request instead of being followed."""
    response = await handler(request)
    if response.status in REDIRECTS:
        response.close()
        raise RefusedDestination(f"upstream answered {response.status} (a redirect); redirects are not followed")
    return response


def refuse_unlisted(policy: HostPolicy) -> aiohttp.ClientMiddlewareType:
    """A client middleware: each request's host checked before it is sent, and no redirect followed."""

    async def middleware(request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        reason = policy.refuse_host(request.url.raw_host or "")
        if reason is not None:
            raise RefusedDestination(f"refused: {reason}")
        return await refuse_redirects(request, handler)

    return middleware


@asynccontextmanager
async def guarded_session(
    resolver: GuardedResolver, policy: HostPolicy, *, client_timeout: aiohttp.ClientTimeout
) -> AsyncIterator[aiohttp.ClientSession]:
    """A session that connects only where `policy` allows; no proxy from the environment.

    The connector keeps no DNS cache of its own: every address it uses comes from `resolver`.
    """
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=0, keepalive_timeout=60)
    async with aiohttp.ClientSession(
        connector=connector,
        timeout=client_timeout,
        middlewares=(refuse_unlisted(policy),),
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),  # an upstream's Set-Cookie is never replayed to it for another client
    ) as session:
        yield session


class SplitProvider:
    """Configured targets go to the shared provider; any other target to a guarded one of its own.

    A client's target is admitted (`admit`) before each call, then gets a provider of its own
    (its per-target caches die with it), kept in an LRU of `keep`, so inline trees never grow a
    provider's caches without bound.
    """

    def __init__(
        self,
        shared: Provider | None,
        configured: frozenset[Target],
        make: Callable[[], Provider] | None,
        *,
        admit: Callable[[Target], Awaitable[None]] | None = None,
        keep: int = 1024,
    ) -> None:
        self._shared = shared
        self._configured = configured
        self._make = make
        self._admit = admit
        self._keep = keep
        self._own: OrderedDict[Target, Provider] = OrderedDict()

    async def _for(self, target: Target) -> Provider:
        if target in self._configured and self._shared is not None:
            return self._shared
        if self._make is None:
            raise TransportError(f"provider {target.provider} cannot serve a target from x-gateway-config")
        if self._admit is not None:
            await self._admit(target)
        provider = self._own.get(target)
        if provider is None:
            provider = self._own[target] = self._make()
            if len(self._own) > self._keep:
                self._own.popitem(last=False)
        else:
            self._own.move_to_end(target)
        return provider

    async def complete(self, call: Call) -> Reply:
        return await (await self._for(call.target)).complete(call)

    async def stream(self, call: Call) -> Reply | EventStream:
        return await (await self._for(call.target)).stream(call)


def split_providers(
    providers: Mapping[str, Provider], config: Config, *, guarded: Resources, resolver: GuardedResolver
) -> dict[str, Provider]:
    """`providers` (by name) wrapped so targets outside `config` are served over `guarded` only."""
    configured = frozenset(target for route in config.routes.values() for target in iter_targets(route.root))

    def split(name: str) -> SplitProvider:
        if name not in INLINE_PROVIDERS:
            return SplitProvider(providers.get(name), configured, None)
        factory = factory_of(name)
        admit = resolver.admit if name == "openai" else None  # mock makes no connection
        return SplitProvider(providers.get(name), configured, lambda: factory(guarded), admit=admit)

    return {name: split(name) for name in {*providers, *INLINE_PROVIDERS}}


class ProvidersNotLoaded(Exception):
    """What a configuration's providers need (litellm's import) failed to load, or not in time: it is not served."""


@asynccontextmanager
async def guarded_providers(
    config: Config, providers: Mapping[str, Provider], *, client_timeout: aiohttp.ClientTimeout
) -> AsyncIterator[Mapping[str, Provider]]:
    """The providers to dispatch with, once what they need is loaded: `providers` as they are unless requestConfig is enabled.

    What they need loaded (litellm's import: `registry.loads`) loads on a thread while the loop
    serves on (at a reload, the configuration before); a failure to load, or a load not done within
    LOAD_WAIT_SECONDS, fails this configuration (ProvidersNotLoaded).
    Enabled, a second session (closed on exit) serves every target that is not in the config.
    """
    needed = loads(providers)
    for load in needed:  # all at once: a warm-up that hangs holds up none of the others
        load.start()
    for load in needed:
        try:
            async with asyncio.timeout(LOAD_WAIT_SECONDS):
                await load.wait()
            load.result()
        except TimeoutError:
            raise ProvidersNotLoaded(f"{load.name} did not load within {LOAD_WAIT_SECONDS:g} s") from None
        except Exception as exc:  # an import's error names no secret: its module and what failed
            raise ProvidersNotLoaded(f"{load.name} could not load ({type(exc).__name__}: {exc})") from exc
    if not config.request_config.enabled:
        yield providers
        return
    policy = HostPolicy.parse(config.request_config.allowed_hosts)
    resolver = GuardedResolver(policy)
    async with guarded_session(resolver, policy, client_timeout=client_timeout) as session:
        resources = Resources(session, max_response_bytes=config.server.max_response_bytes)
        yield split_providers(providers, config, guarded=resources, resolver=resolver)

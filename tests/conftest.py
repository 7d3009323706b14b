from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import openai
import pytest
from hypothesis import settings

from gateway.core.settings import Config
from tests.support.fakes import FakeUpstream, Step
from tests.support.gateway import Gateway, start_gateway, start_upstream
from tests.support.servers import redis_server

pytest_plugins = ["tests.support.hangs"]  # what a test that hangs leaves to read

# Never time a test: hypothesis' default 200 ms deadline per example failed a property test on a
# loaded machine (`-n auto` on 2 CPUs). Every test's settings start from this profile.
settings.register_profile("gateway", deadline=None)
settings.load_profile("gateway")


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    """One scripted upstream on a free loopback port."""
    return await start_upstream(aiohttp_server)


@pytest.fixture
def make_upstream(aiohttp_server: Any) -> Callable[..., Awaitable[FakeUpstream]]:
    async def make(default: Step | None = None) -> FakeUpstream:
        return await start_upstream(aiohttp_server, default)

    return make


@pytest.fixture
async def gateway(aiohttp_server: Any) -> AsyncIterator[Gateway]:
    """Start the gateway on a YAML config; returns an AsyncOpenAI client pointed at it.

    The client's key is GATEWAY_KEY (tests.support.gateway); configs that turn auth on should use it.
    """
    clients: list[openai.AsyncOpenAI] = []

    async def start(config: str | Config, *, seed: int = 7, **client_options: Any) -> openai.AsyncOpenAI:
        client = await start_gateway(aiohttp_server, config, seed=seed, **client_options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server for the whole session, on a free loopback port."""
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server.url

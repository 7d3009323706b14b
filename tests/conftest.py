from __future__ import annotations

import random
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.server.app import create_app
from tests.support.fakes import FakeUpstream, Step
from tests.support.servers import redis_server

GATEWAY_KEY = "gw-test-key"


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    """One scripted upstream on a free loopback port."""
    return await start_upstream(aiohttp_server)


async def start_upstream(aiohttp_server: Any, default: Step | None = None) -> FakeUpstream:
    fake = FakeUpstream(default)
    server: TestServer = await aiohttp_server(fake.app())
    fake.url = str(server.make_url("/v1"))
    return fake


@pytest.fixture
def make_upstream(aiohttp_server: Any) -> Callable[..., Awaitable[FakeUpstream]]:
    async def make(default: Step | None = None) -> FakeUpstream:
        return await start_upstream(aiohttp_server, default)

    return make


Gateway = Callable[..., Awaitable[openai.AsyncOpenAI]]


@pytest.fixture
async def gateway(aiohttp_server: Any) -> AsyncIterator[Gateway]:
    """Start the gateway on a YAML config; returns an AsyncOpenAI client pointed at it.

    The client's key is GATEWAY_KEY; configs that turn auth on should use it.
    """
    clients: list[openai.AsyncOpenAI] = []

    async def start(config: str | Config, *, seed: int = 7, **client_options: Any) -> openai.AsyncOpenAI:
        if isinstance(config, str):
            config = parse_config(textwrap.dedent(config))
        app = create_app(config, rng=random.Random(seed))
        server: TestServer = await aiohttp_server(app)
        client = openai.AsyncOpenAI(
            base_url=str(server.make_url("/v1")),
            api_key=GATEWAY_KEY,
            max_retries=0,
            timeout=client_options.pop("timeout", 20),
            **client_options,
        )
        client._gateway_app = app  # type: ignore[attr-defined]  # for tests that look inside
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

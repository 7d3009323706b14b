"""A gateway for the breaker and fault tests: a seeded app whose client can reach it (`_gateway_app`)."""

from __future__ import annotations

import random
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.server.app import create_app
from tests.conftest import GATEWAY_KEY


async def start_gateway(aiohttp_server: Any, config: str | Config, *, seed: int = 7, **options: Any) -> openai.AsyncOpenAI:
    """The gateway on `config`, and an AsyncOpenAI client (key GATEWAY_KEY, no retries) pointed at it."""
    if isinstance(config, str):
        config = parse_config(textwrap.dedent(config))
    app = create_app(config, rng=random.Random(seed))
    server: TestServer = await aiohttp_server(app)
    client = openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key=GATEWAY_KEY, max_retries=0, timeout=options.pop("timeout", 20), **options
    )
    client._gateway_app = app  # type: ignore[attr-defined]
    return client


@pytest.fixture(name="gateway")
async def gateway_with_breakers(aiohttp_server: Any) -> AsyncIterator[Callable[..., Awaitable[openai.AsyncOpenAI]]]:
    """Like tests.conftest's `gateway`, with the app reachable from the client: a test module that imports this gets it instead."""
    clients: list[openai.AsyncOpenAI] = []

    async def start(config: str | Config, **options: Any) -> openai.AsyncOpenAI:
        client = await start_gateway(aiohttp_server, config, **options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()

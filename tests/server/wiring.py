"""A gateway for the breaker and fault tests, with circuit breakers wired as app.py is to wire them.

Until gateway/server/app.py passes `breakers=open_breakers(config, listener=metrics)` to the
Dispatcher it builds (and closes them at cleanup), an on_startup hook does it here; once app.py
does, the hook finds the breakers in place and does nothing.
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.breakers import open_breakers
from gateway.config import Config, parse_config
from gateway.dispatch import Dispatcher
from gateway.metrics import Metrics
from gateway.observe import Observers
from gateway.server.app import create_app
from gateway.server.keys import DISPATCHER, OBSERVER
from tests.conftest import GATEWAY_KEY


def _wire_breakers(config: Config) -> Any:
    async def wire(app: web.Application) -> None:
        dispatcher = app[DISPATCHER]
        if dispatcher.breakers is not None:
            return
        observer = app[OBSERVER]
        found = observer.observers if isinstance(observer, Observers) else (observer,)
        metrics = next((o for o in found if isinstance(o, Metrics)), None)
        breakers = open_breakers(config, listener=metrics)
        app[DISPATCHER] = Dispatcher(dispatcher._providers, rng=dispatcher._rng, breakers=breakers)

        async def close(app: web.Application) -> None:
            await breakers.close()

        app.on_cleanup.insert(0, close)

    return wire


async def start_gateway(aiohttp_server: Any, config: str | Config, *, seed: int = 7, **options: Any) -> openai.AsyncOpenAI:
    """The gateway on `config`, and an AsyncOpenAI client (key GATEWAY_KEY, no retries) pointed at it."""
    if isinstance(config, str):
        config = parse_config(textwrap.dedent(config))
    app = create_app(config, rng=random.Random(seed))
    app.on_startup.append(_wire_breakers(config))
    server: TestServer = await aiohttp_server(app)
    client = openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key=GATEWAY_KEY, max_retries=0, timeout=options.pop("timeout", 20), **options
    )
    client._gateway_app = app  # type: ignore[attr-defined]
    return client


@pytest.fixture(name="gateway")
async def gateway_with_breakers(aiohttp_server: Any) -> AsyncIterator[Callable[..., Awaitable[openai.AsyncOpenAI]]]:
    """Like tests.conftest's `gateway`, with breakers wired: a test module that imports this gets it instead."""
    clients: list[openai.AsyncOpenAI] = []

    async def start(config: str | Config, **options: Any) -> openai.AsyncOpenAI:
        client = await start_gateway(aiohttp_server, config, **options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()

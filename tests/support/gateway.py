"""The gateway in-process on loopback, its test key, and a scripted upstream beside it.

tests/conftest.py's fixtures (`gateway`, `upstream`, `make_upstream`) are built on these; a test
module imports the names it needs (GATEWAY_KEY, the `Gateway` type of the fixture) from here.
"""

from __future__ import annotations

import random
import textwrap
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.server.app import create_app
from gateway.server.keys import INFLIGHT
from tests.support.fakes import FakeUpstream, Step

GATEWAY_KEY = "gw-test-key"
KEYS = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}"  # a config's auth block: GATEWAY_KEY, of team-a

Gateway = Callable[..., Awaitable[openai.AsyncOpenAI]]

# The app behind each client start_gateway made: kept beside the SDK's object, not on it.
_APPS: weakref.WeakKeyDictionary[openai.AsyncOpenAI, web.Application] = weakref.WeakKeyDictionary()


def app_of(client: openai.AsyncOpenAI) -> web.Application:
    """The gateway application `client` (from start_gateway) talks to, for tests that look inside."""
    return _APPS[client]


async def start_upstream(aiohttp_server: Any, default: Step | None = None) -> FakeUpstream:
    """A FakeUpstream served by `aiohttp_server` (pytest-aiohttp's fixture) on a free loopback port."""
    fake = FakeUpstream(default)
    server: TestServer = await aiohttp_server(fake.app())
    fake.url = str(server.make_url("/v1"))
    return fake


async def start_gateway(
    aiohttp_server: Any, config: str | Config, *, seed: int = 7, **client_options: Any
) -> openai.AsyncOpenAI:
    """The gateway on `config` (YAML or loaded), and an AsyncOpenAI client pointed at it (the caller closes it).

    The client's key is GATEWAY_KEY, it does not retry, and `app_of(client)` is the app, for tests
    that look inside.
    """
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
    _APPS[client] = app
    return client


async def requests_ended(client: openai.AsyncOpenAI) -> None:
    """Return once the gateway `client` points at (from start_gateway) has ended every request it was answering.

    A request ends when its handler does, whether it answered or its client left mid-answer.
    """
    await app_of(client)[INFLIGHT].drained()

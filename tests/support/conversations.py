"""A gateway with the Conversations API's routes, and what its tests share.

`start_conversations_gateway` builds the app as tests/support/gateway.start_gateway does and adds
conversations_api's routes when the app does not have them yet (the app module adds them).
"""

from __future__ import annotations

import random
import textwrap
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.server import conversations_api
from gateway.server.app import create_app
from tests.support.gateway import GATEWAY_KEY
from tests.support.servers import flush_redis

OTHER_KEY = "gw-other-key"


def _has_routes(app: web.Application) -> bool:
    return any(resource.canonical == "/v1/conversations" for resource in app.router.resources())


async def start_conversations_gateway(aiohttp_server: Any, config: str, *, api_key: str = GATEWAY_KEY) -> tuple[openai.AsyncOpenAI, str]:
    """The gateway on `config` (YAML) with the Conversations API, an AsyncOpenAI client on it (the caller closes it), and its /v1 URL."""
    app = create_app(parse_config(textwrap.dedent(config)), rng=random.Random(7))
    if not _has_routes(app):
        conversations_api.add_routes(app.router)
    server: TestServer = await aiohttp_server(app)
    base_url = str(server.make_url("/v1"))
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=20), base_url


@pytest.fixture(params=["sqlite", "memory", "redis"])
async def memory_block(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A config's memory block on each store (a test module imports it by name)."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        await flush_redis(url)
        return f'{{store: redis, url: "{url}"}}'
    if request.param == "sqlite":
        return f'{{store: sqlite, path: "{tmp_path / "memory.db"}"}}'
    return "{store: memory}"


def two_keys(upstream_url: str, memory: str) -> str:
    """A config with two tenants (GATEWAY_KEY's team-a, OTHER_KEY's team-b), `memory`, and route `chat` to an upstream."""
    return f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: {OTHER_KEY}}}]}}
memory: {memory}
routes: {{chat: {{provider: openai, baseUrl: "{upstream_url}", apiKey: k}}}}
"""

"""Shared by the tests of responses the gateway keeps on translated routes: two tenants, each store, one route."""

from __future__ import annotations

import pytest

from tests.support.fakes import FakeUpstream
from tests.support.gateway import GATEWAY_KEY

TWO_KEYS = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: other-key}}]}}"


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The memory block of a config, on each store (a test module imports it by name)."""
    match request.param:
        case "memory":
            return "memory: {store: memory}"
        case "sqlite":
            return f'memory: {{store: sqlite, path: "{tmp_path_factory.mktemp("chain") / "m.db"}"}}'
        case _:
            return f'memory: {{store: redis, url: "{request.getfixturevalue("redis_url")}"}}'


def translated_config(upstream: FakeUpstream, store: str, *, window: str = "") -> str:
    """Route `chat` to `upstream`, translated (no target serves the Responses API: the gateway keeps its responses)."""
    route_memory = f", memory: {{{window}}}" if window else ""
    target = f'provider: openai, baseUrl: "{upstream.url}", apiKey: k, responsesApi: translate{route_memory}'
    return f"{TWO_KEYS}\n{store}\nroutes: {{chat: {{{target}}}}}"

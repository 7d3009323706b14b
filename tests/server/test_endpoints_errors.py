"""The endpoint table's errors, asked of a real gateway: the endpoints that list an error answer it, and the others do not.

Three errors every model call may meet are checked on every endpoint: a missing key (401), a
body that is no JSON (400 invalid_json) and a model no route has (404 model_not_found).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from gateway.server.endpoints import ENDPOINTS, METRICS_PATH, Endpoint
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.plain_http import AUTH

CONFIG = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}\nroutes: {{m: {{provider: mock}}}}\n"
# A body every JSON endpoint reads up to its route: each one's required fields, for a model no route has.
UNROUTED = {
    "model": "nope", "messages": [{"role": "user", "content": "x"}], "input": "x", "prompt": "x",
    "query": "q", "documents": ["d"], "max_tokens": 5,
}  # fmt: skip


def listed(endpoint: Endpoint, code: str) -> bool:
    return any(failure.code == code for failure in endpoint.failures)


def concrete(path: str) -> str:
    return path.replace("{response_id}", "resp_1").replace("{model}", "m").replace("{memory_id}", "conv-1")


def unrouted_form() -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("model", "nope")
    form.add_field("file", b"RIFF", filename="a.wav", content_type="audio/wav")
    return form


async def answer(base: str, endpoint: Endpoint, **options: Any) -> tuple[int, Any]:
    url = base + concrete(endpoint.path)
    async with aiohttp.ClientSession() as session, session.request(endpoint.method, url, **options) as response:
        return response.status, await response.json(content_type=None)


def error_code(endpoint: Endpoint, body: Any) -> Any:
    """The body's error code; under /v1/messages (Anthropic's shape, which has none) a mark that it is that shape."""
    return "anthropic-shaped" if endpoint.path.startswith("/v1/messages") else body["error"].get("code")


@pytest.fixture
async def base(gateway: Gateway) -> str:
    client = await gateway(CONFIG)
    return str(client.base_url).rstrip("/").removesuffix("/v1")


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.path != METRICS_PATH], ids=lambda e: f"{e.method} {e.path}")
async def test_the_key_error_is_listed_where_it_comes(base: str, endpoint: Endpoint) -> None:
    status, _ = await answer(base, endpoint)
    assert (status == 401) == listed(endpoint, "invalid_api_key")


async def test_the_metrics_are_behind_the_keys_with_require_auth(gateway: Gateway) -> None:
    client = await gateway(f"metrics: {{requireAuth: true}}\n{CONFIG}")
    metrics = next(e for e in ENDPOINTS if e.path == METRICS_PATH)
    status, body = await answer(str(client.base_url).rstrip("/").removesuffix("/v1"), metrics)
    assert (status, body["error"]["code"]) == (401, "invalid_api_key") and listed(metrics, "invalid_api_key")


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.method == "POST"], ids=lambda e: e.path)
async def test_a_body_that_is_no_json_is_refused_where_listed(base: str, endpoint: Endpoint) -> None:
    status, body = await answer(base, endpoint, headers={**AUTH, "Content-Type": "application/json"}, data=b"{no")
    refused = status == 400 and error_code(endpoint, body) in ("invalid_json", "anthropic-shaped")
    assert refused == listed(endpoint, "invalid_json"), (status, body)


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.method == "POST"], ids=lambda e: e.path)
async def test_a_model_no_route_has_is_refused_where_listed(base: str, endpoint: Endpoint) -> None:
    form = "/audio/transcriptions" in endpoint.path or "/audio/translations" in endpoint.path
    options: dict[str, Any] = {"data": unrouted_form()} if form else {"json": UNROUTED}
    status, body = await answer(base, endpoint, headers=AUTH, **options)
    refused = status == 404 and error_code(endpoint, body) in ("model_not_found", "anthropic-shaped")
    assert refused == listed(endpoint, "model_not_found"), (status, body)

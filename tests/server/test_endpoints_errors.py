"""The endpoint table's errors, asked of a real gateway: the endpoints that list an error answer it, and the others do not.

Three errors every model call may meet are checked on every endpoint: a missing key (401), a
body that is no JSON (400 invalid_json) and a model no route has (404 model_not_found).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from gateway.server.endpoints import ENDPOINTS, EVERY_PATH, METRICS_PATH, Endpoint, Failure
from tests.support.fakes import FakeUpstream, Step
from tests.support.gateway import GATEWAY_KEY, KEYS, Gateway
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
    named = path.replace("{response_id}", "resp_1").replace("{model}", "m").replace("{memory_id}", "conv-1")
    return named.replace("{conversation_id}", "conv-1").replace("{item_id}", "msg_1")


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


# An admin endpoint refuses team-a's key before it reads a body: tests/server/test_governance_api_errors.py asks it with an admin key.
@pytest.mark.parametrize(
    "endpoint", [e for e in ENDPOINTS if e.method == "POST" and not listed(e, "admin_key_required")], ids=lambda e: e.path
)
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


def entry(failures: tuple[Failure, ...], status: int, code: str) -> bool:
    """Whether `failures` lists `code` with `status`."""
    return any((failure.status, failure.code) == (status, code) for failure in failures)


def answered(endpoint: Endpoint, status: int, code: str, got: tuple[int, Any]) -> bool:
    """Whether the gateway's answer `got` is the error (status, code); under /v1/messages the status and the shape."""
    return got[0] == status and error_code(endpoint, got[1]) in (code, "anthropic-shaped")


ROUTED = [e for e in ENDPOINTS if e.method == "POST" and "/memory/" not in e.path]


async def unrouted(base: str, endpoint: Endpoint, headers: dict[str, str]) -> tuple[int, Any]:
    form = "/audio/transcriptions" in endpoint.path or "/audio/translations" in endpoint.path
    # On /v1/responses `prompt` names a stored template, which a translated request cannot have.
    body = {key: value for key, value in UNROUTED.items() if (endpoint.path, key) != ("/v1/responses", "prompt")}
    options: dict[str, Any] = {"data": unrouted_form()} if form else {"json": body}
    return await answer(base, endpoint, headers={**AUTH, **headers}, **options)


@pytest.mark.parametrize("endpoint", ROUTED, ids=lambda e: e.path)
async def test_x_gateway_config_is_refused_while_request_config_is_off_where_listed(base: str, endpoint: Endpoint) -> None:
    got = await unrouted(base, endpoint, {"x-gateway-config": "m"})
    assert answered(endpoint, 400, "request_config_disabled", got) == entry(endpoint.failures, 400, "request_config_disabled"), got


@pytest.mark.parametrize("endpoint", ROUTED, ids=lambda e: e.path)
async def test_x_gateway_config_naming_no_route_is_refused_where_listed(gateway: Gateway, endpoint: Endpoint) -> None:
    client = await gateway(f"requestConfig: {{enabled: true}}\n{CONFIG}")
    got = await unrouted(str(client.base_url).rstrip("/").removesuffix("/v1"), endpoint, {"x-gateway-config": "nowhere"})
    assert answered(endpoint, 400, "unknown_route", got) == entry(endpoint.failures, 400, "unknown_route"), got


MEMORY_ENDPOINTS = [e for e in ENDPOINTS if "{memory_id}" in e.path]


@pytest.mark.parametrize("memory_id", ["a%20b", "x" * 300])
@pytest.mark.parametrize("endpoint", MEMORY_ENDPOINTS, ids=lambda e: f"{e.method} {e.path}")
async def test_a_memory_id_that_cannot_be_one_is_an_invalid_header(base: str, endpoint: Endpoint, memory_id: str) -> None:
    url = base + endpoint.path.replace("{memory_id}", memory_id)
    async with aiohttp.ClientSession() as session, session.request(endpoint.method, url, headers=AUTH) as response:
        got = response.status, await response.json()
    assert answered(endpoint, 400, "invalid_header", got) and entry(endpoint.failures, 400, "invalid_header"), got


RESPONSES = next(e for e in ENDPOINTS if (e.method, e.path) == ("POST", "/v1/responses"))


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"background": True}, "unsupported_parameter"),
        ({"input": [{"role": "captain", "content": "x"}]}, "invalid_value"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]}, "unsupported_value"),
    ],
    ids=["background", "a role", "a file by id"],
)
async def test_what_a_translated_responses_request_cannot_say_is_refused_as_listed(
    base: str, body: dict[str, Any], code: str
) -> None:
    got = await answer(base, RESPONSES, headers=AUTH, json={"model": "m", "input": "x", **body})
    assert answered(RESPONSES, 400, code, got) and entry(RESPONSES.failures, 400, code), got


@pytest.mark.parametrize("endpoint", ROUTED, ids=lambda e: e.path)
async def test_a_reply_that_cannot_be_translated_back_is_a_malformed_upstream_response_where_listed(
    gateway: Gateway, make_upstream: Callable[..., Awaitable[FakeUpstream]], endpoint: Endpoint
) -> None:
    upstream = await make_upstream(Step(body={"id": "x", "choices": "none"}))
    client = await gateway(f"{KEYS}\nroutes: {{nope: {{baseUrl: '{upstream.url}', apiKey: k, responsesApi: translate}}}}\n")
    got = await unrouted(str(client.base_url).rstrip("/").removesuffix("/v1"), endpoint, {})
    listed_here = entry(endpoint.failures, 502, "malformed_upstream_response")
    assert answered(endpoint, 502, "malformed_upstream_response", got) == listed_here, got


async def test_a_preflight_from_an_origin_not_allowed_is_refused_on_any_path(gateway: Gateway) -> None:
    client = await gateway(f"cors: {{allowOrigins: ['https://app.example']}}\n{CONFIG}")
    url = str(client.base_url).rstrip("/").removesuffix("/v1") + "/anywhere"
    headers = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    async with aiohttp.ClientSession() as session, session.options(url, headers=headers) as response:
        got = response.status, (await response.json())["error"]["code"]
    assert got == (403, "origin_not_allowed") and entry(EVERY_PATH, 403, "origin_not_allowed")


async def test_a_streamed_image_generation_is_refused_as_listed(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(f"{KEYS}\nroutes: {{images: {{baseUrl: '{upstream.url}', apiKey: k}}}}\n")
    images = next(e for e in ENDPOINTS if e.path == "/v1/images/generations")
    body = {"model": "images", "prompt": "a cat", "stream": True}
    got = await answer(str(client.base_url).rstrip("/").removesuffix("/v1"), images, headers=AUTH, json=body)
    assert answered(images, 400, "unsupported_value", got) and entry(images.failures, 400, "unsupported_value"), got
    assert upstream.calls == 0


LISTING = next(e for e in ENDPOINTS if (e.method, e.path) == ("GET", "/v1/memory"))


@pytest.mark.parametrize(("query", "code"), [("limit=many", "invalid_type"), ("limit=0", "invalid_value"), ("prefix=a%7B", "invalid_value")])
async def test_a_listing_asked_wrongly_is_refused_as_listed(base: str, query: str, code: str) -> None:
    async with aiohttp.ClientSession() as session, session.get(f"{base}/v1/memory?{query}", headers=AUTH) as response:
        got = response.status, await response.json()
    assert answered(LISTING, 400, code, got) and entry(LISTING.failures, 400, code), got


async def test_a_redo_with_nothing_undone_is_refused_as_listed(base: str) -> None:
    redo = next(e for e in ENDPOINTS if (e.method, e.path) == ("POST", "/v1/memory/{memory_id}/redo"))
    turn = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    async with aiohttp.ClientSession(headers=AUTH) as session:
        async with session.post(f"{base}/v1/chat/completions", json=turn, headers={"memoryId": "conv-1"}) as response:
            assert response.status == 200
        async with session.post(base + concrete(redo.path)) as response:
            got = response.status, await response.json()
    assert answered(redo, 404, "nothing_to_redo", got) and entry(redo.failures, 404, "nothing_to_redo"), got

"""Body fields that would redirect the upstream or carry credentials never leave the gateway, on any route."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from gateway.server.parsing import ORDINARY_FIELDS, drop_redirect_fields, is_redirect_field
from tests.support.fakes import FakeUpstream
from tests.support.gateway import GATEWAY_KEY, Gateway

MESSAGES = [{"role": "user", "content": "hello"}]
SMUGGLED = {
    "api_base": "http://169.254.169.254/latest",
    "base_url": "http://10.0.0.1",
    "api_key": "sk-smuggled",
    "api_version": "2099-01-01",
    "aws_secret_access_key": "smuggled",
    "aws_bedrock_runtime_endpoint": "http://10.0.0.2",
    "vertex_credentials": "{}",
    "azure_ad_token": "smuggled",
}


def test_a_body_without_them_is_left_alone() -> None:
    assert drop_redirect_fields({"model": "m", "messages": MESSAGES, "extra_body": {"top_k": 3}}) is None
    assert drop_redirect_fields({"model": "m", "api_keys_are_fine_here": 1, "extra_body": "not an object"}) is None


def test_they_are_dropped_at_the_top_and_inside_extra_body() -> None:
    payload = {"model": "m", **SMUGGLED, "extra_body": {**SMUGGLED, "top_k": 3}, "temperature": 0.5}
    assert drop_redirect_fields(payload) == {"model": "m", "extra_body": {"top_k": 3}, "temperature": 0.5}


def route(upstream: FakeUpstream) -> str:
    return f'routes: {{r: {{provider: openai, baseUrl: "{upstream.url}", apiKey: sk-operator}}}}'


async def test_the_upstream_never_sees_them(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(route(upstream))
    extra = {**SMUGGLED, "extra_body": {"api_base": "http://evil.example", "top_k": 3}, "temperature": 0.5}
    await client.chat.completions.create(model="r", messages=MESSAGES, extra_body=extra)
    await client.embeddings.with_raw_response.create(model="r", input="hi", extra_body=SMUGGLED)
    chat, embeddings = upstream.requests
    assert chat.body == {"model": "r", "messages": MESSAGES, "extra_body": {"top_k": 3}, "temperature": 0.5}
    assert set(embeddings.body) == {"model", "input", "encoding_format"}
    assert chat.headers["Authorization"] == "Bearer sk-operator"


async def post(client: Any, raw: bytes) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{client.base_url}chat/completions",
            data=raw,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {GATEWAY_KEY}"},
        ) as answer,
    ):
        return answer.status


async def test_a_key_spelled_with_an_escape_is_dropped_too(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(route(upstream))
    raw = b'{"model": "r", "messages": [{"role": "user", "content": "hi"}], "api\\u005fbase": "http://evil.example"}'
    assert await post(client, raw) == 200
    assert "api_base" not in upstream.requests[0].body


async def test_any_other_body_passes_as_the_clients_bytes(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(route(upstream))
    raw = b'{ "model" : "r",\n "messages": [{"role": "user", "content": "caf\\u00e9"}], "x_api_key_note": 1 }'
    assert await post(client, raw) == 200
    assert upstream.requests[0].raw == raw
    assert orjson.loads(raw)["x_api_key_note"] == 1


def test_the_ordinary_fields_hold_none_of_them() -> None:
    """The fast path skips the look for any body of ordinary fields alone: none may be one."""
    assert not [key for key in ORDINARY_FIELDS if is_redirect_field(key) or key == "extra_body"]


def test_one_of_them_among_ordinary_fields_is_dropped() -> None:
    for key, value in SMUGGLED.items():
        payload = {"model": "m", "messages": MESSAGES, "stream": True, key: value}
        assert drop_redirect_fields(payload) == {"model": "m", "messages": MESSAGES, "stream": True}

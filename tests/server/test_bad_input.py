"""Every client mistake gets an OpenAI-shaped error with the right 4xx status, never a 500."""

from __future__ import annotations

import openai
import pytest

from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.openai_errors import assert_error
from tests.support.plain_http import AUTH, CONFIG, call


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        (b"{not json", 400, None, "invalid_json"),
        (b"", 400, None, "invalid_json"),
        (b"[1, 2]", 400, None, "invalid_json"),
        (b'"text"', 400, None, "invalid_json"),
        (b'{"model": "m"}', 400, "messages", "missing_required_parameter"),
        (b'{"model": "m", "messages": []}', 400, "messages", "invalid_type"),
        (b'{"model": "m", "messages": "hi"}', 400, "messages", "invalid_type"),
        (b'{"model": "m", "messages": ["hi"]}', 400, "messages[0]", "invalid_type"),
        (b'{"model": "m", "messages": [{"content": "hi"}]}', 400, "messages[0].role", "invalid_type"),
        (b'{"model": "m", "messages": [{"role": "user", "content": 5}]}', 400, "messages[0].content", "invalid_type"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', 400, "model", "invalid_type"),
        (b'{"model": 3, "messages": [{"role": "user", "content": "hi"}]}', 400, "model", "invalid_type"),
        (b'{"model": "m", "stream": "yes", "messages": [{"role": "user", "content": "hi"}]}', 400, "stream", "invalid_type"),
        (b'{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}', 404, "model", "model_not_found"),
        (b'{"model": "m", "messages": [{"role": "assistant", "tool_calls": "abc"}]}', 400, "messages[0].tool_calls", "invalid_type"),
        (b'{"model": "m", "messages": [{"role": "assistant", "tool_calls": ["abc"]}]}', 400, "messages[0].tool_calls", "invalid_type"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "x", "name": 7}]}', 400, "messages[0].name", "invalid_type"),
        (b'{"model": "m", "messages": [{"role": "tool", "content": "x", "tool_call_id": []}]}', 400, "messages[0].tool_call_id", "invalid_type"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 3000 + b'"}]}', 413, None, "request_too_large"),
        *(
            (b'{"model": "m", "messages": [{"role": "user", "content": "q"}, ' + message + b"]}", 400, param, "invalid_type")
            for message, param in [
                (b'{"role": "assistant", "tool_calls": [{"id": ["c"], "function": {"name": "f", "arguments": "{}"}}]}',
                 "messages[1].tool_calls[0].id"),
                (b'{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}',
                 "messages[1].tool_calls[0].id"),
                (b'{"role": "assistant", "tool_calls": [{"id": "c", "type": 1, "function": {"name": "f", "arguments": ""}}]}',
                 "messages[1].tool_calls[0].type"),
                (b'{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]}', "messages[1].tool_calls[0].function"),
                (b'{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": null, "arguments": ""}}]}',
                 "messages[1].tool_calls[0].function.name"),
                (b'{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}',
                 "messages[1].tool_calls[0].function.arguments"),
                (b'{"role": "user", "content": ["hi"]}', "messages[1].content[0]"),
                (b'{"role": "user", "content": [{"text": "hi"}]}', "messages[1].content[0].type"),
                (b'{"role": "user", "content": [{"type": "text", "text": ["hi"]}]}', "messages[1].content[0].text"),
            ]
        ),
    ],
    ids=lambda value: value[:40].decode() if isinstance(value, bytes) else None,
)
async def test_chat_bad_bodies(gateway: Gateway, body: bytes, status: int, param: str | None, code: str) -> None:
    client = await gateway(CONFIG)
    got, headers, payload = await call(client, "POST", "/v1/chat/completions", data=body, headers=AUTH)
    assert got == status, payload
    assert_error(payload, param=param, code=code)
    assert headers["x-request-id"]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/embeddings", b'{"model": "m"}', "input"),
        ("/v1/embeddings", b'{"model": "m", "input": 5}', "input"),
        ("/v1/completions", b'{"model": "m", "prompt": {"a": 1}}', "prompt"),
        ("/v1/completions", b"nope", None),
    ],
)
async def test_other_endpoints_bad_bodies(gateway: Gateway, path: str, body: bytes, param: str | None) -> None:
    client = await gateway(CONFIG)
    status, _, payload = await call(client, "POST", path, data=body, headers=AUTH)
    assert status == 400
    assert_error(payload, param=param)


async def test_unknown_path_and_wrong_method(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    status, _, payload = await call(client, "GET", "/v1/nothing-here", headers=AUTH)
    assert status == 404
    assert_error(payload, code="not_found")
    status, headers, payload = await call(client, "GET", "/v1/chat/completions", headers=AUTH)
    assert status == 405 and headers["Allow"] == "POST"
    assert_error(payload, code="method_not_allowed")


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": GATEWAY_KEY}, {"Authorization": "Basic abc"}],
    ids=["missing", "wrong-key", "no-scheme", "basic"],
)
async def test_auth_rejections(gateway: Gateway, headers: dict[str, str]) -> None:
    client = await gateway(CONFIG)
    status, _, payload = await call(client, "POST", "/v1/chat/completions", json={"model": "m"}, headers=headers)
    assert status == 401
    assert_error(payload, code="invalid_api_key")


async def test_sdk_with_wrong_key_gets_authentication_error(gateway: Gateway) -> None:
    client = await gateway(CONFIG, default_headers={"Authorization": "Bearer nope"})
    with pytest.raises(openai.AuthenticationError):
        await client.models.list()


async def test_key_given_as_sha256(gateway: Gateway) -> None:
    import hashlib

    digest = hashlib.sha256(GATEWAY_KEY.encode()).hexdigest()
    client = await gateway(f"auth: {{keys: [{{name: t, keySha256: {digest}}}]}}\nroutes: {{m: {{provider: mock}}}}")
    assert [m.id for m in (await client.models.list()).data] == ["m"]


async def test_bad_request_id_header(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    status, headers, payload = await call(client, "GET", "/v1/models", headers={**AUTH, "x-request-id": "a" * 300})
    assert status == 400
    assert_error(payload, param="x-request-id")
    assert headers["x-request-id"] != "a" * 300


async def test_health_endpoints_need_no_key(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    assert (await call(client, "GET", "/healthz"))[:1] == (200,)
    status, _, payload = await call(client, "GET", "/readyz")
    assert status == 200 and payload == {"status": "ready"}


async def test_readyz_reports_draining(gateway: Gateway) -> None:
    from gateway.server.keys import LIFECYCLE

    client = await gateway("routes: {m: {provider: mock}}")
    app = client._gateway_app  # type: ignore[attr-defined]
    app[LIFECYCLE].draining = True
    status, _, payload = await call(client, "GET", "/readyz")
    assert status == 503 and payload == {"status": "draining"}

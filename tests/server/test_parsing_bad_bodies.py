"""A body the door's checks refuse (gateway.server.parsing) is an OpenAI-shaped 4xx naming its param, never a 500.

Auth, paths and request ids are tested in test_middlewares.py, the health endpoints in test_health.py.
"""

from __future__ import annotations

import pytest

from tests.support.gateway import Gateway
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

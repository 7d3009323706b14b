"""Hostile input the SDK never sends: raw header bytes, bodies shaped to poison memory or to nest too deep.

Raw bytes need a raw socket: these tests write HTTP/1.1 by hand over asyncio streams. Lying
Content-Encoding and trickled bodies are in test_bodies_reading.py.
"""

from __future__ import annotations

import orjson
import pytest

from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.openai_errors import assert_error
from tests.support.raw_http import AUTH, CONFIG, address, exchange, request


@pytest.mark.parametrize(
    "header",
    [
        "maxMessages: ²",  # str.isdigit() says yes, int() says no
        "maxMessages: ٣",  # int() reads Arabic-Indic digits; a header takes ASCII only
        "x-memory-max-tokens: ¹²",
        "maxRounds: " + "9" * 5000,  # more digits than int() will parse
    ],
    ids=["superscript", "arabic-indic", "x-memory-superscripts", "5000-digits"],
)
async def test_bad_window_header_is_a_400(gateway: Gateway, header: str) -> None:
    name = header.partition(":")[0]
    data = request(AUTH + b"memoryId: m1\r\n" + header.encode() + b"\r\n")
    status, _, body = await exchange(await address(gateway), data)
    assert status == 400
    assert_error(body, param=name, code="invalid_header")
    if "9999" in header:
        assert body["error"]["message"].endswith("must be at most 50 (the operator's limit), got a 5000-digit number")


@pytest.mark.parametrize(
    "token",
    [b"gw\xff", GATEWAY_KEY.encode() + b"\x80"],
    ids=["latin-1-byte", "key-plus-byte"],
)
async def test_non_ascii_bearer_token_is_an_incorrect_key(gateway: Gateway, token: bytes) -> None:
    status, _, body = await exchange(await address(gateway), request(b"Authorization: Bearer " + token + b"\r\n"))
    assert status == 401
    assert_error(body, code="invalid_api_key")


async def test_memory_poisoned_by_a_list_tool_call_id_is_refused(gateway: Gateway) -> None:
    """A tool call id given as an array used to be stored, and every later turn was a 500."""
    where = await address(gateway)
    call = {"id": ["call_1"], "type": "function", "function": {"name": "f", "arguments": "{}"}}
    turn = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    headers = AUTH + b"memoryId: poisoned\r\n"
    status, _, body = await exchange(where, request(headers, orjson.dumps({"model": "m", "messages": turn})))
    assert status == 400
    assert_error(body, param="messages[1].tool_calls[0].id", code="invalid_type")
    status, _, body = await exchange(where, request(headers))
    assert status == 200, body


@pytest.mark.parametrize("headers", [b"", b"memoryId: deep\r\n"])
async def test_json_nested_deeper_than_it_can_be_written_again_is_a_400(gateway: Gateway, headers: bytes) -> None:
    """orjson reads 1,024 levels but writes 254 (and past its buffer from ~211): the gateway refuses past 128."""
    where = await address(gateway)
    deep = b'{"model": "m", "messages": [{"role": "user", "content": "hi", "x": ' + b"[" * 300 + b"]" * 300 + b"}]}"
    status, _, body = await exchange(where, request(AUTH + headers, deep))
    assert status == 400, body
    assert_error(body, code="invalid_json")
    shallow = b'{"model": "m", "messages": [{"role": "user", "content": "hi", "x": ' + b"[" * 250 + b"]" * 250 + b"}]}"
    status, _, body = await exchange(where, request(AUTH + headers, shallow))
    assert status != 500, body


async def test_full_message_shapes_with_provider_extras_pass(gateway: Gateway) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}, "index": 0}
    parts = [{"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]
    messages = [
        {"role": "user", "content": parts, "name": "ann"},
        {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
        {"role": "user", "content": "thanks", "x-provider-extra": [1, 2]},
    ]
    data = request(AUTH + b"memoryId: extras\r\n", orjson.dumps({"model": "m", "messages": messages}))
    status, _, body = await exchange(await address(gateway), data)
    assert status == 200, body


async def test_a_preflight_origin_that_is_not_utf8_is_a_403_not_a_500(gateway: Gateway) -> None:
    config = CONFIG + "cors: {allowOrigins: ['https://app.example.com']}\n"
    preflight = (
        b"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n"
        b"Origin: https://\xff\xfe.example.com\r\nAccess-Control-Request-Method: POST\r\n\r\n"
    )
    status, _, body = await exchange(await address(gateway, config), preflight)
    assert status == 403
    assert_error(body, code="origin_not_allowed")

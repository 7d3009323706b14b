"""The request side's fast paths accept exactly what the full checks accept, and nothing more.

A plain `{role, content}` message, a request without memory headers, a bearer key looked up by
its digest and a body that arrived whole each skip the general path. Every input here is one a
careless fast path would let through (or turn away) where the general path answers otherwise.
"""

from __future__ import annotations

import asyncio
import gzip

import orjson
import pytest

from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.openai_errors import assert_error
from tests.support.plain_http import AUTH, CONFIG, call
from tests.support.raw_http import AUTH as AUTH_LINE
from tests.support.raw_http import CONFIG as MEMORY_CONFIG
from tests.support.raw_http import address, exchange, parse_answer, request

PLAIN = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "user", "content": "hi", "name": 7}, "messages[3].name"),  # an odd extra key
        ({"role": "tool", "content": "hi", "tool_call_id": ["c"]}, "messages[3].tool_call_id"),
        ({"role": "assistant", "content": "hi", "tool_calls": "c"}, "messages[3].tool_calls"),
        ({"role": "user", "content": 5}, "messages[3].content"),
        ({"role": "user", "content": {"type": "text", "text": "hi"}}, "messages[3].content"),
        ({"role": "user", "content": ["hi"]}, "messages[3].content[0]"),
        ({"role": "user", "content": [{"type": "text", "text": 1}]}, "messages[3].content[0].text"),
        ({"role": 5, "content": "hi"}, "messages[3].role"),
        ({"role": ["user"], "content": "hi"}, "messages[3].role"),
        ({"role": "", "content": "hi"}, "messages[3].role"),
        ({"role": None, "content": "hi"}, "messages[3].role"),
        ({"content": "hi", "name": "user"}, "messages[3].role"),  # two keys, but not role and content
        ([["role", "user"], ["content", "hi"]], "messages[3]"),
        ("user: hi", "messages[3]"),
    ],
    ids=lambda value: None if isinstance(value, str) and value.startswith("messages") else orjson.dumps(value).decode()[:50],
)
async def test_a_message_off_the_plain_shape_gets_the_full_checks_400(gateway: Gateway, message: object, param: str) -> None:
    """Three plain messages first, so that only a look at every message finds the fourth."""
    client = await gateway(CONFIG)
    body = orjson.dumps({"model": "m", "messages": [PLAIN, PLAIN, PLAIN, message, PLAIN]})
    status, _, payload = await call(client, "POST", "/v1/chat/completions", data=body, headers=AUTH)
    assert status == 400, payload
    assert_error(payload, param=param, code="invalid_type")


@pytest.mark.parametrize(
    "messages",
    [
        [PLAIN, {"role": "assistant", "content": None}],
        [PLAIN, {"role": "user", "content": ""}],
        [{"role": "user", "content": "hi", "name": "ann"}],
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        [{"role": "user", "content": "hi", "x-provider-extra": {"a": 1}}],
        [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}],
        [PLAIN, {"content": "hi", "role": "user"}],
    ],
    ids=["null-content", "empty-content", "name", "parts", "extra-key", "no-content", "content-first"],
)
async def test_messages_off_the_plain_shape_that_the_full_checks_accept_pass(gateway: Gateway, messages: list[object]) -> None:
    client = await gateway(CONFIG)
    body = orjson.dumps({"model": "m", "messages": messages})
    status, _, payload = await call(client, "POST", "/v1/chat/completions", data=body, headers=AUTH)
    assert status == 200, payload


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {GATEWAY_KEY}", f"bearer {GATEWAY_KEY}", f"BEARER {GATEWAY_KEY}", f"Bearer   {GATEWAY_KEY}",
     f"Bearer {GATEWAY_KEY} \t", f"  Bearer {GATEWAY_KEY}"],
    ids=["plain", "lower-case", "upper-case", "three-spaces", "trailing-space-tab", "leading-spaces"],
)
async def test_a_bearer_key_spaced_or_cased_oddly_is_still_the_key(gateway: Gateway, authorization: str) -> None:
    data = request(b"Authorization: " + authorization.encode() + b"\r\n")
    status, _, body = await exchange(await address(gateway, MEMORY_CONFIG), data)
    assert status == 200, body


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer\t{GATEWAY_KEY}", f"Bearer{GATEWAY_KEY}", f"Bearer {GATEWAY_KEY} x", f"Bearer {GATEWAY_KEY.upper()}",
     f"Bearer {GATEWAY_KEY[:-1]}", f"Bearer {GATEWAY_KEY[:2]}\t{GATEWAY_KEY[2:]}", f"Token {GATEWAY_KEY}", f"Bearer \u00a0{GATEWAY_KEY}x",
     "Bearer " + orjson.dumps(GATEWAY_KEY).decode()],
    ids=["tab", "no-space", "trailing-word", "upper-key", "prefix", "inner-tab", "other-scheme", "nbsp", "quoted"],
)
async def test_a_bearer_header_that_is_not_the_key_is_a_401(gateway: Gateway, authorization: str) -> None:
    data = request(b"Authorization: " + authorization.encode() + b"\r\n")
    status, _, body = await exchange(await address(gateway, MEMORY_CONFIG), data)
    assert status == 401, body
    assert_error(body, code="invalid_api_key")


@pytest.mark.parametrize("header", [b"MEMORYID", b"memoryid", b"X-Memory-Id", b"x-MEMORY-id"])
async def test_a_memory_id_header_in_any_case_turns_memory_on(gateway: Gateway, header: bytes) -> None:
    where = await address(gateway, MEMORY_CONFIG)
    status, headers, body = await exchange(where, request(AUTH_LINE + header + b": casing\r\n"))
    assert status == 200, body
    assert headers["x-memory-id"] == "casing"
    status, _, body = await exchange(where, request(AUTH_LINE + header + b": not/valid\r\n"))
    assert status == 400
    assert_error(body, code="invalid_header")


@pytest.mark.parametrize(
    ("lines", "memory_id"),
    [
        (b"x-memory-id: kebab\r\nmemoryId: plain\r\n", "plain"),
        (b"memoryId: plain\r\nx-memory-id: kebab\r\n", "plain"),
        (b"X-Memory-Id: first\r\nx-memory-id: second\r\n", "first"),
        (b"Accept: */*\r\nmaxTokens: 330\r\nUser-Agent: t\r\nmemoryId: among-others\r\nX-Other: 1\r\n", "among-others"),
    ],
    ids=["plain-after-kebab", "plain-before-kebab", "kebab-twice", "among-other-headers"],
)
async def test_which_memory_id_header_counts(gateway: Gateway, lines: bytes, memory_id: str) -> None:
    """The plain spelling wins over x-memory-id, else the first one sent; each value stays with its name."""
    status, headers, body = await exchange(await address(gateway, MEMORY_CONFIG), request(AUTH_LINE + lines))
    assert status == 200, body
    assert headers["x-memory-id"] == memory_id


async def test_window_headers_without_a_memory_id_are_ignored(gateway: Gateway) -> None:
    data = request(AUTH_LINE + b"memoryType: nonsense\r\nx-memory-max-tokens: -1\r\n")
    status, headers, body = await exchange(await address(gateway, MEMORY_CONFIG), data)
    assert status == 200, body
    assert "x-memory-id" not in headers


async def test_a_body_after_its_headers_is_read_within_the_deadline(gateway: Gateway) -> None:
    """Headers first, the body a moment later: the read waits for the rest, not only what is there."""
    where = await address(gateway, MEMORY_CONFIG + "server: {bodyReadTimeoutSeconds: 5}\n")
    data = request(AUTH_LINE)
    head, _, body = data.partition(b"\r\n\r\n")
    reader, writer = await asyncio.open_connection(*where)
    try:
        writer.write(head + b"\r\n\r\n" + body[:10])
        await writer.drain()
        await asyncio.sleep(0.1)  # not synchronisation: only a gap, so that the body comes in two reads
        writer.write(body[10:])
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    assert raw.startswith(b"HTTP/1.1 200"), raw[:300]


async def test_a_body_announced_over_the_limit_is_refused_before_it_arrives(gateway: Gateway) -> None:
    """Only the head and a first piece are sent: the 413 comes without waiting for the rest."""
    where = await address(gateway, CONFIG)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n" + AUTH_LINE + b"Content-Length: 5000\r\n\r\n"
    reader, writer = await asyncio.open_connection(*where)
    try:
        writer.write(head + b'{"model": "m", "messages": [')
        status, _, body = parse_answer(await asyncio.wait_for(reader.readuntil(b"}}"), 10))
    finally:
        writer.close()
    assert status == 413
    assert_error(orjson.loads(body), code="request_too_large")
    assert "limit of 2000 bytes" in orjson.loads(body)["error"]["message"]


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
async def test_a_whole_body_over_the_limit_is_a_413(gateway: Gateway, gzipped: bool) -> None:
    """Sent at once with its head, so it is read without a deadline; the limit holds, also once decompressed."""
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 3000}]})
    lines = AUTH_LINE + (b"Content-Encoding: gzip\r\n" if gzipped else b"")
    status, _, answer = await exchange(await address(gateway, CONFIG), request(lines, gzip.compress(body) if gzipped else body))
    assert status == 413
    assert_error(answer, code="request_too_large")
    assert "limit of 2000 bytes" in answer["error"]["message"]

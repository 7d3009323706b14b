"""Fuzzing the edges a client controls: raw header bytes and odd JSON never make a 5xx.

The gateway runs once per session in a thread with its own event loop; the tests are plain
functions writing hand-built HTTP/1.1 over a socket, since only a raw socket sends arbitrary
bytes in a header. Every 4xx the gateway gives is OpenAI-shaped JSON. The one exception is
aiohttp's HTTP parser: a control byte in a header value breaks HTTP itself (RFC 9110 5.5), and
aiohttp answers that with its own plain-text 400 before the gateway sees the request.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config.loader import parse_config
from gateway.server import aiohttp_internals
from gateway.server.app import create_app
from tests.support.gateway import GATEWAY_KEY

CONFIG = f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
memory: {{store: memory, limits: {{maxMessages: 50, maxTokens: 5000, maxRounds: 10, maxChars: 5000}}}}
routes: {{m: {{provider: mock}}}}
"""
FUZZ = settings(
    max_examples=250,
    deadline=None,
    print_blob=True,  # CI keeps no example database: a failure prints what reproduces it
    suppress_health_check=[HealthCheck.too_slow],
)
MEMORY_HEADERS = [
    "memoryId", "memoryType", "maxMessages", "maxTokens", "maxRounds", "maxChars",
    "x-memory-id", "x-memory-type", "x-memory-max-messages", "x-memory-max-tokens",
    "x-memory-max-rounds", "x-memory-max-chars", "MAXMESSAGES", "X-Memory-Max-Tokens",
]
# Bytes HTTP forbids in a field value (RFC 9110 5.5: CTLs other than HTAB); CR, LF and NUL
# would end or break the header line, so they are never sent.
CONTROL_BYTES = frozenset(range(0x20)) - {0x09} | {0x7F}
SENDABLE = [b for b in range(256) if b not in (0x00, 0x0A, 0x0D)]
_ids = itertools.count()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def serve_in_thread(config: str) -> Iterator[int]:
    """Run the gateway on a free loopback port in a background event loop; yields the port."""
    loop = asyncio.new_event_loop()
    app = create_app(parse_config(textwrap.dedent(config)), rng=random.Random(7))
    runner = web.AppRunner(app)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return int(runner.addresses[0][1])

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="session")
def port() -> Iterator[int]:
    # Client and gateway share one GIL: a thread waking from recv() waits out the other's
    # switch interval (5 ms by default), which would double each exchange.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    try:
        yield from serve_in_thread(CONFIG)
    finally:
        sys.setswitchinterval(interval)


def exchange(port: int, head: bytes, body: bytes = b"") -> Answer:
    """Send one request (head: the header lines after the request line) and read the whole answer."""
    request = head + b"Host: 127.0.0.1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    head_bytes, _, payload = bytes(received).partition(b"\r\n\r\n")
    status_line, *lines = head_bytes.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    assert "chunked" not in headers.get("transfer-encoding", ""), "these answers are never streamed"
    return Answer(int(status_line.split()[1]), headers, payload)


def chat(port: int, headers: list[tuple[bytes, bytes]], body: Any) -> Answer:
    lines = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    return exchange(port, b"POST /v1/chat/completions HTTP/1.1\r\n" + lines, orjson.dumps(body))


def auth() -> tuple[bytes, bytes]:
    return b"Authorization", b"Bearer " + GATEWAY_KEY.encode()


def hello() -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def assert_no_server_error(answer: Answer, sent: bytes) -> None:
    """Never a 5xx; a 4xx is OpenAI-shaped JSON (aiohttp's own plain text only for broken HTTP, with its internals off)."""
    assert answer.status < 500, answer
    if answer.status < 400:
        return
    if answer.headers.get("content-type", "").startswith("text/plain") and not aiohttp_internals.can_answer_errors_in_json():
        assert answer.status == 400 and CONTROL_BYTES & set(sent), answer
        return
    error = orjson.loads(answer.body)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"], answer


# Header values: any sendable byte, with the inputs that once broke the gateway mixed in:
# Unicode digits ('²' passes str.isdigit but not int), more digits than int() parses, and
# text that is valid UTF-8 but not ASCII.
header_values = st.one_of(
    st.lists(st.sampled_from(SENDABLE), max_size=40).map(bytes),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\r\n\x00"), max_size=20).map(str.encode),
    st.sampled_from(["²", "٣", "1²", "-1", "0", "+5", "1_000", " 7 ", "1e3", "0x10"]).map(str.encode),
    st.integers(min_value=1, max_value=6000).map(lambda n: b"9" * n),
    st.integers().map(lambda n: str(n).encode()),
)


@FUZZ
@given(headers=st.dictionaries(st.sampled_from(MEMORY_HEADERS), header_values, min_size=1, max_size=4))
def test_memory_headers_never_cause_a_server_error(port: int, headers: dict[str, bytes]) -> None:
    sent = [auth(), *((name.encode(), value) for name, value in headers.items())]
    if not any(name.lower() in ("memoryid", "x-memory-id") for name in headers):
        sent.append((b"memoryId", b"fuzz-%d" % next(_ids)))  # without one the rest are not read
    assert_no_server_error(chat(port, sent, hello()), b"".join(headers.values()))


@FUZZ
@given(
    value=st.one_of(
        header_values,
        header_values.map(lambda token: b"Bearer " + token),
        header_values.map(lambda token: b"Bearer " + GATEWAY_KEY.encode() + token),
    )
)
def test_authorization_never_causes_a_server_error(port: int, value: bytes) -> None:
    answer = chat(port, [(b"Authorization", value)], hello())
    assert_no_server_error(answer, value)
    assert answer.status in (200, 400, 401), answer


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def conversation() -> list[dict[str, Any]]:
    """A well-formed turn with a tool call, its result and content parts; the fuzz spoils parts of it."""
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "ann"},
    ]


# Where a random JSON value replaces the well-formed one: one or two spoiled places an example
# reach deeper than a conversation that is random throughout, which fails the first check.
PLACES: list[tuple[int | str, ...]] = [
    (),
    (0,), (0, "role"), (0, "content"), (0, "tool_calls"), (0, "tool_calls", 0), (0, "tool_calls", 0, "id"),
    (0, "tool_calls", 0, "type"), (0, "tool_calls", 0, "function"), (0, "tool_calls", 0, "function", "name"),
    (0, "tool_calls", 0, "function", "arguments"), (0, "tool_calls", 0, "extra"),
    (1, "role"), (1, "content"), (1, "tool_call_id"),
    (2, "content"), (2, "content", 0), (2, "content", 0, "type"), (2, "content", 0, "text"), (2, "name"),
]


def _settable(container: Any, key: int | str) -> bool:
    if isinstance(container, list):
        return isinstance(key, int) and key < len(container)
    return isinstance(container, dict) and isinstance(key, str)


def spoil(messages: Any, place: tuple[int | str, ...], value: Any) -> Any:
    """`messages` with `value` at `place`; unchanged where an earlier spoiling removed the way there."""
    if not place:
        return value
    *way, last = place
    target = messages
    for step in way:
        if not _settable(target, step):
            return messages
        target = target[step] if isinstance(target, list) else target.get(step)
    if _settable(target, last):
        target[last] = value
    return messages


@FUZZ
@given(
    spoiled=st.lists(st.tuples(st.sampled_from(PLACES), json_values), min_size=1, max_size=2),
    memory_type=st.sampled_from([b"message_window", b"token_window", b"round_window"]),
)
def test_odd_messages_never_cause_a_server_error(
    port: int, spoiled: list[tuple[tuple[int | str, ...], Any]], memory_type: bytes
) -> None:
    """Whatever a turn stored, the next turn on the same conversation still works."""
    messages: Any = conversation()
    for place, value in spoiled:
        messages = spoil(messages, place, value)
    memory = [(b"memoryId", b"fuzz-%d" % next(_ids)), (b"memoryType", memory_type)]  # windows that reach it all
    first = chat(port, [auth(), *memory], {"model": "m", "messages": messages})
    assert_no_server_error(first, b"")
    second = chat(port, [auth(), *memory], hello())
    assert second.status == 200, second

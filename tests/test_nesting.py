"""JSON nested past MAX_JSON_DEPTH is never written again by orjson: in memory's comparisons, translations, relayed answers.

too_deep itself is tested in tests/core/test_nesting.py.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from gateway.core.memory.resent import json_meaning as _json_meaning
from gateway.core.nesting import MAX_JSON_DEPTH
from gateway.core.translate.messages.answer import tool_input as _tool_input
from tests.support.fakes import FakeUpstream, Step
from tests.support.gateway import Gateway
from tests.support.nesting import nested


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 211, 252])
def test_deep_tool_arguments_are_compared_and_translated_as_text(depth: int) -> None:
    """A tool call's arguments in memory's comparison and in a tool_use input are a client's JSON inside a string."""
    arguments = nested(depth)
    assert _json_meaning(arguments) == arguments
    assert _tool_input(arguments) == {"_raw": arguments}


def test_shallow_tool_arguments_are_still_parsed() -> None:
    arguments = '{"b": [1, {"c": 2}], "a": true}'
    assert _json_meaning(arguments) == b'{"a":true,"b":[1,{"c":2}]}'
    assert _tool_input(arguments) == {"b": [1, {"c": 2}], "a": True}


def _deep_answer(depth: int) -> bytes:
    """A chat completion carrying a field nested `depth` levels deep, in the standard library's spelling."""
    answer = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
              "extra": json.loads("[" * (depth - 1) + "]" * (depth - 1))}  # fmt: skip
    return json.dumps(answer).encode()


@pytest.mark.parametrize("stream", [False, True])
async def test_an_upstream_answer_nested_too_deep_is_a_malformed_answer_and_the_fallback_answers(
    gateway: Gateway, make_upstream: Callable[..., Awaitable[FakeUpstream]], stream: bool
) -> None:
    """Relayed, stored or translated, it would be written again by orjson, which may write past its buffer."""
    deep = await make_upstream(Step(body=_deep_answer(212)))
    if stream:
        deep.default = Step(events=[b"data: " + _deep_answer(212) + b"\n\n", b"data: [DONE]\n\n"])
    steady = await make_upstream()
    client = await gateway(f"""
        routes:
          r:
            strategy: {{mode: fallback}}
            targets:
              - {{name: deep, provider: openai, baseUrl: "{deep.url}"}}
              - {{name: steady, provider: openai, baseUrl: "{steady.url}"}}
    """)
    messages: Any = [{"role": "user", "content": "hi"}]
    raw = await client.chat.completions.with_raw_response.create(model="r", messages=messages, stream=stream)
    assert raw.http_response.status_code == 200
    assert raw.headers["x-gateway-target"] == "steady" and deep.calls == 1

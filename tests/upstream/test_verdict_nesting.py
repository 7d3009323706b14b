"""An upstream answer nested past MAX_JSON_DEPTH is a malformed answer (verdict.judge_reply, and core.chunks for streams).

Relayed, stored or translated, it would be written again by orjson, which may write past its buffer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.fakes import FakeUpstream, Step
from tests.support.gateway import Gateway


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

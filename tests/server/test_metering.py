"""gateway.server.metering: the answer text a governed stream relays, counted chunk by chunk, and passed on to a memory turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.server.metering import Meter, answer_characters


@pytest.mark.parametrize(
    ("chunk", "characters"),
    [
        ({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}}]}, 5),
        ({"choices": [{"delta": {"content": "ab"}}, {"delta": {"content": "cde"}}]}, 5),  # n > 1
        ({"choices": [{"delta": {"refusal": "no"}}]}, 2),
        ({"choices": [{"delta": {"reasoning_content": "hmm", "content": "ok"}}]}, 5),
        ({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a":'}}]}}]}, 5),
        ({"choices": [{"index": 0, "text": "legacy"}]}, 6),  # /v1/completions
        ({"choices": [], "usage": {"prompt_tokens": 1}}, 0),
        ({"choices": [{"delta": {}, "finish_reason": "stop"}]}, 0),
        ({"choices": [{"delta": {"content": None, "tool_calls": [None, {"function": None}]}}, 7, None]}, 0),
        ({"type": "response.output_text.delta", "delta": "Hello", "sequence_number": 3}, 5),  # Responses API
        ({"type": "response.function_call_arguments.delta", "delta": '{"a":'}, 5),
        ({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}, 2),  # Anthropic
        ({"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": '{"q"'}}, 4),
        ({"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "hmm"}}, 3),
        ({"type": "content_block_delta", "delta": {"type": "signature_delta", "signature": "c2ln"}}, 0),
        ({"type": "response.created", "delta": 7}, 0),
        ({"choices": "x"}, 0),
        ([1, 2], 0),
        (None, 0),
    ],
)
def test_the_answer_text_of_a_chunk_is_counted_and_an_odd_shape_counts_nothing(chunk: Any, characters: int) -> None:
    assert answer_characters(chunk) == characters


class Turn:
    """A memory turn's side of the sink: what it was fed, whether it was finished."""

    def __init__(self) -> None:
        self.fed: list[Any] = []
        self.finished = False

    def feed(self, chunk: Any) -> None:
        self.fed.append(chunk)

    async def finish(self) -> None:
        self.finished = True


@pytest.mark.parametrize("with_turn", [True, False])
def test_a_meter_counts_what_it_relays_and_passes_every_chunk_on(with_turn: bool) -> None:
    meter, turn = Meter(prompt_tokens=3), Turn()
    sink = meter.counting(turn if with_turn else None)
    chunks = [{"choices": [{"delta": {"content": "x" * n}}]} for n in (4, 5)]
    for chunk in chunks:
        sink.feed(chunk)
    asyncio.run(sink.finish())
    assert (meter.characters, meter.completion_tokens) == (9, 3)  # rounded up, as the prompt's estimate is
    assert (turn.fed, turn.finished) == ((chunks, True) if with_turn else ([], False))

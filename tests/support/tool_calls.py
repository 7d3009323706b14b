"""A scripted upstream that calls the weather tool: the call, as one JSON answer and as a stream."""

from __future__ import annotations

from typing import Any

from tests.support.fakes import chat_completion, chunk

QUESTION = {"role": "user", "content": "Weather in Paris?"}
# the upstream writes arguments compact; LangChain resends them as json.dumps does: '{"city": "Paris"}'
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
CALLING = {"role": "assistant", "tool_calls": [CALL]}


def calling_answer(calling: dict[str, Any] = CALLING) -> dict[str, Any]:
    """A chat completion whose message is `calling` (tool calls), finished for tool_calls."""
    answer = chat_completion()
    answer["choices"][0].update(message={**calling, "content": None}, finish_reason="tool_calls")
    return answer


def calling_stream() -> list[Any]:
    """CALL streamed: its name first, its arguments in two pieces, finished for tool_calls."""
    opening = {**CALL, "index": 0, "function": {"name": "get_weather", "arguments": ""}}
    return [
        chunk({"role": "assistant", "content": None, "tool_calls": [opening]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]

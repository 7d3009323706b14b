"""A chat completion as a Responses `response` object: its message and tool calls as output items."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.pieces import TextPieces
from gateway.core.translate import MalformedAnswer
from gateway.core.translate.responses.checks import ANSWER, answer_text
from gateway.core.translate.responses.reply import PART_KEYS, Call, Message, Part, Reply, model_of


def from_chat(
    answer: Any, *, request: Mapping[str, Any], response_id: str, created_at: int
) -> dict[str, Any]:
    """The Responses `response` object for a chat completion; MalformedAnswer if it is not one."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedAnswer("the upstream answer is not a chat completion (no choices)")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedAnswer("choices[0].message is not an object")
    reply = Reply(request, response_id, created_at, model=model_of(answer, request), usage=answer.get("usage"))
    at = "choices[0].message"
    parts = [Part(kind, TextPieces(text)) for kind, key in PART_KEYS
             if (text := answer_text(message.get(key), f"{at}.{key}"))]
    if parts:
        reply.items.append(Message(parts))
    calls = message.get("tool_calls")
    for number, call in enumerate(ANSWER.array(calls, f"{at}.tool_calls") if calls is not None else ()):
        where = f"{at}.tool_calls[{number}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise MalformedAnswer(f"{where}.function is not an object")
        name = answer_text(function.get("name"), f"{where}.function.name")
        if not name:
            raise MalformedAnswer(f"{where}.function.name is missing")
        call_id = answer_text(call.get("id"), f"{where}.id") or f"call_{response_id}_{number}"
        arguments = answer_text(function.get("arguments"), f"{where}.function.arguments") or ""
        reply.items.append(item := Call(call_id, name, TextPieces(arguments)))
        reply.name(item)
    finish = choices[0].get("finish_reason")
    reply.finish_reason = finish if isinstance(finish, str) else None
    return reply.render(final=True)

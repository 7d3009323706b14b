"""The parts of a message memory keeps, and how long its text is: pure functions, no I/O.

An assistant's refusal (OpenAI's structured outputs: `refusal` set, `content` null) is kept, and
its text is the message's content too when it has none: OpenAI's chat API takes `refusal` on an
assistant message it is sent, but other upstreams, and litellm's translations for them, read the
content alone (litellm drops an assistant message without content for Anthropic, say).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.core.memory.entries import Message

SYSTEM_ROLES: Final = frozenset({"system", "developer"})
_KEPT_KEYS: Final = ("role", "content", "name", "tool_calls", "tool_call_id")
_PLAIN_KEYS: Final = frozenset(_KEPT_KEYS) - {"tool_calls"}


def normalize(message: Mapping[str, Any]) -> Message:
    """The parts of a message that memory keeps; None values, empty tool_calls and client extras are dropped.

    An assistant's refusal is kept, and is its content when it has none (see the module's docstring).

    A message already in shape (the common case) is kept as it is, not copied: stored and
    forwarded messages are never changed in place.
    """
    if message.keys() <= _PLAIN_KEYS and None not in message.values():
        return message  # type: ignore[return-value]
    out: Message = {key: message[key] for key in _KEPT_KEYS if message.get(key) is not None}
    refusal = message.get("refusal")
    if refusal and type(refusal) is str and out.get("role") == "assistant":
        out.setdefault("content", refusal)
        out["refusal"] = refusal
    calls = out.get("tool_calls")
    if calls == []:  # some upstreams add it to a plain answer; forwarded, it is a 400 at OpenAI
        del out["tool_calls"]
    elif isinstance(calls, list):
        out["tool_calls"] = [_normalize_call(call) for call in calls]
    return out


def _normalize_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    function = call.get("function")
    if not isinstance(function, dict):
        function = {}
    return {
        "id": call.get("id"),
        "type": call.get("type", "function"),
        "function": {"name": function.get("name"), "arguments": function.get("arguments", "")},
    }


def text_length(message: Mapping[str, Any]) -> int:
    """Characters of content: a string's, or the text parts' of a list."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return 0

"""How much of a new turn is a client's resent copy of the stored history: pure functions, no I/O.

A client that keeps its own copy of the conversation resends it, whole or its tail, at the start
of each turn. Memory stores the history already, so that copy is left out of the new turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import methodcaller
from typing import Any

import orjson

from gateway.core.memory.entries import Message
from gateway.core.nesting import too_deep

ROLE = methodcaller("get", "role")  # a message's role, mapped over messages in C


def resent_length(stored: Sequence[Message], turn: Sequence[Message]) -> int:
    """How many messages at the start of `turn` repeat the end of `stored`: 0 when none do.

    A client that keeps its own copy resends the whole history, or only its tail when it trims
    its copy (LangChain's `trim_messages`): either way the repeat is the longest run that starts
    the turn and ends where the stored history ends. A repeat ends with the last stored message,
    a reply of the model's, so a turn that merely begins like the history does not count.
    Messages match by bytes, or failing that by meaning (see `meaning`).
    """
    size = len(stored)
    if not size or not turn:
        return 0
    if turn[:size] == stored:  # the whole history, resent as it was stored
        return size
    width = min(len(turn), size)
    last_role = stored[-1].get("role")
    if last_role not in map(ROLE, turn[:width]):  # the common case: a new turn only
        return 0
    if width == size and all(
        mine == theirs or meaning(mine) == meaning(theirs) for mine, theirs in zip(stored, turn[:size], strict=True)
    ):
        return size
    return longest_overlap([meaning(m) for m in turn[:width]], [meaning(m) for m in stored[size - width :]])


def longest_overlap(head: Sequence[object], tail: Sequence[object]) -> int:
    """The length of the longest start of `head` that is also an end of `tail` (Knuth-Morris-Pratt).

    Linear in their lengths, so a long history full of look-alike messages costs no more.
    """
    border = [0] * len(head)  # border[i]: longest proper start of head[: i + 1] that also ends it
    for i in range(1, len(head)):
        k = border[i - 1]
        while k and head[i] != head[k]:
            k = border[k - 1]
        border[i] = k + 1 if head[i] == head[k] else 0
    matched = 0
    for item in tail:
        while matched and (matched == len(head) or item != head[matched]):
            matched = border[matched - 1]
        if item == head[matched]:
            matched += 1
    return matched


def meaning(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a message says, for telling a client's re-serialized copy from a different message.

    Tool-call arguments count as parsed JSON, content made of text parts only as the joined
    string, an assistant's empty content as none, and an assistant's name not at all (LangChain's
    `create_agent(name=...)` stamps it on every reply it resends; replies are stored without one).
    """
    role = message.get("role")
    content = message.get("content")
    if isinstance(content, list) and all(_is_text_part(part) for part in content):
        content = "".join(part["text"] for part in content)
    if role == "assistant" and content == "":
        content = None
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        calls = [_call_meaning(call) for call in calls] or None
    name = None if role == "assistant" else message.get("name")
    return (role, content, name, calls, message.get("tool_call_id"))


def _is_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)


def _call_meaning(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    function = call.get("function")
    if isinstance(function, dict):
        function = (function.get("name"), json_meaning(function.get("arguments")))
    return (call.get("id"), call.get("type") or "function", function)


def json_meaning(arguments: Any) -> Any:
    """JSON text in one canonical spelling; anything that does not parse stays as it is.

    Re-serialized rather than compared parsed, so `true` is not `1`. Integers past 64 bits
    compare as floats (orjson's reading), a price paid for orjson's speed over the stdlib's.
    """
    if not isinstance(arguments, str):
        return arguments
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if too_deep(arguments, parsed):  # orjson may write past its buffer on such nesting
        return arguments
    return orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS)

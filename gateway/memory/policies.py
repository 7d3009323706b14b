"""What a memory-backed request forwards: pure functions, no I/O.

Given the stored system messages S, the stored history H and the request's messages M:
system/developer messages in M replace S; the rest of M is the new turn N (minus a resent copy
of H at its start); N is always forwarded whole and only H is trimmed, by one of three windows.
Tool calls and their results are evicted together, and forwarded history never starts with an
orphaned tool result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.memory.settings import MemorySettings

Message = dict[str, Any]
TokenCounter = Callable[[Message], int]

SYSTEM_ROLES = frozenset({"system", "developer"})
NOTICE = "Notice: Chat history truncated due to maximum context window. "
REPLY_PRIMING = 3
_KEPT_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored message with its token counts, computed once when it was stored."""

    message: Message
    tokens: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Plan:
    """The forwarded messages, and the turn to store if the request succeeds."""

    forwarded: list[Message]
    system: list[Message]
    system_changed: bool
    new_turn: list[Message]
    history_kept: int
    evicted: int


def normalize(message: Mapping[str, Any]) -> Message:
    """The parts of a message that memory keeps; None values and client extras are dropped."""
    out: Message = {key: message[key] for key in _KEPT_KEYS if message.get(key) is not None}
    calls = out.get("tool_calls")
    if isinstance(calls, list):
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


def plan_turn(
    stored_system: Sequence[Message],
    history: Sequence[Entry],
    messages: Sequence[Mapping[str, Any]],
    settings: MemorySettings,
    *,
    count: TokenCounter,
    encoding: str,
) -> Plan:
    """Merge the request with the stored conversation and trim the history by `settings`."""
    given_system = [normalize(m) for m in messages if m.get("role") in SYSTEM_ROLES]
    turn = [normalize(m) for m in messages if m.get("role") not in SYSTEM_ROLES]
    system = given_system or list(stored_system)
    stored = [entry.message for entry in history]
    if stored and turn[: len(stored)] == stored:
        turn = turn[len(stored) :]

    groups = _groups(stored)
    if settings.memory_type == "token_window":
        fixed = sum(count(m) for m in system) + sum(count(m) for m in turn) + REPLY_PRIMING
        tokens = [_tokens(entry, encoding, count) for entry in history]
        costs = [tokens[g[0]] if len(g) == 1 else sum(tokens[i] for i in g) for g in groups]
        kept_groups = _newest_that_fit(costs, settings.max_tokens - fixed)
        kept = [stored[i] for g in groups[len(groups) - kept_groups :] for i in g]
    elif settings.memory_type == "round_window":
        kept = _round_window(stored, groups, turn, settings)
    else:
        kept_groups = _newest_that_fit([len(g) for g in groups], settings.max_messages - len(turn))
        kept = [stored[i] for g in groups[len(groups) - kept_groups :] for i in g]
    return Plan(
        forwarded=[*system, *kept, *turn],
        system=system,
        system_changed=bool(given_system) and given_system != list(stored_system),
        new_turn=turn,
        history_kept=len(kept),
        evicted=len(stored) - len(kept),
    )


def _tokens(entry: Entry, encoding: str, count: TokenCounter) -> int:
    cached = entry.tokens.get(encoding)
    return cached if cached is not None else count(entry.message)


def _groups(messages: Sequence[Message]) -> list[list[int]]:
    """Indivisible units of history: an assistant tool call with its results, or one message.

    A tool result whose call is not right before it (an orphan) belongs to no unit and so is
    never forwarded.
    """
    groups: list[list[int]] = []
    open_calls: set[Any] = set()
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            if open_calls and message.get("tool_call_id") in open_calls:
                groups[-1].append(index)
            continue
        calls = message.get("tool_calls")
        open_calls = {c.get("id") for c in calls if isinstance(c, dict)} if calls else set()
        groups.append([index])
    return groups


def _newest_that_fit(costs: Sequence[int], budget: int) -> int:
    """How many of the newest units fit in `budget`; the first that does not fit stops it."""
    total = kept = 0
    for cost in reversed(costs):
        if total + cost > budget:
            break
        total += cost
        kept += 1
    return kept


def _round_window(
    stored: Sequence[Message], groups: list[list[int]], turn: Sequence[Message], settings: MemorySettings
) -> list[Message]:
    """The last `maxRounds` rounds, then oldest-first eviction and front truncation for `maxChars`."""
    round_starts = [g for g, group in enumerate(groups) if stored[group[0]].get("role") == "user"]
    first = round_starts[-settings.max_rounds] if len(round_starts) >= settings.max_rounds else 0
    units = [[stored[i] for i in group] for group in groups[first:]]
    budget = settings.max_chars - sum(text_length(m) for m in turn)
    costs = [sum(text_length(m) for m in unit) for unit in units]
    if sum(costs) <= budget:
        return [m for unit in units for m in unit]

    room = budget - len(NOTICE)
    fitting = _newest_that_fit(costs, room)
    kept_units = units[len(units) - fitting :]
    if not kept_units and units and room > 0:
        last = units[-1]
        if len(last) == 1 and isinstance(last[0].get("content"), str):  # cut its beginning
            message = last[0]
            kept_units = [[{**message, "content": message["content"][len(message["content"]) - room :]}]]
    kept = [dict(m) for unit in kept_units for m in unit]
    if kept:
        kept[0] = _with_notice(kept[0])
    return kept


def _with_notice(message: Message) -> Message:
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [{"type": "text", "text": NOTICE}, *content]}
    return {**message, "content": NOTICE + (content if isinstance(content, str) else "")}

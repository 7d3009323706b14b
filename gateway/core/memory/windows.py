"""The windows that trim a stored history: pure functions, no I/O.

A message window keeps the newest messages, a token window the newest whose counts fit its
budget (both by `newest_that_fit`), a round window the last rounds within a character budget
(`round_window`). A tool call and its results are one unit, kept or evicted together, and a
result whose call is gone is never kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import contains
from types import MappingProxyType
from typing import Final

from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.messages import text_length

NOTICE: Final = "Notice: Chat history truncated due to maximum context window. "
_NO_COUNTS: Mapping[str, int] = MappingProxyType({})


def newest_that_fit(
    history: Sequence[Entry], budget: int, cost: Callable[[Entry], int] | None
) -> tuple[list[Message], bool]:
    """The newest units whose costs (one each when `cost` is None) fit in `budget`, and whether the walk ran out.

    The first unit that does not fit stops the walk, so it ends as soon as the window is full,
    whatever the length of the history; plain messages (the common case) take the short way
    through the loop. Running out (everything fitted, or a run of tool results whose call is not
    in `history`) means older history, had it been given, could have changed the result.
    """
    kept: list[Message] = []  # newest first
    total = 0
    end = len(history) - 1
    while end >= 0:
        entry = history[end]
        if entry.message.get("role") != "tool":
            total += 1 if cost is None else cost(entry)
            if total > budget:
                kept.reverse()
                return kept, False
            kept.append(entry.message)
            end -= 1
            continue
        head, unit = _unit_ending_at(history, end)
        if head < 0:
            break
        total += len(unit) if cost is None else sum(cost(history[i]) for i in unit)
        if total > budget:
            kept.reverse()
            return kept, False
        kept.extend(history[i].message for i in reversed(unit))
        end = head - 1
    kept.reverse()
    return kept, True


def round_window(
    history: Sequence[Entry], turn: Sequence[Message], *, max_rounds: int, max_chars: int
) -> tuple[list[Message], bool]:
    """The last `max_rounds` rounds, then oldest-first eviction and front truncation for `max_chars`.

    Also whether older history could have changed it: fewer rounds than `max_rounds` were found
    and all of them fitted `max_chars`.
    """
    units: list[list[Message]] = []  # newest first
    rounds = 0
    for unit in _units_newest_first(history):
        units.append([history[i].message for i in unit])
        if units[-1][0].get("role") == "user":
            rounds += 1
            if rounds == max_rounds:
                break
    candidates = [m for unit in reversed(units) for m in unit]
    costs = [text_length(m) for m in candidates]
    budget = max_chars - sum(text_length(m) for m in turn)
    if sum(costs) <= budget:
        return candidates, rounds < max_rounds

    room = budget - len(NOTICE)
    # over budget: older history changes nothing
    kept, _ = newest_that_fit([Entry(m, _NO_COUNTS) for m in candidates], room, _text_cost)
    if not kept and units and room > 0:
        newest = units[0]
        if len(newest) == 1 and isinstance(newest[0].get("content"), str):  # cut its beginning
            content = newest[0]["content"]
            kept = [{**newest[0], "content": content[len(content) - room :]}]
    if kept:
        kept[0] = _with_notice(kept[0])
    return kept, False


def without_unanswered_calls(kept: list[Message], turn: Sequence[Message]) -> list[Message]:
    """History whose tool calls are all answered: a call left unanswered would fail every later turn.

    An assistant message whose calls are not all answered by the tool results right after it
    (a client that moved on without running the tools) loses its calls, and the message goes
    if nothing else is left; its partial results go with them. Calls answered by the new turn's
    leading tool results are the client answering now, and stay.
    """
    if not any(map(contains, kept, repeat("tool_calls"))):  # most histories: no calls at all
        return kept
    out: list[Message] = []
    index = 0
    while index < len(kept):
        message = kept[index]
        index += 1
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            out.append(message)
            continue
        end = index
        while end < len(kept) and kept[end].get("role") == "tool":
            end += 1
        answered = {m.get("tool_call_id") for m in kept[index:end] if isinstance(m.get("tool_call_id"), str)}
        listed = calls if isinstance(calls, list) else []
        wanted = {c.get("id") for c in listed if isinstance(c, dict) and isinstance(c.get("id"), str)}
        answering_now = end == len(kept) and bool(turn) and turn[0].get("role") == "tool"
        if listed and (answering_now or (wanted <= answered and len(wanted) == len(listed))):
            out.append(message)
            continue
        bare = {key: value for key, value in message.items() if key != "tool_calls"}
        if bare.get("content"):
            out.append(bare)
        index = end  # its partial results would be orphans
    return out


def _unit_ending_at(history: Sequence[Entry], end: int) -> tuple[int, list[int]]:
    """The indivisible unit that ends at `end`: (index of its head, its indices oldest first).

    A run of tool results belongs to the assistant message right before it, keeping only the
    results that answer one of its calls; results that answer nothing (orphans) are left out,
    so forwarded history never holds a result whose call is gone. Head -1: orphans only.
    """
    head = end
    while head >= 0 and history[head].message.get("role") == "tool":
        head -= 1
    if head < 0:
        return head, []
    calls = history[head].message.get("tool_calls")
    # only string ids count: a stored id or tool_call_id of another type (a JSON array) is unhashable
    ids = {c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)} if isinstance(calls, list) else set()
    return head, [head, *(i for i in range(head + 1, end + 1) if _answered_id(history[i].message) in ids)]


def _answered_id(message: Message) -> str | None:
    call_id = message.get("tool_call_id")
    return call_id if isinstance(call_id, str) else None


def _units_newest_first(history: Sequence[Entry]) -> Iterator[list[int]]:
    """Indivisible units of history, newest first (see `_unit_ending_at`)."""
    end = len(history) - 1
    while end >= 0:
        if history[end].message.get("role") != "tool":
            yield [end]
            end -= 1
            continue
        head, unit = _unit_ending_at(history, end)
        if head < 0:
            return
        yield unit
        end = head - 1


def _text_cost(entry: Entry) -> int:
    return text_length(entry.message)


def _with_notice(message: Message) -> Message:
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [{"type": "text", "text": NOTICE}, *content]}
    return {**message, "content": NOTICE + (content if isinstance(content, str) else "")}

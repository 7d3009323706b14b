"""What a memory-backed request forwards: pure functions, no I/O.

Given the stored system messages S, the stored history H and the request's messages M:
system/developer messages in M replace S; the rest of M is the new turn N (minus a resent copy
of H, or of a tail of H, at its start); N is always forwarded whole and only H is trimmed, by one
of three windows. Tool calls and their results are evicted together, and forwarded history never
starts with an orphaned tool result. Whatever a store holds, planning does not raise.

H may be only the newest part of what is stored (`older` entries were not read): the plan is
the same as over the whole history unless it says `wants_older`, when the window reached the
oldest entry it was given (or a resent copy may reach further back) and a wider read is due.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import contains, methodcaller
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.settings import MemorySettings
from gateway.core.nesting import too_deep

TokenCounter = Callable[[Message], int]

SYSTEM_ROLES = frozenset({"system", "developer"})
NOTICE = "Notice: Chat history truncated due to maximum context window. "
REPLY_PRIMING = 3
_KEPT_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
_PLAIN_KEYS = frozenset(_KEPT_KEYS) - {"tool_calls"}
_NO_COUNTS: Mapping[str, int] = MappingProxyType({})
_ROLE = methodcaller("get", "role")




class Plan(NamedTuple):
    """The forwarded messages, and the turn to store if the request succeeds."""

    forwarded: list[Message]
    system: list[Message]
    system_changed: bool
    new_turn: list[Message]
    history_kept: int
    evicted: int
    wants_older: bool = False  # older history, not given, could change this plan: read more, plan again
    turn_tokens: list[int] | None = None  # the new turn's counts in the plan's encoding, when the window took them


def normalize(message: Mapping[str, Any]) -> Message:
    """The parts of a message that memory keeps; None values, empty tool_calls and client extras are dropped.

    A message already in shape (the common case) is kept as it is, not copied: stored and
    forwarded messages are never changed in place.
    """
    if message.keys() <= _PLAIN_KEYS and None not in message.values():
        return message  # type: ignore[return-value]
    out: Message = {key: message[key] for key in _KEPT_KEYS if message.get(key) is not None}
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


def plan_turn(
    stored_system: Sequence[Message],
    history: Sequence[Entry],
    messages: Sequence[Mapping[str, Any]],
    settings: MemorySettings,
    *,
    count: TokenCounter,
    encoding: str,
    older: int = 0,
    plain: PlainHistory | None = None,
) -> Plan:
    """Merge the request with the stored conversation and trim the history by `settings`.

    `history` is the newest part of the stored history; `older` entries before it were not read.
    `plain`, when given, is `history` kept as a PlainHistory: the same plan, found without a walk.
    """
    given_system: list[Message] = []
    turn: list[Message] = []
    for message in messages:  # one pass, each message to its list
        (given_system if message.get("role") in SYSTEM_ROLES else turn).append(normalize(message))
    system = given_system or list(stored_system)
    # Only the newest messages are looked at: as many as the new turn for a resent copy, and as
    # many as the window walks over, so planning costs the same whatever the length of `history`.
    if not turn:
        recent: Sequence[Message] = []
    elif plain is not None:
        recent = plain.messages[-len(turn) :]
    else:
        recent = [entry.message for entry in history[max(len(history) - len(turn), 0) :]]
    resent_beyond = len(turn) > len(history)  # a resent copy could start before what was read
    # A resent copy holds the last stored message, so a turn with no message of its role has none:
    # the common case (a question after a reply) is told here, without resent_length's call.
    if recent and recent[-1].get("role") in map(_ROLE, turn):
        turn = turn[resent_length(recent, turn) :]
    turn_tokens = None

    if settings.memory_type == "token_window":
        # Plain loops, not map(): a Python function called from C costs ~1k instructions more a call.
        turn_tokens = []
        for message in turn:
            turn_tokens.append(count(message))
        budget = settings.max_tokens - sum(turn_tokens) - REPLY_PRIMING
        for message in system:
            budget -= count(message)
        window = plain.newest_within(encoding, budget) if plain is not None else None
        if window is not None:  # the common case: every message stored with its count
            kept, exhausted = window
        else:

            def tokens(entry: Entry) -> int:
                return entry.tokens.get(encoding) or count(entry.message)

            kept, exhausted = _newest_that_fit(history, budget, tokens)
    elif settings.memory_type == "round_window":
        kept, exhausted = _round_window(history, turn, settings)
    elif plain is not None:
        kept, exhausted = plain.newest(settings.max_messages - len(turn))
    else:
        kept, exhausted = _newest_that_fit(history, settings.max_messages - len(turn), None)
    if plain is None:  # a plain history has no tool calls to leave unanswered
        kept = _without_unanswered_calls(kept, turn)
    # tuple.__new__, as Plan._make does inside: a NamedTuple's own constructor is a Python
    # function called from C (~3k instructions a call)
    return tuple.__new__(Plan, (
        [*system, *kept, *turn],
        system,
        bool(given_system) and given_system != list(stored_system),
        turn,
        len(kept),
        older + len(history) - len(kept),
        older > 0 and (exhausted or resent_beyond),
        turn_tokens,
    ))  # fmt: skip


class CommonTurn(NamedTuple):
    """A request of the common shape: one system (or developer) message, then one user question.

    Both are `{role, content}` with string content; their counts are in the window's encoding.
    """

    system: Message
    question: Message
    system_tokens: int
    question_tokens: int


def plan_common_turn(
    turn: CommonTurn, conversation: Conversation | None, *, max_tokens: int, encoding: str
) -> Plan | None:
    """The plan of the common turn under a token window, found without plan_turn's walk; None when the conversation is not common.

    The common turn: a CommonTurn under a token window of `max_tokens`, counted in `encoding`.
    Its conversation is a first one (None), or a plain
    history (`conversation.plain`, no tool messages) counted in `encoding` whose last message is
    not a user's (a question could then resend it), read far enough back for the window (else
    the plan would want older history). Over such a conversation this is the plan plan_turn
    gives, tests/memory/test_turn_plans.py shows, with no call per message; over any other,
    None: plan_turn plans it (and a wider read follows).
    """
    system, question, system_tokens, question_tokens = turn
    if conversation is None:  # the conversation's first turn: nothing stored, nothing to read further
        return tuple.__new__(Plan, ([system, question], [system], True, [question], 0, 0, False, [question_tokens]))
    plain = conversation.plain
    if plain is None:
        return None
    history = plain.messages
    if history and history[-1].get("role") == "user":  # the question may be a resent copy of it
        return None
    window = plain.newest_within(encoding, max_tokens - question_tokens - REPLY_PRIMING - system_tokens)
    if window is None:  # not every message counted in `encoding`
        return None
    kept, exhausted = window
    stored, older = conversation.system, conversation.older
    # Every message read fits (none read fits too): older ones, not read, could fit as well. That
    # plan wants older history, which Memory._plan reads after plan_turn's plan.
    if exhausted and older:
        return None
    return tuple.__new__(Plan, (
        [system, *kept, question],
        [system],
        len(stored) != 1 or stored[0] != system,
        [question],
        len(kept),
        older + len(conversation.entries) - len(kept),
        False,  # wants_older: the window stops within what was read (or nothing is older)
        [question_tokens],
    ))  # fmt: skip


def _without_unanswered_calls(kept: list[Message], turn: Sequence[Message]) -> list[Message]:
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


def resent_length(stored: Sequence[Message], turn: Sequence[Message]) -> int:
    """How many messages at the start of `turn` repeat the end of `stored`: 0 when none do.

    A client that keeps its own copy resends the whole history, or only its tail when it trims
    its copy (LangChain's `trim_messages`): either way the repeat is the longest run that starts
    the turn and ends where the stored history ends. A repeat ends with the last stored message,
    a reply of the model's, so a turn that merely begins like the history does not count.
    Messages match by bytes, or failing that by meaning (see `_meaning`).
    """
    size = len(stored)
    if not size or not turn:
        return 0
    if turn[:size] == stored:  # the whole history, resent as it was stored
        return size
    width = min(len(turn), size)
    last_role = stored[-1].get("role")
    if last_role not in map(_ROLE, turn[:width]):  # the common case: a new turn only
        return 0
    if width == size and all(
        mine == theirs or _meaning(mine) == _meaning(theirs) for mine, theirs in zip(stored, turn[:size], strict=True)
    ):
        return size
    return _longest_overlap([_meaning(m) for m in turn[:width]], [_meaning(m) for m in stored[size - width :]])


def _longest_overlap(head: Sequence[object], tail: Sequence[object]) -> int:
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


def _meaning(message: Mapping[str, Any]) -> tuple[Any, ...]:
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
        function = (function.get("name"), _json_meaning(function.get("arguments")))
    return (call.get("id"), call.get("type") or "function", function)


def _json_meaning(arguments: Any) -> Any:
    """JSON text in one canonical spelling; anything that does not parse stays as it is.

    Re-serialized rather than compared parsed, so `true` is not `1`. Integers past 64 bits
    compare as floats (orjson's reading), a price paid for being ~20x faster than the stdlib.
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


def _newest_that_fit(
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


def _text_cost(entry: Entry) -> int:
    return text_length(entry.message)


def _round_window(
    history: Sequence[Entry], turn: Sequence[Message], settings: MemorySettings
) -> tuple[list[Message], bool]:
    """The last `maxRounds` rounds, then oldest-first eviction and front truncation for `maxChars`.

    Also whether older history could have changed it: fewer rounds than `maxRounds` were found
    and all of them fitted `maxChars`.
    """
    units: list[list[Message]] = []  # newest first
    rounds = 0
    for unit in _units_newest_first(history):
        units.append([history[i].message for i in unit])
        if units[-1][0].get("role") == "user":
            rounds += 1
            if rounds == settings.max_rounds:
                break
    candidates = [m for unit in reversed(units) for m in unit]
    costs = [text_length(m) for m in candidates]
    budget = settings.max_chars - sum(text_length(m) for m in turn)
    if sum(costs) <= budget:
        return candidates, rounds < settings.max_rounds

    room = budget - len(NOTICE)
    # over budget: older history changes nothing
    kept, _ = _newest_that_fit([Entry(m, _NO_COUNTS) for m in candidates], room, _text_cost)
    if not kept and units and room > 0:
        newest = units[0]
        if len(newest) == 1 and isinstance(newest[0].get("content"), str):  # cut its beginning
            content = newest[0]["content"]
            kept = [{**newest[0], "content": content[len(content) - room :]}]
    if kept:
        kept[0] = _with_notice(kept[0])
    return kept, False


def _with_notice(message: Message) -> Message:
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [{"type": "text", "text": NOTICE}, *content]}
    return {**message, "content": NOTICE + (content if isinstance(content, str) else "")}

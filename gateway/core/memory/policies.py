"""What a memory-backed request forwards: pure functions, no I/O.

Given the stored system messages S, the stored history H and the request's messages M:
system/developer messages in M replace S; the rest of M is the new turn N (minus a resent copy
of H, or of a tail of H, at its start: see `resent`); N is always forwarded whole and only H is
trimmed, by one of three windows (see `windows`). Tool calls and their results are evicted
together, and forwarded history never starts with an orphaned tool result. Whatever a store
holds, planning does not raise.

H may be only the newest part of what is stored (`older` entries were not read): the plan is
the same as over the whole history unless it says `wants_older`, when the window reached the
oldest entry it was given (or a resent copy may reach further back) and a wider read is due.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.messages import SYSTEM_ROLES, normalize
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.resent import ROLE, resent_length
from gateway.core.memory.settings import ROUND_WINDOW, TOKEN_WINDOWS, MemorySettings
from gateway.core.memory.windows import newest_that_fit, round_window, without_unanswered_calls

TokenCounter = Callable[[Message], int]

REPLY_PRIMING: Final = 3  # tokens every reply is primed with (OpenAI's cookbook), kept free in a token window


@dataclass(slots=True)  # not a NamedTuple: made on every turn, and a NamedTuple is slower to make
class Plan:
    """The forwarded messages, and the turn to store if the request succeeds (made by `make_plan`)."""

    forwarded: list[Message]
    system: list[Message]
    system_changed: bool
    new_turn: list[Message]
    history_kept: int
    evicted: int
    wants_older: bool = False  # older history, not given, could change this plan: read more, plan again
    turn_tokens: list[int] | None = None  # the new turn's counts in the plan's encoding, when the window took them


def make_plan(
    *, forwarded: list[Message], system: list[Message], system_changed: bool, new_turn: list[Message],
    history_kept: int, evicted: int, wants_older: bool = False, turn_tokens: list[int] | None = None,
) -> Plan:
    """A Plan from its fields by keyword, made in field order: calling the class with keywords would
    build a dict of them first, on every memory turn."""
    return Plan(forwarded, system, system_changed, new_turn, history_kept, evicted, wants_older, turn_tokens)


def plan_turn(
    stored_system: Sequence[Message],
    history: Sequence[Entry],
    messages: Sequence[Mapping[str, Any]],
    *,
    settings: MemorySettings,
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
    if recent and recent[-1].get("role") in map(ROLE, turn):
        turn = turn[resent_length(recent, turn) :]
    turn_tokens = None

    memory_type = settings.memory_type
    if memory_type in TOKEN_WINDOWS:  # a summary window keeps as a token window
        # A plain loop, not map(count, turn): `count` is Python, and map would call it from C, at a higher cost a call.
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

            kept, exhausted = newest_that_fit(history, budget, tokens)
    elif memory_type == ROUND_WINDOW:
        kept, exhausted = round_window(history, turn, max_rounds=settings.max_rounds, max_chars=settings.max_chars)
    elif plain is not None:
        kept, exhausted = plain.newest(settings.max_messages - len(turn))
    else:
        kept, exhausted = newest_that_fit(history, settings.max_messages - len(turn), None)
    if plain is None:  # a plain history has no tool calls to leave unanswered
        kept = without_unanswered_calls(kept, turn)
    return make_plan(
        forwarded=[*system, *kept, *turn],
        system=system,
        system_changed=bool(given_system) and given_system != list(stored_system),
        new_turn=turn,
        history_kept=len(kept),
        evicted=older + len(history) - len(kept),
        wants_older=older > 0 and (exhausted or resent_beyond),
        turn_tokens=turn_tokens,
    )


# A request of the common shape: one system (or developer) message, then one user question, both
# `{role, content}` with string content; then their counts in the window's encoding:
# (system, question, system_tokens, question_tokens). A plain tuple: made on every turn and
# unpacked at once by plan_common_turn.
CommonTurn = tuple[Message, Message, int, int]


def plan_common_turn(
    turn: CommonTurn, conversation: Conversation | None, *, max_tokens: int, encoding: str
) -> Plan | None:
    """The plan of the common turn under a token window, found without plan_turn's walk; None when the conversation is not common.

    The common turn: a CommonTurn under a token window of `max_tokens`, counted in `encoding`.
    Its conversation is a first one (None), or a plain
    history (`conversation.plain`, no tool messages) counted in `encoding` whose last message is
    not a user's (a question could then resend it), read far enough back for the window (else
    the plan would want older history). Over such a conversation this is the plan plan_turn
    gives, tests/core/memory/test_policies_common_turn.py shows, with no call per message; over any other,
    None: plan_turn plans it (and a wider read follows).
    """
    system, question, system_tokens, question_tokens = turn
    if conversation is None:  # the conversation's first turn: nothing stored, nothing to read further
        return make_plan(
            forwarded=[system, question],
            system=[system],
            system_changed=True,
            new_turn=[question],
            history_kept=0,
            evicted=0,
            turn_tokens=[question_tokens],
        )
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
    return make_plan(  # wants_older stays False: the window stops within what was read (or nothing is older)
        forwarded=[system, *kept, question],
        system=[system],
        system_changed=len(stored) != 1 or stored[0] != system,
        new_turn=[question],
        history_kept=len(kept),
        evicted=older + len(conversation.entries) - len(kept),
        turn_tokens=[question_tokens],
    )

"""The common turn's one-pass plan is the plan plan_turn gives, whenever it takes a request."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.policies import CommonTurn, plan_common_turn, plan_turn
from gateway.core.memory.settings import MemorySettings
from gateway.memory import turns
from gateway.memory.store import InProcessStore
from gateway.memory.turns import Memory, Turn
from gateway.observe.trace import Trace
from gateway.tokens import count_message, get_encoding

O200K = get_encoding("o200k_base")


def count(message: dict[str, Any]) -> int:
    return count_message(message, O200K)


texts = st.sampled_from(["hi", "a longer sentence " * 3, "x" * 90, "ok"])
roles = st.sampled_from(["user"] * 20 + ["assistant"] * 20 + ["tool", "system"])


@st.composite
def stored_entries(draw: st.DrawFn) -> list[Entry]:
    """Stored messages, mostly plain and counted in the turn's encoding; sometimes a tool message,
    one counted in another encoding, uncounted, or counted at zero."""
    entries = []
    for role, text in draw(st.lists(st.tuples(roles, texts), max_size=30)):
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "tool":
            message["tool_call_id"] = "call_1"
        how = draw(st.sampled_from(["o200k_base"] * 40 + ["cl100k_base", "none", "zero"]))
        tokens = {} if how == "none" else {"o200k_base": 0} if how == "zero" else {how: draw(st.integers(1, 40))}
        entries.append(Entry(message, tokens))
    return entries


systems = st.sampled_from(
    [{"role": "system", "content": "be brief"}, {"role": "developer", "content": "be brief"}, {"role": "system", "content": "new rules"}]
)
stored_systems = st.sampled_from([[], [{"role": "system", "content": "be brief"}], [{"role": "system", "content": "be brief"}] * 2])


@st.composite
def conversations(draw: st.DrawFn) -> Conversation | None:
    """A stored conversation as a store gives it (maybe only its newest part, maybe with its plain history), or None: none yet."""
    if draw(st.sampled_from(range(10))) == 9:
        return None
    entries = draw(stored_entries())
    if entries and draw(st.sampled_from([True] * 3 + [False])):  # most histories end with a reply
        entries.append(Entry({"role": "assistant", "content": draw(texts)}, {"o200k_base": draw(st.integers(1, 40))}))
    plain = PlainHistory.of(entries) if draw(st.sampled_from([True] * 3 + [False])) else None
    return Conversation(draw(stored_systems), entries, 0.0, draw(st.sampled_from([0, 0, 3])), plain)


@settings(max_examples=500)
@given(
    conversation=conversations(),
    system=systems,
    question=texts.map(lambda text: {"role": "user", "content": text}),
    kept=st.integers(0, 30),
    off=st.integers(-4, 4),
)
def test_the_common_plan_is_plan_turns_plan(
    conversation: Conversation | None, system: dict[str, Any], question: dict[str, Any], kept: int, off: int
) -> None:
    turn: CommonTurn = (system, question, count(system), count(question))
    # a window at a few tokens from fitting the newest `kept` messages exactly: where an error of a token shows
    newest = conversation.entries[-kept:] if conversation is not None and kept else []
    max_tokens = max(0, turn[2] + turn[3] + 3 + sum(e.tokens.get("o200k_base", 0) for e in newest) + off)
    common = plan_common_turn(turn, conversation, max_tokens=max_tokens, encoding="o200k_base")
    event("planned in one pass" if common is not None else "left to plan_turn")
    if common is None:
        return
    stored = conversation or Conversation([], [], 0.0)
    general = plan_turn(
        stored.system, stored.entries, [system, question], settings=MemorySettings("token_window", max_tokens=max_tokens),
        count=count, encoding="o200k_base", older=stored.older, plain=stored.plain,
    )  # fmt: skip
    assert common == general
    assert [type(getattr(common, f.name)) for f in fields(common)] == [type(getattr(general, f.name)) for f in fields(general)]  # a bool is not an int


def plain_conversation(*messages: dict[str, Any], older: int = 0) -> Conversation:
    entries = [Entry(m, {"o200k_base": count(m)}) for m in messages]
    return Conversation([{"role": "system", "content": "be brief"}], entries, 0.0, older, PlainHistory.of(entries))


SYSTEM = {"role": "system", "content": "be brief"}
QUESTION = {"role": "user", "content": "and now?"}
TURN: CommonTurn = (SYSTEM, QUESTION, count(SYSTEM), count(QUESTION))
HISTORY = [{"role": "user", "content": f"q{i}"} if i % 2 == 0 else {"role": "assistant", "content": f"a{i}"} for i in range(20)]


def test_a_plain_history_and_a_first_turn_are_planned_in_one_pass() -> None:
    plan = plan_common_turn(TURN, plain_conversation(*HISTORY), max_tokens=40, encoding="o200k_base")
    assert plan is not None and plan.forwarded[0] == SYSTEM and plan.forwarded[-1] == QUESTION
    assert 0 < plan.history_kept < len(HISTORY) and plan.evicted == len(HISTORY) - plan.history_kept
    assert not plan.system_changed and not plan.wants_older and plan.turn_tokens == [count(QUESTION)]
    first = plan_common_turn(TURN, None, max_tokens=40, encoding="o200k_base")
    assert first is not None and first.forwarded == [SYSTEM, QUESTION] and first.system_changed


@pytest.mark.parametrize(
    "conversation, encoding",
    [
        (Conversation([], [Entry({"role": "tool", "content": "x", "tool_call_id": "c"}, {})], 0.0), "o200k_base"),  # no plain history
        (plain_conversation(*HISTORY, {"role": "user", "content": "q20"}), "o200k_base"),  # the question may resend it
        (plain_conversation(*HISTORY), "cl100k_base"),  # counted in another encoding
    ],
    ids=["tool-history", "ends-with-a-question", "other-encoding"],
)
def test_any_other_conversation_is_left_to_plan_turn(conversation: Conversation, encoding: str) -> None:
    assert plan_common_turn(TURN, conversation, max_tokens=40, encoding=encoding) is None


WINDOW = MemorySettings("token_window", max_tokens=330)


async def test_a_turn_of_the_common_shape_is_planned_without_plan_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a store: the first turn and the next ones, each stored, go the one-pass way; another request plan_turn's."""
    walks: list[int] = []

    def walked(*args: Any, **kwargs: Any) -> Any:
        walks.append(1)
        return plan_turn(*args, **kwargs)

    monkeypatch.setattr(turns, "plan_turn", walked)
    memory = Memory(InProcessStore(ttl_seconds=60, max_messages=100, lock_timeout=5))
    key = ("tenant", "conversation")
    try:
        for number in range(3):
            question = {"role": "user", "content": f"question {number}"}
            async with Turn(memory, key, settings=WINDOW, messages=[SYSTEM, question], model="gpt-4o", trace=Trace()) as turn:
                assert turn.plan.forwarded[0] == SYSTEM and turn.plan.forwarded[-1] == question
                assert turn.plan.history_kept == 2 * number
                await turn.commit_answer({"choices": [{"message": {"role": "assistant", "content": f"answer {number}"}}]})
        assert walks == []
        async with Turn(memory, key, settings=WINDOW, messages=[QUESTION], model="gpt-4o", trace=Trace()) as turn:  # no system message: another request
            assert turn.plan.forwarded == [SYSTEM, *turn.plan.forwarded[1:-1], QUESTION] and turn.plan.history_kept == 6
        assert walks == [1]
    finally:
        await memory.close()

"""The trimming rules, without sockets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.memory import resent
from gateway.core.memory.entries import Entry
from gateway.core.memory.messages import normalize
from gateway.core.memory.policies import plan_turn
from gateway.core.memory.resent import resent_length
from gateway.core.memory.settings import MemorySettings
from gateway.core.memory.windows import NOTICE
from gateway.tokens import count_message, count_messages, get_encoding

O200K = get_encoding("o200k_base")


def count(message: dict[str, Any]) -> int:
    return count_message(message, O200K)


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def sys(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def entries(*messages: dict[str, Any]) -> list[Entry]:
    return [Entry(m, {"o200k_base": count(m)}) for m in messages]


def plan(history, messages, stored_system=(), **settings: Any):
    return plan_turn(stored_system, entries(*history), messages, settings=MemorySettings(**settings), count=count, encoding="o200k_base")


HISTORY = [u("q1"), a("a1"), u("q2"), a("a2"), u("q3"), a("a3")]


# ---------------------------------------------------------------- system and new turn


def test_stored_system_comes_first_when_the_request_has_none() -> None:
    p = plan(HISTORY, [u("q4")], stored_system=[sys("be brief")])
    assert p.forwarded == [sys("be brief"), *HISTORY, u("q4")]
    assert not p.system_changed and p.system == [sys("be brief")]


def test_system_and_developer_messages_replace_the_stored_one() -> None:
    dev = {"role": "developer", "content": "new rules"}
    p = plan(HISTORY, [u("q4"), dev], stored_system=[sys("old")])
    assert p.forwarded[0] == dev and sys("old") not in p.forwarded
    assert p.system_changed and p.system == [dev]
    assert p.new_turn == [u("q4")]


def test_same_system_again_is_not_a_change() -> None:
    assert not plan([], [sys("s"), u("x")], stored_system=[sys("s")]).system_changed


def test_system_is_never_evicted() -> None:
    p = plan(HISTORY, [u("q4")], stored_system=[sys("keep me")], max_messages=1)
    assert p.forwarded == [sys("keep me"), u("q4")]
    assert (p.history_kept, p.evicted) == (0, 6)


def test_resent_history_is_not_doubled() -> None:
    p = plan(HISTORY, [*HISTORY, u("q4")])
    assert p.forwarded == [*HISTORY, u("q4")]
    assert p.new_turn == [u("q4")]


def test_resent_history_matches_after_normalizing_sdk_extras() -> None:
    resent = [dict(m, refusal=None) if m["role"] == "assistant" else m for m in HISTORY]
    assert plan(HISTORY, [*resent, u("q4")]).new_turn == [u("q4")]


def test_resent_tail_of_the_history_is_not_doubled() -> None:
    # a client that trims its own copy (LangChain's trim_messages) resends only the newest part
    p = plan(HISTORY, [*HISTORY[2:], u("q4")])
    assert p.new_turn == [u("q4")]
    assert p.forwarded == [*HISTORY, u("q4")]
    assert plan(HISTORY, [HISTORY[-1], u("q4")]).new_turn == [u("q4")]


@pytest.mark.parametrize(
    "turn",
    [
        [*HISTORY[:2], u("q4")],  # the history's start, not its end
        [HISTORY[2], HISTORY[3], u("q4")],  # a middle piece
        [u("q3"), u("q4")],  # begins like the last round but is not it
        [a("a3 again"), u("q4")],
    ],
    ids=["start", "middle", "same-question", "other-reply"],
)
def test_a_turn_that_does_not_repeat_the_end_of_the_history_is_new(turn: list[dict[str, Any]]) -> None:
    assert plan(HISTORY, turn).new_turn == turn


def test_new_turn_is_forwarded_whole_even_when_larger_than_the_window() -> None:
    turn = [u("one"), a("two"), u("three")]
    p = plan(HISTORY, turn, max_messages=2)
    assert p.forwarded == turn and p.history_kept == 0
    big = u("word " * 500)
    assert plan(HISTORY, [big], memory_type="token_window", max_tokens=50).forwarded == [big]
    assert plan(HISTORY, [big], memory_type="round_window", max_chars=100).forwarded == [big]


# ---------------------------------------------------------------- message_window


def test_message_window_counts_the_new_turn_and_evicts_oldest() -> None:
    p = plan(HISTORY, [u("q4")], max_messages=4)
    assert p.forwarded == [a("a2"), u("q3"), a("a3"), u("q4")]
    assert (p.history_kept, p.evicted) == (3, 3)


# ---------------------------------------------------------------- tool calls


def call(call_id: str, name: str = "lookup", args: str = '{"q": "x"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


TOOLS = [
    u("weather?"),
    {"role": "assistant", "tool_calls": [call("c1"), call("c2")]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "c2", "content": "warm"},
    a("It is sunny and warm."),
]


def test_tool_call_and_results_are_evicted_together() -> None:
    # room for 3 history messages: the 3-message tool group does not fit beside the answer
    p = plan(TOOLS, [u("thanks")], max_messages=4)
    assert p.forwarded == [a("It is sunny and warm."), u("thanks")]
    p = plan(TOOLS, [u("thanks")], max_messages=5)
    assert p.forwarded == [*TOOLS[1:], u("thanks")]
    assert p.forwarded[0]["role"] == "assistant"


def test_history_never_starts_with_an_orphaned_tool_result() -> None:
    orphaned = [{"role": "tool", "tool_call_id": "gone", "content": "x"}, *HISTORY]
    p = plan(orphaned, [u("q4")], max_messages=50)
    assert p.forwarded == [*HISTORY, u("q4")]
    assert p.evicted == 1
    stray = [u("q"), {"role": "tool", "tool_call_id": "nobody", "content": "x"}, a("a")]
    assert plan(stray, [u("q2")], max_messages=50).forwarded == [u("q"), a("a"), u("q2")]


def test_tool_calls_left_unanswered_are_not_forwarded() -> None:
    """A client that moved on without running the tools must not be stuck on a 400 for ever after."""
    asked = {"role": "assistant", "tool_calls": [call("c1"), call("c2")]}
    said = {"role": "assistant", "content": "Let me check.", "tool_calls": [call("c3")]}
    half = [u("q1"), asked, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}, u("q2"), said]
    p = plan(half, [u("never mind")], max_messages=50)
    assert p.forwarded == [u("q1"), u("q2"), a("Let me check."), u("never mind")]
    p = plan([u("q"), said], [{"role": "tool", "tool_call_id": "c3", "content": "done"}], max_messages=50)
    assert p.forwarded[1] == said  # the new turn answers it now
    assert plan(TOOLS, [u("thanks")], max_messages=50).forwarded == [*TOOLS, u("thanks")]


# ---------------------------------------------------------------- resent history, compared by meaning


def tool_call(args: str, *, call_id: str = "call_1", name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", **extra, "tool_calls": [call(call_id, name, args)]}


def result(content: Any, call_id: str = "call_1") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def parts(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text} for text in texts]


SAME_MEANING = {  # the stored copy, and how a client (LangChain) resends it
    "arguments-spaced": (tool_call('{"city":"Paris","days":2}'), tool_call('{"city": "Paris", "days": 2}')),
    "arguments-key-order": (tool_call('{"city":"Paris","days":2}'), tool_call('{"days": 2, "city": "Paris"}')),
    "arguments-escaped": (tool_call('{"city":"Zürich"}'), tool_call('{"city": "Z\\u00fcrich"}')),
    "arguments-unparseable": (tool_call("{oops", content=""), tool_call("{oops")),
    "empty-content-with-calls": (tool_call("{}", content=""), tool_call("{}", content=None)),
    "no-content-with-calls": (tool_call("{}"), tool_call("{}", content="")),
    "empty-reply": ({"role": "assistant"}, a("")),
    "user-text-parts": (u("Weather in Paris?"), {"role": "user", "content": parts("Weather in ", "Paris?")}),
    "reply-one-text-part": (a("Sunny."), {"role": "assistant", "content": parts("Sunny.")}),
    "tool-result-parts": (result("sunny"), result(parts("sunny"))),
    "stored-empty-tool-calls": ({**a("Sunny."), "tool_calls": []}, a("Sunny.")),
    "agent-name-on-reply": (a("Sunny."), {**a("Sunny."), "name": "weather_agent"}),
    "sdk-extras": (tool_call("{}"), {**tool_call("{}", refusal=None, annotations=[]),
                                     "tool_calls": [{**call("call_1", "get_weather", "{}"), "index": 0}]}),
}

DIFFERENT_MEANING = {
    "other-argument": (tool_call('{"city":"Paris"}'), tool_call('{"city": "Rome"}')),
    "true-is-not-1": (tool_call('{"x":true}'), tool_call('{"x": 1}')),
    "int-is-not-float": (tool_call('{"n":1}'), tool_call('{"n": 1.0}')),
    "nested-too-deep": (tool_call("[" * 300 + "]" * 300), tool_call("[ " * 300 + "]" * 300)),
    "unparseable-arguments": (tool_call('{"city":'), tool_call('{"city": ')),
    "other-call-id": (tool_call("{}"), tool_call("{}", call_id="call_2")),
    "other-function": (tool_call("{}"), tool_call("{}", name="get_time")),
    "reply-text": (tool_call("{}", content="Let me look."), tool_call("{}")),
    "user-name": ({**u("hi"), "name": "ann"}, {**u("hi"), "name": "bob"}),
    "image-part": ({"role": "user", "content": [*parts("see"), {"type": "image_url", "image_url": {"url": "x"}}]},
                   u("see")),
}


@pytest.mark.parametrize(("stored", "resent"), SAME_MEANING.values(), ids=SAME_MEANING.keys())
def test_resent_history_matches_by_meaning(stored: dict[str, Any], resent: dict[str, Any]) -> None:
    history = [u("q"), stored]
    p = plan(history, [u("q"), resent, u("next")])
    assert p.new_turn == [u("next")]
    assert plan(history, [resent, u("next")]).new_turn == [u("next")]  # a resent tail too


@pytest.mark.parametrize(("stored", "resent"), DIFFERENT_MEANING.values(), ids=DIFFERENT_MEANING.keys())
def test_a_message_that_means_something_else_is_new(stored: dict[str, Any], resent: dict[str, Any]) -> None:
    turn = [u("q"), resent, u("next")]
    assert plan([u("q"), stored], turn).new_turn == [normalize(m) for m in turn]


def test_langchain_agent_loop_is_not_doubled() -> None:
    stored = [u("Weather in Paris?"), tool_call('{"city":"Paris"}', content=""), result("sunny"), a("Sunny.")]
    resent = [u("Weather in Paris?"), tool_call('{"city": "Paris"}', content=None), result("sunny"), a("Sunny.")]
    p = plan(stored, [*resent, u("And tomorrow?")])
    assert p.forwarded == [*stored, u("And tomorrow?")]  # the stored copy is what is forwarded
    assert p.new_turn == [u("And tomorrow?")]
    p = plan(stored[:2], [sys("be brief"), *resent[:3]])  # the tool result is the new turn
    assert p.forwarded == [sys("be brief"), *stored[:3]]
    assert p.new_turn == [result("sunny")]


def test_the_common_cases_compare_by_bytes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def meaning(message: Any) -> Any:
        raise AssertionError("compared by meaning")

    monkeypatch.setattr(resent, "meaning", meaning)
    assert plan(TOOLS, [u("next")]).new_turn == [u("next")]  # only the new turn
    assert plan(TOOLS[:2], [TOOLS[2], TOOLS[3]]).new_turn == TOOLS[2:4]  # tool results for the last call
    assert plan(TOOLS, [*TOOLS, u("next")]).new_turn == [u("next")]  # the whole history, unchanged


LOOK_ALIKES = [  # groups of spellings of one message; different groups mean different things
    [u("x")],
    [u("y"), {"role": "user", "content": parts("y")}],
    [a("x")],
    [tool_call('{"a":1}'), tool_call('{"a": 1}')],
    [result("r")],
]
spelled = st.tuples(st.integers(0, len(LOOK_ALIKES) - 1), st.integers(0, 1))


@settings(deadline=None)
@given(st.lists(spelled, max_size=8), st.lists(spelled, max_size=8))
def test_resent_length_is_the_longest_start_of_the_turn_that_ends_the_history(
    stored: list[tuple[int, int]], turn: list[tuple[int, int]]
) -> None:
    def message(group: int, spelling: int) -> dict[str, Any]:
        spellings = LOOK_ALIKES[group]
        return spellings[spelling % len(spellings)]

    expected = max(
        (k for k in range(min(len(stored), len(turn)) + 1)
         if [g for g, _ in turn[:k]] == [g for g, _ in stored[len(stored) - k :]]),
    )
    assert resent_length([message(*m) for m in stored], [message(*m) for m in turn]) == expected


# ---------------------------------------------------------------- a poisoned store


POISONED = [
    u("weather?"),
    {"role": "assistant", "tool_calls": [{"id": ["c1"], "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": ["c1"], "content": "sunny"},
    {"role": "assistant", "tool_calls": {"id": "c2"}},
    {"role": "tool", "tool_call_id": {"x": 1}, "content": "warm"},
    a("It is sunny."),
]
MEMORY_TYPES = [{"memory_type": "message_window", "max_messages": 50},
                {"memory_type": "token_window", "max_tokens": 4000},
                {"memory_type": "round_window", "max_rounds": 5, "max_chars": 10_000}]


@pytest.mark.parametrize("window", MEMORY_TYPES, ids=lambda w: w["memory_type"])
def test_unhashable_tool_call_ids_in_the_store_do_not_break_planning(window: dict[str, Any]) -> None:
    p = plan(POISONED, [u("next")], **window)
    # results whose call id is not a string answer nothing: they are left out like orphans, and
    # calls nothing answers are left out too, so what is forwarded is a valid conversation
    assert p.forwarded == [POISONED[0], POISONED[5], u("next")]
    assert plan(POISONED, [*POISONED, u("next")], **window).new_turn == [u("next")]


json_values = st.recursive(
    st.sampled_from([None, True, 0, 1.5, "", "c1", "text", "{}"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["id", "type", "text"]), inner, max_size=2),
    max_leaves=4,
)


def anything_or(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy | json_values


stored_calls = st.lists(anything_or(st.fixed_dictionaries({}, optional={
    "id": anything_or(st.sampled_from(["c1", "c2"])),
    "type": json_values,
    "function": anything_or(st.fixed_dictionaries({}, optional={"name": json_values, "arguments": json_values})),
})), max_size=3)
stored_messages = st.fixed_dictionaries({}, optional={
    "role": anything_or(st.sampled_from(["user", "assistant", "tool", "system"])),
    "content": anything_or(st.lists(anything_or(st.fixed_dictionaries({"type": st.just("text"), "text": json_values})))),
    "name": json_values,
    "tool_calls": anything_or(stored_calls),
    "tool_call_id": anything_or(st.sampled_from(["c1", "c2"])),
})


@settings(deadline=None)
@given(st.lists(stored_messages, max_size=8), st.integers(0, 8), st.sampled_from(MEMORY_TYPES))
def test_planning_never_raises_whatever_the_store_holds(
    stored: list[dict[str, Any]], resent: int, window: dict[str, Any]
) -> None:
    # the request resends some of what is stored (messages with a string role, as a request has)
    request = [m for m in stored[len(stored) - resent :] if isinstance(m.get("role"), str) and m["role"] != "system"]
    p = plan(stored, [*request, u("next")], **window)
    assert p.forwarded[-1] == u("next")


# ---------------------------------------------------------------- token_window

def test_token_window_keeps_the_newest_messages_that_fit() -> None:
    system = [sys("You are terse.")]
    turn = [u("q4")]
    fixed = sum(map(count, system)) + count(turn[0]) + 3
    per = {m["content"]: count(m) for m in HISTORY}
    room = per["a3"] + per["q3"] + per["a2"]  # exactly three messages fit
    p = plan(HISTORY, turn, stored_system=system, memory_type="token_window", max_tokens=fixed + room)
    assert p.forwarded == [*system, a("a2"), u("q3"), a("a3"), u("q4")]
    assert count_messages(p.forwarded, O200K) == fixed + room
    p = plan(HISTORY, turn, stored_system=system, memory_type="token_window", max_tokens=fixed + room - 1)
    assert p.forwarded == [*system, u("q3"), a("a3"), u("q4")]


def test_token_window_evicts_an_older_message_that_does_not_fit_whole() -> None:
    history = [u("short"), a("long " * 200), u("q"), a("r")]
    fixed = count(u("next")) + 3
    budget = fixed + count(u("q")) + count(a("r")) + count(u("short"))  # room for the short one, not the long
    p = plan(history, [u("next")], memory_type="token_window", max_tokens=budget)
    assert p.forwarded == [u("q"), a("r"), u("next")]  # the short, older one is not kept past the long one


def test_token_window_uses_stored_counts() -> None:
    history = [Entry(u("cheap"), {"o200k_base": 1})]
    p = plan_turn([], history, [u("x")], settings=MemorySettings(memory_type="token_window", max_tokens=count(u("x")) + 3 + 1),
                  count=count, encoding="o200k_base")
    assert p.history_kept == 1  # counted as 1 token as stored, not recounted


# ---------------------------------------------------------------- round_window

ROUNDS = [
    u("What is the weather today?"),
    a("Let me check the weather for you."),
    {"role": "weather_agent", "content": "It's sunny and 72F."},
    u("Should I bring an umbrella?"),
    a("Based on the sunny weather, you won't need an umbrella today."),
    u("Thanks!"),
    a("You're welcome! Have a great day!"),
]


def test_round_window_keeps_the_last_rounds_with_non_assistant_roles() -> None:
    p = plan(ROUNDS, [u("bye")], memory_type="round_window", max_rounds=2, max_chars=10_000)
    assert p.forwarded == [*ROUNDS[3:], u("bye")]
    p = plan(ROUNDS, [u("bye")], memory_type="round_window", max_rounds=3, max_chars=10_000)
    assert p.forwarded == [*ROUNDS, u("bye")]
    assert NOTICE not in str(p.forwarded)  # nothing dropped for maxChars: no notice


def test_round_window_drops_older_messages_first_and_adds_the_notice() -> None:
    new = u("bye")
    last_round = ROUNDS[5:]
    size = len("Thanks!") + len("You're welcome! Have a great day!")
    budget = len("bye") + len(NOTICE) + size + len("Based on the sunny weather, you won't need an umbrella today.")
    p = plan(ROUNDS, [new], memory_type="round_window", max_rounds=3, max_chars=budget)
    assert p.forwarded == [
        a(NOTICE + "Based on the sunny weather, you won't need an umbrella today."),
        *last_round,
        new,
    ]
    total = sum(len(m["content"]) for m in p.forwarded)
    assert total == budget


def test_round_window_cuts_the_front_of_a_single_message() -> None:
    long = a("The 2022 FIFA World Cup in Qatar. " + "x" * 500 + " Argentina won.")
    p = plan([u("who won?"), long], [u("ok")], memory_type="round_window", max_rounds=3, max_chars=100)
    kept = p.forwarded[0]["content"]
    assert kept.startswith(NOTICE) and kept.endswith(" Argentina won.")
    assert len(kept) == 100 - len("ok")
    assert p.forwarded[-1] == u("ok")


def test_round_window_new_turn_alone_too_big_forwards_no_history() -> None:
    p = plan(ROUNDS, [u("x" * 50)], memory_type="round_window", max_chars=40)
    assert p.forwarded == [u("x" * 50)] and p.history_kept == 0


@settings(deadline=None)
@given(st.lists(spelled, max_size=8), st.lists(spelled, min_size=1, max_size=8))
def test_the_planned_turn_leaves_out_exactly_the_resent_copy(stored: list[tuple[int, int]], turn: list[tuple[int, int]]) -> None:
    """Whatever roles the turn holds (planning skips the comparison for a turn without the last stored role)."""

    def message(group: int, spelling: int) -> dict[str, Any]:
        spellings = LOOK_ALIKES[group]
        return spellings[spelling % len(spellings)]

    history, sent = [message(*m) for m in stored], [message(*m) for m in turn]
    repeat = resent_length(history[-len(sent) :], sent)  # the newest len(sent) stored, or all of them
    assert plan(history, sent, max_messages=50).new_turn == sent[repeat:]

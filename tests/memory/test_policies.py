"""The trimming rules, without sockets."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.memory.policies import NOTICE, Entry, normalize, plan_turn
from gateway.memory.settings import MemorySettings
from gateway.memory.tokens import count_message, count_messages, encoding_name, get_encoding

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
    return plan_turn(stored_system, entries(*history), messages, MemorySettings(**settings), count=count, encoding="o200k_base")


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


def test_partial_resend_is_not_deduplicated() -> None:
    p = plan(HISTORY, [*HISTORY[2:], u("q4")])
    assert p.new_turn == [*HISTORY[2:], u("q4")]


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


# ---------------------------------------------------------------- token_window

COOKBOOK = [
    {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
    {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
    {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."},
]


@pytest.mark.parametrize(("model", "expected"), [("gpt-3.5-turbo", 129), ("gpt-4", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)])
def test_token_counts_match_the_cookbook(model: str, expected: int) -> None:
    assert count_messages(COOKBOOK, get_encoding(encoding_name(model))) == expected


@pytest.mark.parametrize(
    ("model", "encoding"),
    [("gpt-4o", "o200k_base"), ("gpt-4.1-mini", "o200k_base"), ("gpt-5", "o200k_base"), ("o3-mini", "o200k_base"),
     ("o1", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
     ("llama-3-70b", "o200k_base"), (None, "o200k_base"), ("openai/gpt-4", "cl100k_base")],
)
def test_encoding_by_model(model: str | None, encoding: str) -> None:
    assert encoding_name(model) == encoding


def test_tool_calls_are_counted() -> None:
    plain = {"role": "assistant", "content": ""}
    with_call = {"role": "assistant", "content": "", "tool_calls": [call("c1", "get_weather", '{"city": "Paris"}')]}
    assert count(with_call) - count(plain) == len(O200K.encode("get_weather")) + len(O200K.encode('{"city": "Paris"}'))


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
    p = plan_turn([], history, [u("x")], MemorySettings(memory_type="token_window", max_tokens=count(u("x")) + 3 + 1),
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


def test_normalize_drops_extras_and_keeps_tool_fields() -> None:
    message = {"role": "assistant", "content": None, "refusal": None, "annotations": [],
               "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}, "index": 0}]}
    assert normalize(message) == {"role": "assistant", "tool_calls": [call("c", "f", "{}")]}

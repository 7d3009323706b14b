"""The windows over a stored history: the newest that fit, the last rounds, and tool calls kept with their results."""

from __future__ import annotations

from typing import Any

from gateway.core.memory.entries import Entry
from gateway.core.memory.windows import NOTICE, newest_that_fit, round_window, without_unanswered_calls


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calling(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "tool_calls": [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


def entries(*messages: dict[str, Any]) -> list[Entry]:
    return [Entry(m) for m in messages]


def test_the_newest_that_fit_stop_at_the_first_that_does_not() -> None:
    history = entries(u("q1"), a("a1"), u("q2"), a("a2"))
    assert newest_that_fit(history, 3, None) == ([a("a1"), u("q2"), a("a2")], False)
    assert newest_that_fit(history, 10, None) == ([u("q1"), a("a1"), u("q2"), a("a2")], True)  # ran out: older could fit
    cost = lambda entry: len(entry.message["content"])  # noqa: E731
    assert newest_that_fit(history, 5, cost) == ([u("q2"), a("a2")], False)


def test_a_call_and_its_results_fit_together_or_not_at_all() -> None:
    history = entries(u("q"), calling("c1", "c2"), result("c1"), result("c2"), a("done"))
    assert newest_that_fit(history, 3, None) == ([a("done")], False)  # the unit of three does not fit in two
    assert newest_that_fit(history, 4, None) == ([calling("c1", "c2"), result("c1"), result("c2"), a("done")], False)


def test_results_whose_call_is_gone_are_never_kept() -> None:
    history = entries(result("gone"), u("q"), a("a"))
    assert newest_that_fit(history, 10, None) == ([u("q"), a("a")], True)
    history = entries(calling("c1"), result("c1"), result("other"))
    assert newest_that_fit(history, 10, None) == ([calling("c1"), result("c1")], True)


def test_a_round_window_keeps_the_last_rounds() -> None:
    history = entries(u("q1"), a("a1"), u("q2"), a("a2"), u("q3"), a("a3"))
    assert round_window(history, [u("q4")], max_rounds=2, max_chars=1000) == ([u("q2"), a("a2"), u("q3"), a("a3")], False)
    assert round_window(history, [u("q4")], max_rounds=5, max_chars=1000) == ([m.message for m in history], True)


def test_a_round_window_over_its_characters_drops_the_oldest_and_says_so() -> None:
    history = entries(u("q" * 40), a("a" * 40), u("q2"), a("a2"))
    kept, exhausted = round_window(history, [u("next")], max_rounds=5, max_chars=len(NOTICE) + 20)
    assert kept == [{**u("q2"), "content": NOTICE + "q2"}, a("a2")] and not exhausted


def test_a_round_window_cuts_the_front_of_one_long_message() -> None:
    history = entries(a("x" * 500 + " the end."))
    kept, _ = round_window(history, [], max_rounds=3, max_chars=len(NOTICE) + 9)
    assert kept == [a(NOTICE + " the end.")]


def test_calls_left_unanswered_lose_their_calls_and_their_partial_results() -> None:
    kept = [u("q"), {**calling("c1", "c2"), "content": "looking"}, result("c1"), a("moved on")]
    assert without_unanswered_calls(kept, [u("next")]) == [u("q"), {"role": "assistant", "content": "looking"}, a("moved on")]
    assert without_unanswered_calls([u("q"), calling("c1")], [u("next")]) == [u("q")]  # nothing else left: the message goes


def test_calls_the_new_turn_answers_stay() -> None:
    kept = [u("q"), calling("c1")]
    assert without_unanswered_calls(kept, [result("c1")]) == kept

"""Token counts for turns: large texts refused on the loop, short messages remembered, the common turn recognised."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.settings import MemorySettings
from gateway.memory import counting
from gateway.memory.counting import (
    OFF_LOOP_CHARS,
    CountOffLoop,
    Counts,
    budgeted,
    counted_entries,
    counted_on_loop,
)
from gateway.tokens import count_message, get_encoding

O200K = get_encoding("o200k_base")
SYSTEM = {"role": "system", "content": "be brief"}
QUESTION = {"role": "user", "content": "and now?"}
WINDOW = MemorySettings("token_window", max_tokens=330)


def count(message: dict[str, Any]) -> int:
    return count_message(message, O200K)


def test_a_text_too_large_for_the_loop_is_refused_there() -> None:
    on_loop = counted_on_loop(count)
    small = {"role": "user", "content": "x" * (OFF_LOOP_CHARS - 100)}
    assert on_loop(small) == count(small)
    with pytest.raises(CountOffLoop):
        on_loop({"role": "user", "content": "x" * (OFF_LOOP_CHARS + 1)})


def test_a_plan_on_the_loop_is_refused_once_its_texts_pass_the_limit_in_all() -> None:
    budget = budgeted(count)
    quarter = {"role": "user", "content": "x" * (OFF_LOOP_CHARS // 4 - 10)}
    for _ in range(4):  # each under the limit, and all of them too
        budget(quarter)
    with pytest.raises(CountOffLoop):
        budget(quarter)


def test_short_messages_are_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def counted(message: Any, *args: Any) -> int:
        calls.append(message)
        return count_message(message, *args)

    monkeypatch.setattr(counting, "count_message", counted)
    counts = Counts(O200K, 128_000)
    assert counts.count(SYSTEM) == counts.count(dict(SYSTEM)) == counts.count_on_loop(SYSTEM) == count(SYSTEM)
    assert calls == [SYSTEM]
    long = {"role": "user", "content": "y" * 5000}  # past what is remembered: counted each time
    counts.count(long)
    counts.count(long)
    assert calls == [SYSTEM, long, long]


def test_entries_carry_their_count_in_the_encoding() -> None:
    assert counted_entries([SYSTEM, QUESTION], [4, 5], "o200k_base") == [
        Entry(SYSTEM, {"o200k_base": 4}),
        Entry(QUESTION, {"o200k_base": 5}),
    ]


def test_a_request_of_the_common_shape_is_counted_as_plan_turn_counts() -> None:
    counts = Counts(O200K, 128_000)
    for system in (SYSTEM, {"role": "developer", "content": "rules"}):
        turn = counts.common_turn([system, QUESTION], WINDOW)
        assert turn == (system, QUESTION, count(system), count(QUESTION))
        assert counts.common_turn([system, QUESTION], WINDOW) == turn  # the second time, from what it remembers


@pytest.mark.parametrize(
    "messages, window",
    [
        ([SYSTEM, QUESTION], MemorySettings("message_window")),
        ([QUESTION], WINDOW),
        ([SYSTEM, QUESTION, QUESTION], WINDOW),
        ([QUESTION, SYSTEM], WINDOW),
        ([SYSTEM, {**QUESTION, "name": "ann"}], WINDOW),
        ([{**SYSTEM, "content": None}, QUESTION], WINDOW),
        ([{"role": "system", "name": "ann"}, QUESTION], WINDOW),
        ([SYSTEM, {"role": "user", "name": "ann"}], WINDOW),
        ([SYSTEM, {"role": "user", "content": [{"type": "text", "text": "parts"}]}], WINDOW),
        ([SYSTEM, {"role": "assistant", "content": "said"}], WINDOW),
        ([SYSTEM, {"role": "user", "content": "x" * (OFF_LOOP_CHARS + 1)}], WINDOW),  # counted on a thread
    ],
    ids=[
        "message-window", "no-system", "two-questions", "order", "name", "null-content", "system-without-content",
        "question-without-content", "parts", "not-a-question", "large",
    ],
)
def test_any_other_request_is_not_a_common_turn(messages: list[dict[str, Any]], window: MemorySettings) -> None:
    assert Counts(O200K, 128_000).common_turn(messages, window) is None

"""How far back a turn reads: a first reach per window, a wider one when it fell short, rows tallied against it."""

from __future__ import annotations

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import (
    FIRST_CHUNK,
    WIDER_AT_LEAST,
    Reach,
    Tally,
    first_reach,
    stored_count,
    wider_reach,
)
from gateway.core.memory.settings import MemorySettings

TWO = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]


def test_each_window_reads_what_it_keeps_and_one_more() -> None:
    assert first_reach(MemorySettings("message_window", max_messages=20), TWO) == Reach(messages=21)
    assert first_reach(MemorySettings("token_window", max_tokens=500), TWO) == Reach(messages=2, tokens=500)
    assert first_reach(MemorySettings("summary_window", max_tokens=500), TWO) == Reach(messages=2, tokens=500)
    assert first_reach(MemorySettings("round_window", max_rounds=4), TWO) == Reach(messages=2, users=4)
    # a request longer than the window: as many stored messages as it could resend
    assert first_reach(MemorySettings("message_window", max_messages=1), TWO * 3) == Reach(messages=6)


def test_a_first_reach_asked_again_is_the_one_made_before() -> None:
    settings = MemorySettings("token_window", max_tokens=777)
    assert first_reach(settings, TWO) is first_reach(MemorySettings("token_window", max_tokens=777), TWO)


def test_a_wider_read_is_four_times_the_last_and_at_least_a_floor() -> None:
    assert wider_reach(5) == Reach(messages=WIDER_AT_LEAST)
    assert wider_reach(100) == Reach(messages=400)


def test_a_chunked_first_read_fetches_a_chunk_for_tokens_or_rounds() -> None:
    assert Reach(messages=3).first_chunk == 3
    assert Reach().first_chunk == 1
    assert Reach(messages=3, tokens=10).first_chunk == FIRST_CHUNK
    assert Reach(messages=40, users=2).first_chunk == 40


def test_a_tally_is_covered_once_every_bound_is_met_and_never_on_a_tool_result() -> None:
    tally = Tally(Reach(messages=2, tokens=10, users=1))
    assert not tally.add("assistant", 8)
    assert not tally.add("tool", 8)  # all bounds met, but the call of a result must come too
    assert tally.add("user", 1)


def test_the_stored_count_is_any_encodings_or_none() -> None:
    assert stored_count({"cl100k_base": 7}) == 7
    assert stored_count({}) == 0
    history = [Entry({"role": "user", "content": "q"}, {"o200k_base": 6}), Entry({"role": "assistant", "content": "a"}, {"o200k_base": 6})]
    assert Reach(messages=1, tokens=5).covered_by(history)
    assert not Reach(messages=1, tokens=20).covered_by(history)

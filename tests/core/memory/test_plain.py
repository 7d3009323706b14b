"""A plain history's windows (a slice, a bisection) plan exactly as the walk over its entries does."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.core.memory.entries import Entry
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.policies import plan_turn
from gateway.core.memory.settings import MemorySettings
from gateway.tokens import count_message, get_encoding

O200K = get_encoding("o200k_base")


def count(message: dict[str, Any]) -> int:
    return count_message(message, O200K)


texts = st.sampled_from(["hi", "a longer sentence " * 3, "x" * 90, "ok"])
plain_messages = st.lists(st.builds(lambda role, text: {"role": role, "content": text}, st.sampled_from(["user", "assistant"]), texts), max_size=40)


@st.composite
def stored_entries(draw: st.DrawFn) -> list[Entry]:
    """Plain messages, counted in the turn's encoding, mostly; sometimes one in another, or uncounted."""
    entries = []
    for message in draw(plain_messages):
        how = draw(st.sampled_from(["o200k_base"] * 8 + ["cl100k_base", "none", "zero"]))
        tokens = {} if how == "none" else {"o200k_base": 0} if how == "zero" else {how: count(message)}
        entries.append(Entry(message, tokens))
    return entries


windows = st.one_of(
    st.builds(MemorySettings, memory_type=st.just("message_window"), max_messages=st.integers(0, 45)),
    st.builds(MemorySettings, memory_type=st.just("token_window"), max_tokens=st.integers(0, 900)),
    st.builds(MemorySettings, memory_type=st.just("round_window"), max_rounds=st.integers(1, 6), max_chars=st.integers(20, 900)),
)


@given(
    history=stored_entries(),
    turn=st.lists(st.builds(lambda text: {"role": "user", "content": text}, texts), min_size=0, max_size=3),
    window=windows,
    older=st.sampled_from([0, 5]),
    split=st.integers(0, 40),
)
def test_a_plain_history_plans_as_the_walk_does(
    history: list[Entry], turn: list[dict[str, Any]], window: MemorySettings, older: int, split: int
) -> None:
    plain = PlainHistory.of(history[:split])  # built in two steps, as a store's cache grows with each write
    assert plain is not None and plain.extend(history[split:])
    messages = [{"role": "system", "content": "be brief"}, *turn]
    walked = plan_turn([], history, messages, settings=window, count=count, encoding="o200k_base", older=older)
    assert plan_turn([], history, messages, settings=window, count=count, encoding="o200k_base", older=older, plain=plain) == walked


@given(history=stored_entries(), dropped=st.integers(0, 45), budget=st.integers(-5, 900))
def test_dropping_the_oldest_keeps_the_sums_of_the_rest(history: list[Entry], dropped: int, budget: int) -> None:
    plain = PlainHistory.of(history)
    assert plain is not None
    dropped = min(dropped, len(history))  # a store drops no more than it holds
    assert plain.extend([], drop=dropped)
    rest = PlainHistory.of(history[dropped:])
    assert rest is not None and plain.messages == rest.messages
    window, rest_window = plain.newest_within("o200k_base", budget), rest.newest_within("o200k_base", budget)
    if window is not None and rest_window is not None:  # a history counted in the encoding
        assert window == rest_window


def test_a_message_that_fits_the_budget_exactly_is_kept() -> None:
    history = [Entry({"role": "user", "content": str(n)}, {"o200k_base": n}) for n in (5, 7, 11)]
    plain = PlainHistory.of(history)
    assert plain is not None
    assert plain.newest_within("o200k_base", 18) == ([history[1].message, history[2].message], False)
    assert plain.newest_within("o200k_base", 17) == ([history[2].message], False)
    assert plain.newest_within("o200k_base", 23) == ([entry.message for entry in history], True)
    assert plain.newest_within("o200k_base", -1) == ([], False)
    assert PlainHistory().newest(-1) == ([], True)  # as the walk: nothing was there to stop it
    assert plain.newest(0) == ([], False) and plain.newest(3) == ([entry.message for entry in history], True)


def test_a_tool_call_or_result_makes_a_history_not_plain() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "r"}
    assert PlainHistory.of([Entry(call, {})]) is None
    assert PlainHistory.of([Entry(result, {})]) is None
    plain = PlainHistory.of([Entry({"role": "user", "content": "q"}, {"o200k_base": 4})])
    assert plain is not None and not plain.extend([Entry(call, {})])


def test_sums_are_only_in_the_encoding_every_message_was_counted_in() -> None:
    plain = PlainHistory.of([Entry({"role": "user", "content": "q"}, {"o200k_base": 4})])
    assert plain is not None and plain.newest_within("o200k_base", 4) == ([{"role": "user", "content": "q"}], True)
    assert plain.newest_within("cl100k_base", 4) is None
    plain.extend([Entry({"role": "assistant", "content": "a"}, {"cl100k_base": 4})])
    assert plain.newest_within("o200k_base", 4) is None
    assert plain.newest(1) == ([{"role": "assistant", "content": "a"}], False)  # a message window still serves


@given(history=stored_entries(), split=st.integers(0, 40), dropped=st.integers(0, 45), budget=st.integers(-5, 900))
def test_a_write_that_drops_the_oldest_as_it_extends_keeps_the_sums_of_the_rest(
    history: list[Entry], split: int, dropped: int, budget: int
) -> None:
    """What a store at its cap does on each write: the new entries in, the oldest out, in one call."""
    plain = PlainHistory.of(history[:split])
    dropped = min(dropped, len(history))  # a store drops no more than it holds
    assert plain is not None and plain.extend(history[split:], dropped)
    rest = PlainHistory.of(history[dropped:])
    assert rest is not None and plain.messages == rest.messages
    window, rest_window = plain.newest_within("o200k_base", budget), rest.newest_within("o200k_base", budget)
    if window is not None and rest_window is not None:  # a history counted in the encoding
        assert window == rest_window

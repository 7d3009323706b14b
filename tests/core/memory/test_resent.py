"""A client's resent copy of the history: found at the start of a turn, by bytes or by meaning."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.memory.resent import json_meaning, longest_overlap, meaning, resent_length
from gateway.core.nesting import MAX_JSON_DEPTH
from tests.support.nesting import nested


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


HISTORY = [u("q1"), a("a1"), u("q2"), a("a2")]


def test_the_whole_history_resent_is_found() -> None:
    assert resent_length(HISTORY, [*HISTORY, u("q3")]) == 4


def test_a_resent_tail_is_found() -> None:
    assert resent_length(HISTORY, [u("q2"), a("a2"), u("q3")]) == 2


def test_a_turn_that_only_begins_like_the_history_is_new() -> None:
    assert resent_length(HISTORY, [u("q1"), u("q3")]) == 0  # the repeat must end with the last stored message
    assert resent_length(HISTORY, [u("q3")]) == 0
    assert resent_length([], [u("q1")]) == 0


def test_a_copy_reserialized_by_the_client_is_found_by_meaning() -> None:
    stored = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a":1,"b":2}'}}]}
    resent = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"b": 2, "a": 1}'}, "index": 0}
    ]}  # fmt: skip
    assert meaning(stored) == meaning(resent)
    assert resent_length([u("q"), stored], [u("q"), resent, u("next")]) == 2


def test_text_parts_mean_their_joined_text_and_a_reply_name_means_nothing() -> None:
    assert meaning(u("hello")) == meaning({"role": "user", "content": [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]})
    assert meaning(a("ok")) == meaning({**a("ok"), "name": "agent"})
    assert meaning({**u("hi"), "name": "ann"}) != meaning({**u("hi"), "name": "bob"})


def test_json_arguments_mean_their_value_in_one_spelling() -> None:
    assert json_meaning('{"b": 2, "a": 1}') == json_meaning('{"a":1,"b":2}')
    assert json_meaning('{"x": true}') != json_meaning('{"x": 1}')
    assert json_meaning("{oops") == "{oops"  # text that does not parse stays text
    assert json_meaning(None) is None


def test_longest_overlap_is_the_longest_start_of_head_that_ends_tail() -> None:
    assert longest_overlap([1, 2, 3], [9, 1, 2]) == 2
    assert longest_overlap([1, 1, 2], [1, 1, 1]) == 2
    assert longest_overlap([1, 2], [3, 4]) == 0


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 211, 252])
def test_deep_tool_arguments_are_compared_as_text(depth: int) -> None:
    """A client's JSON inside a string, nested past MAX_JSON_DEPTH, is never parsed to be written again by orjson."""
    arguments = nested(depth)
    assert json_meaning(arguments) == arguments


def test_shallow_tool_arguments_are_compared_by_meaning() -> None:
    assert json_meaning('{"b": [1, {"c": 2}], "a": true}') == b'{"a":true,"b":[1,{"c":2}]}'

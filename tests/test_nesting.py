"""JSON nested past MAX_JSON_DEPTH is never written again by orjson (which may write past its buffer near 254)."""

from __future__ import annotations

import json

import pytest

from gateway.memory.policies import _json_meaning
from gateway.nesting import MAX_JSON_DEPTH, too_deep
from gateway.translate.messages import _tool_input


def nested(depth: int) -> str:
    """An object holding arrays `depth` levels deep in all, in the standard library's spelling."""
    return json.dumps({"a": json.loads("[" * (depth - 1) + "]" * (depth - 1))})


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 211, 252])
def test_too_deep_reads_text_and_bytes_alike(depth: int) -> None:
    text = nested(depth)
    assert too_deep(text, json.loads(text)) is (depth > MAX_JSON_DEPTH)
    assert too_deep(text.encode(), json.loads(text)) is (depth > MAX_JSON_DEPTH)


def test_many_shallow_brackets_are_not_too_deep() -> None:
    text = json.dumps({"a": [[1]] * 500, "b": "[[[[{{{{" * 100})
    assert not too_deep(text, json.loads(text))


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 211, 252])
def test_deep_tool_arguments_are_compared_and_translated_as_text(depth: int) -> None:
    """A tool call's arguments in memory's comparison and in a tool_use input are a client's JSON inside a string."""
    arguments = nested(depth)
    assert _json_meaning(arguments) == arguments
    assert _tool_input(arguments) == {"_raw": arguments}


def test_shallow_tool_arguments_are_still_parsed() -> None:
    arguments = '{"b": [1, {"c": 2}], "a": true}'
    assert _json_meaning(arguments) == b'{"a":true,"b":[1,{"c":2}]}'
    assert _tool_input(arguments) == {"b": [1, {"c": 2}], "a": True}

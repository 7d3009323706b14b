"""How deep JSON nests (gateway.core.nesting): checked before orjson writes again what a client or an upstream sent."""

from __future__ import annotations

import json

import pytest

from gateway.core.nesting import MAX_JSON_DEPTH, nests_deeper, too_deep
from tests.support.nesting import nested


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 211, 252])
def test_too_deep_reads_text_and_bytes_alike(depth: int) -> None:
    text = nested(depth)
    assert too_deep(text, json.loads(text)) is (depth > MAX_JSON_DEPTH)
    assert too_deep(text.encode(), json.loads(text)) is (depth > MAX_JSON_DEPTH)


def test_many_shallow_brackets_are_not_too_deep() -> None:
    text = json.dumps({"a": [[1]] * 500, "b": "[[[[{{{{" * 100})
    assert not too_deep(text, json.loads(text))



def test_nests_deeper_counts_levels_of_arrays_and_objects_only() -> None:
    assert not nests_deeper("[[[[", 0)  # a scalar is 0 levels, whatever its text
    assert not nests_deeper({"a": [1, {"b": []}]}, 4)  # object, array, object, array
    assert nests_deeper({"a": [1, {"b": []}]}, 3)
    assert nests_deeper(json.loads(nested(MAX_JSON_DEPTH + 1)), MAX_JSON_DEPTH)
    assert not nests_deeper(json.loads(nested(MAX_JSON_DEPTH)), MAX_JSON_DEPTH)

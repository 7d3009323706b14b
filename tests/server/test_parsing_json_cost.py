"""What parsing a body costs, counted from its bytes: exact by the scan, bounded from above by the counts in C."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core.errors import PayloadTooLargeError
from gateway.server.parsing import CONTAINER_UNITS, JSON_BUDGET, check_json_cost, json_units, scanned_units

NASTY = st.text(alphabet=st.sampled_from('ab"\\[]{},: \n\u00e9\u65e5\U0001f600'), max_size=12)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | NASTY,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(NASTY, inner, max_size=5),
    max_leaves=40,
)
EVERYTHING = 10**12


def cost(value: Any) -> int:
    """The cost by its definition: strings 1, containers CONTAINER_UNITS, each `,` and `:` 1 (the root's 1 added apart)."""
    if isinstance(value, str):
        return 1
    if isinstance(value, list):
        return CONTAINER_UNITS + sum(map(cost, value)) + max(len(value) - 1, 0)
    if isinstance(value, dict):
        members = sum(2 + cost(item) for item in value.values())  # each key and its colon
        return CONTAINER_UNITS + members + max(len(value) - 1, 0)
    return 0


@given(VALUES)
def test_the_scan_counts_the_cost_of_any_json_however_written(value: Any) -> None:
    expected = 1 + cost(value)
    for raw in (
        orjson.dumps(value),
        json.dumps(value).encode(),
        json.dumps(value, ensure_ascii=False, indent=2).encode(),
    ):
        assert scanned_units(raw, stop=EVERYTHING) == expected
        assert json_units(raw, stop=EVERYTHING) >= expected  # the bound from the counts in C
        assert json_units(raw, stop=0) >= min(expected, 1)  # a scan stops past its stop


def test_a_body_is_refused_just_past_the_budget() -> None:
    def body(lists: int) -> bytes:
        return b"[" + b",".join([b"[]"] * lists) + b"]"

    within = (JSON_BUDGET - 1 - CONTAINER_UNITS + 1) // (
        CONTAINER_UNITS + 1
    )  # root, then each `[]` with its comma
    assert json_units(body(within)) <= JSON_BUDGET < json_units(body(within + 1))
    check_json_cost(body(within))
    with pytest.raises(PayloadTooLargeError, match="too many JSON values"):
        check_json_cost(body(within + 1))


def test_punctuation_inside_strings_costs_nothing() -> None:
    text = '{"a": [1, 2], "b": {}},' * 100_000
    raw = orjson.dumps({"messages": [{"role": "user", "content": text}]})
    assert json_units(raw, stop=EVERYTHING) > JSON_BUDGET  # the bound
    assert json_units(raw) == 1 + cost(orjson.loads(raw))
    check_json_cost(raw)

"""gateway.observe.metrics.snapshot: one process's values as bytes and back."""

from __future__ import annotations

import marshal
import math

import pytest

from gateway.observe.metrics.snapshot import FORMAT, Snapshot


def test_values_come_back_exactly_infinities_and_nan_too() -> None:
    snapshot = Snapshot(
        numbers={"c": {("a", "200"): 0.1 + 0.2, (): math.inf}},
        stamps={"l": {("a",): 1_764_000_000.123456}},
        histograms={"h": {("a",): ([1, 0, 2], -math.inf)}},
    )
    assert Snapshot.decode(snapshot.encode()) == snapshot
    nan = Snapshot.decode(Snapshot(numbers={"g": {(): math.nan}}).encode())
    assert nan is not None and math.isnan(nan.numbers["g"][()])


@pytest.mark.parametrize(
    "data",
    [b"", b"not marshal", marshal.dumps({"numbers": {}}), marshal.dumps((FORMAT + 1, {}, {}, {})), marshal.dumps((FORMAT,))],
)
def test_bytes_that_are_no_snapshot_of_this_format_are_none(data: bytes) -> None:
    assert Snapshot.decode(data) is None

"""The CI benchmark guard's verdicts (bench/guard.py), without running callgrind."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

GUARD = Path(__file__).resolve().parent.parent / "bench" / "guard.py"


@pytest.fixture(scope="module")
def guard() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_guard", GUARD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_guard"] = module
    spec.loader.exec_module(module)
    return module


def baseline(guard: ModuleType, counts: dict[str, int]) -> Any:
    return guard.Baseline(counts=counts, requests=500, environment=guard.environment())


def test_a_path_over_five_percent_fails_only_if_its_second_reading_is_over_too(
    guard: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = {path: 1_000_000 for path in guard.PATHS}
    first, stream = guard.PATHS[0], guard.PATHS[1]
    readings = iter([{**base, first: 1_060_000, stream: 1_049_000}, {first: 1_040_000}])
    monkeypatch.setattr(guard, "measure", lambda paths: next(readings))
    assert guard.check(baseline(guard, base)) == 0  # a loaded first run, a clean second: the lower figure stands
    assert "lower of two runs" in capsys.readouterr().out

    readings = iter([{**base, first: 1_060_000}, {first: 1_051_000}])
    assert guard.check(baseline(guard, base)) == 1
    assert "OVER the +5% limit" in capsys.readouterr().out


def test_five_percent_exactly_is_within_the_limit(guard: ModuleType) -> None:
    row = guard.Row("gateway", 1_000_000, 1_050_000)
    assert not row.over and guard.Row("gateway", 1_000_000, 1_050_001).over

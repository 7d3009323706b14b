"""The CI benchmark guard's verdicts (bench/guard.py), without running callgrind."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

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
    assert (
        guard.check(baseline(guard, base)) == 0
    )  # a loaded first run, a clean second: the lower figure stands
    assert "lower of two runs" in capsys.readouterr().out

    readings = iter([{**base, first: 1_060_000}, {first: 1_051_000}])
    assert guard.check(baseline(guard, base)) == 1
    assert "OVER the +5% limit" in capsys.readouterr().out


def test_five_percent_exactly_is_within_the_limit(guard: ModuleType) -> None:
    row = guard.Row("gateway", 1_000_000, 1_050_000)
    assert not row.over and guard.Row("gateway", 1_000_000, 1_050_001).over


def test_the_guard_run_of_instructions_sh_measures_every_guarded_path(guard: ModuleType) -> None:
    script = (GUARD.parent / "instructions.sh").read_text(encoding="utf-8")
    block = script[script.index("    guard)") :].split(";;", 1)[0]
    assert {"gateway-memory-redis", "gateway-limits", "gateway-limits-redis"} <= set(guard.PATHS)
    for path in guard.PATHS:
        assert f" {path}" in block or f" {path}:" in block, f"instructions.sh guard does not measure {path}"


def test_the_redis_limits_path_is_the_local_one_counted_on_redis() -> None:
    local, shared = (yaml.safe_load((GUARD.parent / name).read_text(encoding="utf-8"))
                     for name in ("gateway-limits.yaml", "gateway-limits-redis.yaml"))  # fmt: skip
    assert local.pop("limits") == {"store": "local"}
    assert shared.pop("limits") == {"store": "redis", "url": "${BENCH_REDIS_URL}"}
    assert local == shared


def test_a_path_the_baseline_lacks_is_measured_and_fails_the_guard_by_name(
    guard: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    older = {path: 1_000_000 for path in guard.PATHS if path != "gateway-memory-redis"}
    file = tmp_path / "baseline.json"
    guard.write_baseline({**older, "gateway-memory-redis": 0}, file)
    data = json.loads(file.read_text(encoding="utf-8"))
    del data["instructions_per_request"]["gateway-memory-redis"]
    file.write_text(json.dumps(data), encoding="utf-8")
    read = guard.read_baseline(file)  # a baseline from before the path was guarded still reads
    assert dict(read.counts) == older

    monkeypatch.setattr(guard, "measure", lambda paths: {**older, "gateway-memory-redis": 2_345_678})
    assert guard.check(read) == 1
    out = capsys.readouterr().out
    assert "NO BASELINE" in out
    assert "no figure for gateway-memory-redis (measured now: gateway-memory-redis 2,345,678)" in out


@pytest.mark.parametrize(
    ("ci", "status", "verdict"), [("", 0, "guard: skipped"), ("true", 1, "guard: FAILED under CI")]
)
def test_without_redis_server_the_guard_skips_locally_and_fails_under_ci(
    guard: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    ci: str,
    status: int,
    verdict: str,
) -> None:
    which = guard.shutil.which
    monkeypatch.setattr(guard.shutil, "which", lambda tool: None if tool == "redis-server" else which(tool))
    monkeypatch.setenv("CI", ci)
    monkeypatch.setattr(guard, "measure", lambda paths: pytest.fail("measured without redis-server"))
    assert guard.main([]) == status
    captured = capsys.readouterr()
    assert verdict in captured.out + captured.err and "redis-server" in captured.out + captured.err

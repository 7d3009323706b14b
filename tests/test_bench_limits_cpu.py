"""bench/limits_cpu.py's pieces: its three configs (the same gateway but for the key's limits) and its table."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from gateway.config.loader import parse_config
from gateway.core.governance import UNLIMITED, Budget, BudgetPeriod, LimitStoreKind, RateLimits
from gateway.core.settings import Config

BENCH = Path(__file__).resolve().parent.parent / "bench"
REDIS_URL = "redis://127.0.0.1:6399/2"


@pytest.fixture(scope="module")
def limits_cpu() -> Iterator[ModuleType]:
    """bench/limits_cpu.py, imported as the script imports its neighbours: from bench/ on sys.path."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("limits_cpu")
    finally:
        sys.path.remove(str(BENCH))


def config_of(limits_cpu: ModuleType, name: str) -> Config:
    (setup,) = [s for s in limits_cpu.SETUPS if s.name == name]
    return parse_config((BENCH / setup.config).read_text(), env={"BENCH_REDIS_URL": REDIS_URL})


def without_limits(name: str) -> dict[str, Any]:
    """The config file of setup `name` as YAML, its `limits` section and its keys' limits left out."""
    config: dict[str, Any] = yaml.safe_load((BENCH / f"limits-{name}.yaml").read_text())
    config.pop("limits", None)
    for key in config["auth"]["keys"]:
        key.pop("limits", None)
    return config


def test_limits_on_is_every_limit_of_a_key_set_too_high_to_refuse_the_load(limits_cpu: ModuleType) -> None:
    high = RateLimits(
        requests_per_minute=int(limits_cpu.LIMIT),
        tokens_per_minute=1_000_000_000,
        concurrent_requests=1000,
        budget=Budget(usd=1_000_000, period=BudgetPeriod.MONTH),
    )
    off = config_of(limits_cpu, "off")
    assert [key.limits for key in off.api_keys] == [None] and off.limits.defaults == UNLIMITED
    for name, store in (("local", LimitStoreKind.LOCAL), ("redis", LimitStoreKind.REDIS)):
        on = config_of(limits_cpu, name)
        assert [key.limits for key in on.api_keys] == [high], name
        assert on.limits.store is store
        assert without_limits(name) == without_limits("off")  # else the same gateway as limits off
    assert config_of(limits_cpu, "redis").limits.url == REDIS_URL  # a database of the run's redis-server


def test_the_table_compares_each_setup_with_limits_off_in_the_same_round(limits_cpu: ModuleType) -> None:
    cpu_table = importlib.import_module("cpu_table")
    setups = {s.name: s for s in limits_cpu.SETUPS}

    def segment(index: int, name: str, us: int, *, commands: int = 0) -> object:
        turns = 1000
        return cpu_table.Reading(index, name, us * 1000 * turns, 50 * 1000 * turns, commands * turns, turns,
                                 wall_ns=10**9)  # fmt: skip

    readings = [segment(0, "off", 300), segment(0, "redis", 330, commands=1), segment(1, "redis", 440, commands=1),
                segment(1, "off", 400)]  # fmt: skip
    table = cpu_table.render(readings, list(setups.values()), {"redis": "$0.0100"}, words=limits_cpu.WORDS)
    rows = table.splitlines()
    assert rows[0] == (
        "| setup | gateway CPU per request: median (range) | \N{MULTIPLICATION SIGN} limits off | neighbours on its CPU "
        "| redis-server CPU per request | Redis commands per request | budget spent (GET /v1/gateway/usage) |"
    )
    assert rows[3] == (
        "| limits on Redis, one process (limits-redis.yaml) | 385 µs (330\N{EN DASH}440) | 1.10 | 0% | 50 µs | 1.0 | $0.0100 |"
    )
    assert len(rows) == 4  # "local" was not run: no row

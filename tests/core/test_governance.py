"""The governance settings' own logic: whether limits limit anything."""

from __future__ import annotations

from gateway.core.governance import UNLIMITED, Budget, BudgetPeriod, RateLimits


def test_no_limit_set_limits_nothing() -> None:
    assert not UNLIMITED.any
    assert not RateLimits().any


def test_any_one_limit_limits() -> None:
    assert RateLimits(requests_per_minute=1).any
    assert RateLimits(tokens_per_minute=1).any
    assert RateLimits(concurrent_requests=1).any
    assert RateLimits(budget=Budget(usd=1.0, period=BudgetPeriod.DAY)).any


def test_a_budget_lasts_a_month_unless_told() -> None:
    assert Budget(usd=5.0).period is BudgetPeriod.MONTH

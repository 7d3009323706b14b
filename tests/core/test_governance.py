"""The governance settings' own logic: whether limits limit anything."""

from __future__ import annotations

from gateway.core.governance import UNLIMITED, Budget, BudgetPeriod, Quota, RateLimits


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


def test_a_quota_that_says_the_same_again_is_itself_and_one_that_differs_is_new() -> None:
    quota = Quota(limit=600, remaining=599, reset_seconds=0.1)
    assert quota.again(600, 599, 0.1) is quota
    for figures in ((600, 598, 0.1), (600, 599, 0.2), (700, 599, 0.1)):
        again = quota.again(*figures)
        assert again is not quota and again == Quota(*figures)

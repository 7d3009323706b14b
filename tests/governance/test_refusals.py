"""The 429s of each limit: code, type, message, retry-after and the key's x-ratelimit-* headers."""

from __future__ import annotations

from gateway.core.governance import Budget, BudgetPeriod, LimitKind, Quota
from gateway.core.periods import Span
from gateway.governance.refusals import budget_spent, rate_limited

QUOTAS = (Quota(limit=10, remaining=0, reset_seconds=6.0), None)


def test_requests_and_tokens_say_when_to_come_back() -> None:
    error = rate_limited(LimitKind.TOKENS, subject="key 'a'", limit=100, wait_seconds=1.5, quotas=QUOTAS)
    assert (error.status, error.code, error.type) == (429, "rate_limit_exceeded", "tokens")
    assert "tokens per minute on key 'a': limit 100" in error.message and "1.5s" in error.message
    assert error.headers == {"retry-after": "2", "retry-after-ms": "1500", "x-ratelimit-limit-requests": "10",
                             "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6s"}
    requests = rate_limited(LimitKind.REQUESTS, subject="route 'r'", limit=3, wait_seconds=20, quotas=(None, None))
    assert requests.type == "requests" and requests.headers == {"retry-after": "20", "retry-after-ms": "20000"}


def test_concurrency_asks_for_a_second() -> None:
    error = rate_limited(LimitKind.CONCURRENCY, subject="key 'a'", limit=2, wait_seconds=0, quotas=(None, None))
    assert (error.code, error.type, error.headers["retry-after"]) == ("rate_limit_exceeded", "requests", "1")


def test_a_spent_budget_is_insufficient_quota_until_its_period_ends() -> None:
    error = budget_spent("a", Budget(usd=5, period=BudgetPeriod.WEEK), span=Span("week:x", 1000.0), now=400.0,
                         quotas=QUOTAS)
    assert (error.status, error.code, error.type) == (429, "insufficient_quota", "insufficient_quota")
    assert "$5" in error.message and "week" in error.message and "10m0s" in error.message
    assert error.headers["retry-after"] == "600" and error.headers["x-ratelimit-limit-requests"] == "10"
    total = budget_spent("a", Budget(usd=5, period=BudgetPeriod.TOTAL), span=Span("total", None), now=0.0,
                         quotas=(None, None))
    assert total.headers == {} and "does not renew" in total.message

"""The gateway.usage object: only the limits a key has, and what is left of each."""

from __future__ import annotations

from gateway.core.governance import UNLIMITED, Budget, Quota, RateLimits
from gateway.core.periods import Span
from gateway.governance.usage import usage_report


def test_every_limit_shown() -> None:
    limits = RateLimits(requests_per_minute=10, tokens_per_minute=100, concurrent_requests=3, budget=Budget(usd=2.0))
    report = usage_report(
        "a", limits, quotas=(Quota(10, 9, 6.0), Quota(100, -5, 61.23456)), in_use=1, spent_usd=2.5,
        span=Span("month:2026-11", 1_796_083_200.0),
    )  # fmt: skip
    assert report == {"object": "gateway.usage", "key": "a", "limits": {
        "requests": {"limit": 10, "remaining": 9, "reset_seconds": 6.0},
        "tokens": {"limit": 100, "remaining": 0, "reset_seconds": 61.235},
        "concurrency": {"limit": 3, "in_use": 1},
        "budget": {"usd": 2.0, "period": "month", "spent_usd": 2.5, "remaining_usd": 0.0, "resets_at": 1_796_083_200},
    }}


def test_an_unlimited_key_shows_no_limits() -> None:
    assert usage_report("a", UNLIMITED, quotas=(None, None), in_use=0, spent_usd=0.0, span=None)["limits"] == {}

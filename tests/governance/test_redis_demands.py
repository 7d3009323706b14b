"""What one request asks of the Redis script, in admission order, and what its settlement gives back."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.core.governance import UNLIMITED, Budget, BudgetPeriod, LimitKind, Quota, RateLimits
from gateway.core.periods import Spans, budget_span
from gateway.governance.redis_demands import (
    Demand,
    Holding,
    admission_checks,
    key_quotas,
    quotas_of,
    released,
    settlement,
)
from gateway.governance.redis_script import Item, ItemKind, Outcome, bucket_key, slots_key, spent_key

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
KEY_LIMITS = RateLimits(requests_per_minute=10, tokens_per_minute=100, concurrent_requests=2,
                        budget=Budget(usd=5.0, period=BudgetPeriod.DAY))
ROUTE_LIMITS = RateLimits(requests_per_minute=50, tokens_per_minute=60)


def test_checks_go_budget_then_the_key_then_the_route_tokens_capped_at_each_capacity() -> None:
    span = budget_span(BudgetPeriod.DAY, NOW)
    checks = admission_checks("a", KEY_LIMITS, route=("r", ROUTE_LIMITS), tokens=80, span=span)
    assert [(check.kind, check.subject) for check in checks] == [
        (LimitKind.BUDGET, "key"), (LimitKind.CONCURRENCY, "key"), (LimitKind.REQUESTS, "key"),
        (LimitKind.TOKENS, "key"), (LimitKind.REQUESTS, "route"), (LimitKind.TOKENS, "route"),
    ]  # fmt: skip
    assert [check.item for check in checks] == [
        Item(ItemKind.SPEND, spent_key("a", "day:2026-11-29"), 5.0),
        Item(ItemKind.SLOTS, slots_key("key", "a"), 2, 1),
        Item(ItemKind.BUCKET, bucket_key("key", "a", "requests"), 10, 1),
        Item(ItemKind.BUCKET, bucket_key("key", "a", "tokens"), 100, 80),
        Item(ItemKind.BUCKET, bucket_key("route", "r", "requests"), 50, 1),
        Item(ItemKind.BUCKET, bucket_key("route", "r", "tokens"), 60, 60),  # one large request is not refused for ever
    ]


def made(tenant: str) -> Demand:
    span = budget_span(BudgetPeriod.DAY, NOW)
    checks = admission_checks(tenant, KEY_LIMITS, route=("r", ROUTE_LIMITS), tokens=0, span=span)
    return Demand.of(checks, made_for=(KEY_LIMITS, ROUTE_LIMITS, span.id))


def test_a_demand_is_written_once_and_takes_each_requests_tokens_up_to_each_capacity() -> None:
    demand = made("a")
    args = demand.args_for(80)
    assert args[:4] == ["b", spent_key("a", "day:2026-11-29"), 5.0, 0]
    assert args[12:16] == ["q", bucket_key("key", "a", "tokens"), 100, 80]
    assert args[20:24] == ["q", bucket_key("route", "r", "tokens"), 60, 60]
    assert demand.args_for(10)[15] == 10 and demand.args[15] == 0  # its own arguments are left as written
    assert demand.fits(KEY_LIMITS, ROUTE_LIMITS, "day:2026-11-29")
    assert not demand.fits(RateLimits(requests_per_minute=10), ROUTE_LIMITS, "day:2026-11-29")
    assert not demand.fits(KEY_LIMITS, ROUTE_LIMITS, "day:2026-11-30")


def test_the_headers_show_the_keys_quotas_else_the_routes() -> None:
    checks = admission_checks("a", RateLimits(tokens_per_minute=100), route=("r", ROUTE_LIMITS), tokens=5, span=None)
    outcome = Outcome(refused=None, wait_seconds=0.0, values=((95, 3000), (49, 1200), (55, 5000)))
    assert quotas_of(checks, outcome) == (Quota(50, 49, 1.2), Quota(100, 95, 3.0))
    assert key_quotas(checks, outcome) == (None, Quota(100, 95, 3.0))


def test_a_settlement_frees_slots_gives_back_unused_tokens_and_charges_the_budget() -> None:
    held = made("a").held("a", tokens=80, budget=KEY_LIMITS.budget, process="p")
    assert held.slots == (slots_key("key", "a"),)
    assert held.buckets == ((bucket_key("key", "a", "tokens"), 100, 80), (bucket_key("route", "r", "tokens"), 60, 60))
    assert settlement(held, used=30, cost_usd=0.2, spans=(Spans(), NOW)) == [
        Item(ItemKind.SLOTS, slots_key("key", "a"), 0, -1),
        Item(ItemKind.BUCKET, bucket_key("key", "a", "tokens"), 100, 50),
        Item(ItemKind.BUCKET, bucket_key("route", "r", "tokens"), 60, 30),
        Item(ItemKind.SPEND, spent_key("a", "day:2026-11-29"), datetime(2026, 12, 1, tzinfo=UTC).timestamp(), 0.2),
    ]
    unknown = settlement(held, used=None, cost_usd=0.0, spans=(Spans(), NOW))  # usage unknown, nothing spent
    assert unknown == [Item(ItemKind.SLOTS, slots_key("key", "a"), 0, -1)]
    assert released(held)[1:] == [Item(ItemKind.BUCKET, bucket_key("key", "a", "tokens"), 100, 80),
                                   Item(ItemKind.BUCKET, bucket_key("route", "r", "tokens"), 60, 60)]


def test_holding_counts_the_slots_in_flight_and_forgets_keys_once_free() -> None:
    checks = admission_checks("a", RateLimits(concurrent_requests=2), route=("r", RateLimits(concurrent_requests=9)),
                              tokens=0, span=None)
    held = Demand.of(checks, made_for=(UNLIMITED, UNLIMITED, None)).held("a", tokens=0, budget=None, process="p")
    holding = Holding()
    holding.took(held)
    holding.took(held)
    holding.freed(held)
    assert holding.corrections() == [Item.slots(slots_key("key", "a"), 0, 1), Item.slots(slots_key("route", "r"), 0, 1)]
    holding.freed(held)
    assert holding.corrections() == [Item.slots(slots_key("key", "a"), 0, 0), Item.slots(slots_key("route", "r"), 0, 0)]
    holding.forget_free()
    assert holding.corrections() == []

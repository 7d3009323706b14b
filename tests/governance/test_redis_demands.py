"""What one request asks of the leases or the Redis script, in admission order, and what its settlement gives back."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from gateway.core.governance import UNLIMITED, Budget, BudgetPeriod, LimitKind, Quota, RateLimits
from gateway.core.periods import budget_span
from gateway.governance.redis_demands import Demand, admission_checks, quotas_of
from gateway.governance.redis_leases import BucketLease, Holding
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


def made(tenant: str, holding: Holding) -> Demand:
    span = budget_span(BudgetPeriod.DAY, NOW)
    checks = admission_checks(tenant, KEY_LIMITS, route=("r", ROUTE_LIMITS), tokens=0, span=span)
    return Demand.of(checks, holding=holding, made_for=(KEY_LIMITS, ROUTE_LIMITS), whose=(tenant, "p"),
                     span=span)


def test_a_demand_draws_on_one_lease_per_redis_key_and_fits_its_limits_only() -> None:
    holding = Holding()
    demand = made("a", holding)
    assert demand.leases[0] is None  # the budget: no lease
    assert demand.leases[1] is holding.slot(slots_key("key", "a"), 2)
    assert demand.tokens == (holding.bucket(bucket_key("key", "a", "tokens"), 100),
                             holding.bucket(bucket_key("route", "r", "tokens"), 60))
    assert made("b", holding).requests[1] is demand.requests[1]  # the route's bucket: one lease for every key
    midnight = datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    assert demand.fits(KEY_LIMITS, ROUTE_LIMITS, midnight - 1)
    assert not demand.fits(RateLimits(requests_per_minute=10), ROUTE_LIMITS, midnight - 1)
    assert not demand.fits(KEY_LIMITS, ROUTE_LIMITS, midnight)  # the day's budget period ended


def lease_all(demand: Demand, *, left: float, slots: int) -> None:
    for lease in (*demand.requests, *demand.tokens):
        lease.left = left
    for slot in demand.slots:
        slot.leased = slots


def test_a_request_is_taken_from_the_leases_only_when_they_cover_all_of_it() -> None:
    demand = made("a", Holding())
    assert not demand.take(10, NOW)  # nothing leased yet
    lease_all(demand, left=100, slots=1)
    demand.tokens[1].left = 5
    assert not demand.take(10, NOW)  # the route's tokens fall short: nothing taken
    assert [lease.left for lease in (*demand.requests, *demand.tokens)] == [100, 100, 100, 5]
    assert demand.slots[0].in_flight == 0
    demand.tokens[1].left = 60
    assert demand.take(80, NOW)  # each bucket takes at most its capacity
    assert [lease.left for lease in (*demand.requests, *demand.tokens)] == [99, 99, 20, 0]
    assert demand.slots[0].in_flight == 1
    assert not demand.take(0, NOW)  # the one slot is in use


def test_what_the_leases_do_not_cover_is_asked_of_redis_with_a_top_up() -> None:
    demand = made("a", Holding())
    lease_all(demand, left=0, slots=0)
    demand.tokens[0].left = 30
    asked = demand.ask(80, NOW)
    assert [asked.args[at] for at in range(0, len(asked.args), 4)] == ["b", "S", "Q", "Q", "Q", "Q"]
    assert asked.args[12:16] == ["Q", bucket_key("key", "a", "tokens"), 100, 50]  # 30 of the 80 covered
    assert demand.tokens[0].left == 0
    again = demand.ask(80, NOW)  # while the first asks, the next asks no top-up
    assert [again.args[at] for at in range(0, len(again.args), 4)] == ["b", "s", "q", "q", "q", "q"]
    refused = Outcome(refused=2, wait_seconds=1.0, values=((0, 0), (1, 0), (0, 0), (0, 0), (9, 0), (9, 0)),
                      granted=(0,) * 6)
    asked.answered(refused, NOW)
    assert demand.tokens[0].left == 30  # what it covered is back
    admitted = Outcome(refused=None, wait_seconds=0.0, values=((0, 0), (2, 0), (8, 0), (20, 0), (40, 0), (0, 0)),
                       granted=(0, 1, 1, 10, 4, 0))
    again.answered(admitted, NOW)  # no top-up asked, none granted... but a granted one counts
    assert demand.slots[0].leased == 2 and demand.slots[0].in_flight == 1
    assert [lease.left for lease in (*demand.requests, *demand.tokens)] == [1, 4, 40, 0]


def test_a_debt_is_charged_before_asking() -> None:
    demand = made("a", Holding())
    demand.tokens[0].left = -40
    asked = demand.ask(10, NOW)
    assert asked.debts == [Item(ItemKind.BUCKET, bucket_key("key", "a", "tokens"), 100, -40)]
    assert demand.tokens[0].left == 0


def test_the_headers_show_the_keys_quotas_else_the_routes() -> None:
    holding = Holding()
    checks = admission_checks("a", RateLimits(tokens_per_minute=100), route=("r", ROUTE_LIMITS), tokens=5, span=None)
    demand = Demand.of(checks, holding=holding, made_for=(UNLIMITED, UNLIMITED), whose=("a", "p"))
    key_tokens, route_requests, _ = demand.leases
    assert isinstance(route_requests, BucketLease) and isinstance(key_tokens, BucketLease)
    key_tokens.reported(90, NOW)
    key_tokens.left = 5
    route_requests.reported(49, NOW)
    assert demand.quotas(NOW) == (Quota(50, 49, 1.2), Quota(100, 95, 3.0))
    assert demand.quotas(NOW + 3) == (Quota(50, 50, 0.0), Quota(100, 100, 0.0))  # refilled since, never over the limit
    assert quotas_of(checks, demand.leases, NOW, key_only=True) == (None, Quota(100, 95, 3.0))


def test_a_settlement_reconciles_tokens_in_the_leases_and_gives_back_more_than_a_lease_keeps() -> None:
    demand = made("a", Holding())
    lease_all(demand, left=100, slots=2)
    assert demand.take(80, NOW)
    held = demand.held(80)
    # the key's tokens: 20 left and 50 unused; the route's: 40 and 30. A lease keeps a tenth of the
    # limit (10 and 6 tokens; of 2 slots, none): the rest goes back to Redis
    assert held.settle(30) == [
        Item(ItemKind.SLOTS, slots_key("key", "a"), 0, -2),
        Item(ItemKind.BUCKET, bucket_key("key", "a", "tokens"), 100, 60),
        Item(ItemKind.BUCKET, bucket_key("route", "r", "tokens"), 60, 64),
    ]
    assert [lease.left for lease in demand.tokens] == [10, 6]
    assert (demand.slots[0].leased, demand.slots[0].in_flight) == (0, 0)
    demand.tokens[0].open = False  # given back for good: what it would take goes to Redis
    demand.slots[0].leased = 1
    assert demand.take(5, NOW)
    assert demand.held(5).settle(4)[1] == (
        Item(ItemKind.BUCKET, bucket_key("key", "a", "tokens"), 100, 1))
    # its spend is charged to the day it was admitted in, kept a day past its end
    assert demand.spend == (spent_key("a", "day:2026-11-29"), datetime(2026, 12, 1, tzinfo=UTC).timestamp())


def test_no_request_is_taken_from_slots_leased_before_the_concurrency_limit_was_lowered() -> None:
    holding = Holding()
    higher = dataclasses.replace(KEY_LIMITS, concurrent_requests=20)
    demand = Demand.of(admission_checks("a", higher, route=("r", ROUTE_LIMITS), tokens=0, span=None),
                       holding=holding, made_for=(higher, ROUTE_LIMITS), whose=("a", "p"))
    lease_all(demand, left=100, slots=5)
    assert demand.take(1, NOW) and demand.slots[0].in_flight == 1
    lowered = made("a", holding)  # KEY_LIMITS: 2 concurrent requests; other replicas may hold slots leased under 20
    assert holding.take_resized() == [Item.slots(slots_key("key", "a"), 0, -4)]
    assert not lowered.take(1, NOW)  # until Redis grants slots under 2


def test_a_settlement_gives_back_what_was_reserved_under_the_limit_of_its_admission() -> None:
    holding = Holding()
    demand = made("a", holding)
    lease_all(demand, left=100, slots=1)
    assert demand.take(80, NOW)  # the route's 60 tokens a minute: 60 of it reserved
    raised = dataclasses.replace(ROUTE_LIMITS, tokens_per_minute=600)
    Demand.of(admission_checks("a", KEY_LIMITS, route=("r", raised), tokens=0, span=None), holding=holding,
              made_for=(KEY_LIMITS, raised), whose=("a", "p"))  # a reload raised it meanwhile
    route_tokens = demand.tokens[1]
    assert route_tokens.capacity == 600 and route_tokens.left == 40
    back = demand.held(80).settle(10)  # 60 reserved, 10 used: 50 back (not 80 - 10), over a lease of 60 to Redis
    assert back[-1] == Item.bucket(route_tokens.key, 600, 40 + 50 - 60) and route_tokens.left == 60

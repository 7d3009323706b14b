"""LocalGovernor: routes, budgets, concurrency, requests and tokens of a key then of its route, in this process."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from gateway.core.errors import PermissionDeniedError, RateLimitedError
from gateway.core.governance import Budget, BudgetPeriod, LimitKind, Quota, RateLimits
from gateway.core.settings import Config
from gateway.core.tree import Route
from gateway.governance.admission import Admission
from gateway.governance.local import LocalGovernor
from gateway.governance.policies import INLINE_ROUTE, Policies
from gateway.governance.stored_keys import StoredKey, StoredKeys
from tests.support.governance import Clock, Heard, api_key, limits_config


def governor_of(config: Config) -> tuple[LocalGovernor, Clock, Heard]:
    clock, heard = Clock(), Heard()
    return LocalGovernor(Policies(config), listener=heard, clock=clock), clock, heard


async def admitted(governor: LocalGovernor, tenant: str, route: Route, tokens: int = 0) -> Admission:
    admission = await governor.admit(tenant, route, tokens=tokens)
    assert admission is not None
    return admission


async def test_nothing_limited_admits_without_a_record() -> None:
    config = limits_config(keys=(api_key("a"),))
    governor, _, _ = governor_of(config)
    assert await governor.admit("a", config.routes["fast"], tokens=10) is None
    assert (await governor.usage("a"))["limits"] == {}


async def test_requests_per_minute_refuse_the_one_past_the_limit_then_refill() -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=3)),))
    governor, clock, heard = governor_of(config)
    route = config.routes["fast"]
    quotas = [(await admitted(governor, "a", route)).requests for _ in range(3)]
    assert [quota.remaining for quota in quotas if quota] == [2, 1, 0]
    with pytest.raises(RateLimitedError) as refused:
        await governor.admit("a", route, tokens=0)
    error = refused.value
    assert (error.status, error.code, error.type) == (429, "rate_limit_exceeded", "requests")
    assert error.headers["retry-after"] == "20" and error.headers["retry-after-ms"] == "20000"
    assert error.headers["x-ratelimit-remaining-requests"] == "0"
    assert heard.refusals == [("a", "fast", LimitKind.REQUESTS)]
    clock.now += 20  # 3 a minute: one back every 20 s
    await admitted(governor, "a", route)


async def test_tokens_take_at_most_the_capacity_and_settle_gives_back_what_was_not_used() -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=1000)),))
    governor, _, _ = governor_of(config)
    route = config.routes["fast"]
    big = await admitted(governor, "a", route, tokens=5000)  # one large request is not refused for ever
    assert big.tokens == Quota(limit=1000, remaining=0, reset_seconds=pytest.approx(60.0))
    governor.settle(big, tokens=400, cost_usd=0.0)  # reserved 1000 of the bucket, used 400
    usage = await governor.usage("a")
    assert usage["limits"]["tokens"]["remaining"] == 600
    with pytest.raises(RateLimitedError) as refused:
        await governor.admit("a", route, tokens=700)
    assert refused.value.type == "tokens" and refused.value.headers["x-ratelimit-remaining-tokens"] == "600"
    small = await admitted(governor, "a", route, tokens=600)
    governor.settle(small, tokens=900, cost_usd=0.0)  # used more than reserved: below zero
    assert (await governor.usage("a"))["limits"]["tokens"]["remaining"] == 0
    governor.settle(small, tokens=0, cost_usd=0.0)  # settled once only
    assert (await governor.usage("a"))["limits"]["tokens"]["remaining"] == 0


async def test_a_refusal_by_the_tokens_takes_nothing_of_the_requests_or_the_slot() -> None:
    limits = RateLimits(requests_per_minute=10, tokens_per_minute=100, concurrent_requests=2)
    config = limits_config(keys=(api_key("a", limits=limits),))
    governor, _, _ = governor_of(config)
    route = config.routes["fast"]
    await admitted(governor, "a", route, tokens=100)
    with pytest.raises(RateLimitedError) as refused:
        await governor.admit("a", route, tokens=50)
    assert refused.value.type == "tokens"
    usage = (await governor.usage("a"))["limits"]
    assert (usage["requests"]["remaining"], usage["tokens"]["remaining"]) == (9, 0)
    assert usage["concurrency"] == {"limit": 2, "in_use": 1}


async def test_unknown_usage_leaves_the_reservation() -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=100)),))
    governor, _, _ = governor_of(config)
    admission = await admitted(governor, "a", config.routes["fast"], tokens=30)
    governor.settle(admission, tokens=None, cost_usd=0.0)
    assert (await governor.usage("a"))["limits"]["tokens"]["remaining"] == 70


async def test_concurrency_slots_are_held_until_settled() -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=2)),))
    governor, _, heard = governor_of(config)
    route = config.routes["fast"]
    first, _second = await admitted(governor, "a", route), await admitted(governor, "a", route)
    with pytest.raises(RateLimitedError) as refused:
        await governor.admit("a", route, tokens=0)
    assert refused.value.code == "rate_limit_exceeded" and "concurrent" in refused.value.message
    assert refused.value.headers["retry-after"] == "1"
    assert (await governor.usage("a"))["limits"]["concurrency"] == {"limit": 2, "in_use": 2}
    governor.settle(first, tokens=None, cost_usd=0.0)
    await admitted(governor, "a", route)
    assert heard.refusals == [("a", "fast", LimitKind.CONCURRENCY)]


async def test_a_refusal_by_the_route_takes_nothing_of_the_key() -> None:
    config = limits_config(
        keys=(api_key("a", limits=RateLimits(requests_per_minute=10, tokens_per_minute=100, concurrent_requests=1)),
              api_key("b")),
        routes={"smart": RateLimits(requests_per_minute=1)},
    )
    governor, _, heard = governor_of(config)
    smart = config.routes["smart"]
    only = await admitted(governor, "b", smart)
    assert only.requests == Quota(limit=1, remaining=0, reset_seconds=pytest.approx(60.0))  # the key has none: the route's
    with pytest.raises(RateLimitedError) as refused:
        await governor.admit("a", smart, tokens=50)
    assert "route 'smart'" in refused.value.message
    headers = refused.value.headers  # the route refused: its quota for requests, the key's for tokens
    assert (headers["x-ratelimit-limit-requests"], headers["x-ratelimit-remaining-requests"]) == ("1", "0")
    assert headers["x-ratelimit-limit-tokens"] == "100"
    usage = (await governor.usage("a"))["limits"]
    assert (usage["requests"]["remaining"], usage["tokens"]["remaining"]) == (10, 100)
    assert heard.refusals == [("a", "smart", LimitKind.REQUESTS)]
    await admitted(governor, "a", config.routes["fast"])  # another route is not limited, and the key's one slot is free


async def test_budget_refuses_once_spent_until_the_period_ends() -> None:
    budget = Budget(usd=1.0, period=BudgetPeriod.DAY)
    config = limits_config(keys=(api_key("a", limits=RateLimits(budget=budget)),))
    wall = Clock(now=datetime(2026, 11, 29, 18, tzinfo=UTC).timestamp())
    clock, heard = Clock(), Heard()
    governor = LocalGovernor(Policies(config), listener=heard, clock=clock, wall=wall)
    route = config.routes["fast"]
    governor.settle(await admitted(governor, "a", route), tokens=10, cost_usd=0.6)
    governor.settle(await admitted(governor, "a", route), tokens=10, cost_usd=0.6)  # in flight: may overshoot
    assert heard.spends == [("a", 0.6, 1.0), ("a", 1.2, 1.0)]
    with pytest.raises(RateLimitedError) as refused:
        await governor.admit("a", route, tokens=0)
    error = refused.value
    assert (error.status, error.code, error.type) == (429, "insufficient_quota", "insufficient_quota")
    assert error.headers["retry-after"] == str(6 * 3600)
    assert heard.refusals == [("a", "fast", LimitKind.BUDGET)]
    usage = (await governor.usage("a"))["limits"]["budget"]
    assert usage == {"usd": 1.0, "period": "day", "spent_usd": 1.2, "remaining_usd": 0.0,
                     "resets_at": int(datetime(2026, 11, 30, tzinfo=UTC).timestamp())}
    wall.now += 6 * 3600  # the next day
    await admitted(governor, "a", route)


async def test_a_total_budget_gives_no_retry_after() -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(budget=Budget(usd=0.5, period=BudgetPeriod.TOTAL))),))
    governor, _, _ = governor_of(config)
    governor.settle(await admitted(governor, "a", config.routes["fast"]), tokens=1, cost_usd=0.5)
    with pytest.raises(RateLimitedError) as refused:
        await governor.admit("a", config.routes["fast"], tokens=0)
    assert "retry-after" not in refused.value.headers


async def test_a_restricted_key_is_refused_another_route_with_403_before_any_limit() -> None:
    config = limits_config(keys=(api_key("a", routes={"fast"}, limits=RateLimits(requests_per_minute=1)),))
    governor, _, heard = governor_of(config)
    with pytest.raises(PermissionDeniedError):
        await governor.admit("a", config.routes["smart"], tokens=0)
    assert heard.refusals == []
    await admitted(governor, "a", config.routes["fast"])  # the refusal took nothing


async def test_a_restricted_key_without_limits_is_checked_but_not_counted() -> None:
    config = limits_config(keys=(api_key("a", routes={"fast"}),))
    governor, _, _ = governor_of(config)
    assert await governor.admit("a", config.routes["fast"], tokens=5) is None


async def test_admin_keys_are_unlimited_whatever_the_defaults() -> None:
    config = limits_config(admins=("root",), defaults=RateLimits(requests_per_minute=1))
    governor, _, _ = governor_of(config)
    for _ in range(5):
        assert await governor.admit("root", config.routes["fast"], tokens=0) is None
    await admitted(governor, "default", config.routes["fast"])
    with pytest.raises(RateLimitedError):
        await governor.admit("default", config.routes["fast"], tokens=0)


async def test_a_successor_takes_the_counts_and_the_new_limits() -> None:
    before = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=10, concurrent_requests=5)),))
    governor, clock, _ = governor_of(before)
    in_flight = [await admitted(governor, "a", before.routes["fast"]) for _ in range(4)]
    after = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=5, concurrent_requests=5)),))
    successor = LocalGovernor(Policies(after), ledger=governor.ledger, clock=clock)
    usage = (await successor.usage("a"))["limits"]
    assert usage["requests"]["remaining"] == 5 and usage["concurrency"]["in_use"] == 4
    successor.settle(in_flight[0], tokens=None, cost_usd=0.0)  # an admission of the old one, settled by the new
    assert (await successor.usage("a"))["limits"]["concurrency"]["in_use"] == 3


async def test_a_limit_raised_while_the_key_is_refused_refills_at_the_new_rate() -> None:
    """A reload (or a PATCH) raising a refused key's limit lets it through as the new limit refills, not the old."""
    before = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=1)),))
    governor, clock, _ = governor_of(before)
    await admitted(governor, "a", before.routes["fast"])
    with pytest.raises(RateLimitedError):
        await governor.admit("a", before.routes["fast"], tokens=0)
    after = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=600)),))
    successor = LocalGovernor(Policies(after), ledger=governor.ledger, clock=clock)
    with pytest.raises(RateLimitedError):  # a refusal under the new limit: the bucket takes it on
        await successor.admit("a", after.routes["fast"], tokens=0)
    clock.now += 1.0  # 10 a second at 600 a minute; at the old 1 a minute, 1/60 of one
    await admitted(successor, "a", after.routes["fast"])


async def test_a_stored_key_patched_is_held_to_its_new_limits_at_its_next_request() -> None:
    """What a tenant is held to is worked out once per policy and route: a PATCH (a new policy) is seen at once."""
    stored = StoredKeys()
    config = limits_config()
    governor = LocalGovernor(Policies(config, stored=stored), clock=Clock())
    route = config.routes["fast"]
    stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", limits=RateLimits(requests_per_minute=1))}
    await admitted(governor, "issued", route)
    with pytest.raises(RateLimitedError):
        await governor.admit("issued", route, tokens=0)
    stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", limits=RateLimits(concurrent_requests=5))}
    assert (await admitted(governor, "issued", route)).requests is None  # no requests limit any more
    stored.by_name = {}  # revoked: the defaults (none)
    assert await governor.admit("issued", route, tokens=0) is None


async def test_a_key_going_from_route_to_route_is_held_to_each_route_s_limits() -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=100)),),
                           routes={"smart": RateLimits(requests_per_minute=1)})
    governor, _, _ = governor_of(config)
    fast, smart = config.routes["fast"], config.routes["smart"]
    assert (await admitted(governor, "a", smart)).requests == Quota(limit=1, remaining=0, reset_seconds=pytest.approx(60.0))
    assert (await admitted(governor, "a", fast)).requests is None
    with pytest.raises(RateLimitedError):
        await governor.admit("a", smart, tokens=0)
    assert (await admitted(governor, "a", fast, tokens=10)).tokens == Quota(limit=100, remaining=90,
                                                                            reset_seconds=pytest.approx(6.0))


async def test_terms_are_kept_per_route_and_remade_when_the_route_s_limits_change() -> None:
    """A key using two routes in turn keeps the terms of each; x-gateway-config's routes (a Route each, one name,
    no limits) share theirs; a route whose limits a reload changed is held to them at its next request."""
    config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=100)),),
                           routes={"smart": RateLimits(requests_per_minute=1)})
    governor, _, _ = governor_of(config)
    fast, smart = config.routes["fast"], config.routes["smart"]
    kept = governor.terms("a", fast)
    await admitted(governor, "a", smart)
    assert governor.terms("a", fast) is kept
    inline = governor.terms("a", dataclasses.replace(fast, name=INLINE_ROUTE))
    assert governor.terms("a", dataclasses.replace(fast, name=INLINE_ROUTE)) is inline
    reloaded = dataclasses.replace(smart, limits=RateLimits(requests_per_minute=2))
    with pytest.raises(RateLimitedError, match="route 'smart': limit 2"):  # the first one's still counted
        await governor.admit("a", reloaded, tokens=0)


async def test_a_stored_key_patched_to_fewer_routes_is_refused_a_route_it_used_at_its_next_request() -> None:
    stored = StoredKeys()
    config = limits_config()
    governor = LocalGovernor(Policies(config, stored=stored), clock=Clock())
    fast, smart = config.routes["fast"], config.routes["smart"]
    limits = RateLimits(requests_per_minute=100)
    stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", limits=limits)}
    await admitted(governor, "issued", fast)
    await admitted(governor, "issued", smart)
    stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", routes=frozenset({"smart"}), limits=limits)}
    with pytest.raises(PermissionDeniedError, match="may not use the route 'fast'"):
        await governor.admit("issued", fast, tokens=0)
    await admitted(governor, "issued", smart)

"""A key's spend as one process knows it: budgets checked without a round trip, refused only on Redis' word."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.core.errors import RateLimitedError
from gateway.core.governance import UNLIMITED, Budget, BudgetPeriod, RateLimits
from gateway.core.periods import budget_span
from gateway.governance.admission import Admission
from gateway.governance.local import LocalGovernor
from gateway.governance.policies import Policies
from gateway.governance.redis_demands import Demand, admission_checks
from gateway.governance.redis_leases import Holding
from gateway.governance.redis_script import Outcome, spent_key
from gateway.governance.redis_spending import FRESH_SECONDS, Spending
from tests.support.governance import Clock, Heard, api_key, limits_config, redis_governor
from tests.support.redis_monitor import watched
from tests.support.servers import flush_redis
from tests.support.waiting import eventually

BUDGET = Budget(usd=1.0, period=BudgetPeriod.DAY)
CONFIG = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=1000, budget=BUDGET)),))
NOON = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
SPENT = spent_key("a", "day:2026-11-29")


def demand() -> Demand:
    """The checks of a's requests on fast, today."""
    limits = CONFIG.api_keys[0].limits
    assert limits is not None
    span = budget_span(BudgetPeriod.DAY, NOON)
    checks = admission_checks("a", limits, route=("fast", UNLIMITED), tokens=0, span=span)
    return Demand.of(
        checks, holding=Holding(), made_for=(limits, UNLIMITED), whose=("a", "p"), span=span, budget=limits.budget
    )


def test_spend_settled_goes_as_one_item_per_key_and_counts_until_redis_answers() -> None:
    heard = Heard()
    spending = Spending(heard, fallback=LocalGovernor(Policies(CONFIG)), owner="p")
    assert not spending.left(SPENT, 1.0, now=10.0)  # nothing reported yet: Redis is asked
    spending.seen("a", SPENT, 0.5, now=10.0)
    assert spending.left(SPENT, 1.0, now=10.0)
    assert not spending.left(SPENT, 1.0, now=10.0 + FRESH_SECONDS)  # reported too long ago: Redis is asked
    [first] = spending.add(demand(), 0.25)
    assert spending.add(demand(), 0.125) == []  # added to the item waiting
    assert first.items[0].amount == 0.375 and first.charge == ("a", 1.0)
    assert not spending.left(SPENT, 0.8, now=10.0)  # 0.5 reported and 0.375 on its way
    spending.sending()
    [second] = spending.add(demand(), 0.0625)
    assert second is not first
    spending.told([[first]], [Outcome(refused=None, wait_seconds=0, values=(("0.875", 0),))], now=11.0)
    assert spending.reported[SPENT] == 0.875 and spending.pending[SPENT] == 0.0625
    assert spending.left(SPENT, 1.0, now=11.0)  # the settlement's reply is a report too
    assert heard.spends == [("a", 0.875, 1.0)]


@pytest.fixture
async def url(redis_url: str) -> str:
    await flush_redis(redis_url)
    return redis_url


async def test_many_settlements_add_one_spend_to_redis(url: str) -> None:
    governor = redis_governor(url, CONFIG, wall=Clock(NOON))
    route = CONFIG.routes["fast"]
    try:
        admissions: list[Admission | None] = [await governor.admit("a", route, tokens=0)]  # the first asks Redis
        async with watched(url) as seen:
            admissions += await asyncio.gather(*(governor.admit("a", route, tokens=0) for _ in range(19)))
            for admission in admissions:
                assert admission is not None
                governor.settle(admission, tokens=None, cost_usd=0.01)
            await eventually(lambda: governor.spending.reported.get(SPENT, 0) > 0.19, what="the spend sent")
        assert len(seen.scripted_naming("INCRBYFLOAT")) == 1
        assert seen.sent_naming("EVALSHA") and len(seen.sent_naming("EVALSHA")) <= 2  # one, or a lease's give-back too
    finally:
        await governor.close()


async def test_a_budget_that_looks_spent_is_refused_only_on_redis_word(url: str) -> None:
    wall = Clock(NOON)
    governor = redis_governor(url, CONFIG, wall=wall)
    route = CONFIG.routes["fast"]
    client = aioredis.Redis.from_url(url)
    try:
        spending = await governor.admit("a", route, tokens=0)
        assert spending is not None
        governor.settle(spending, tokens=None, cost_usd=1.5)
        await eventually(lambda: governor.spending.reported.get(SPENT) == 1.5, what="the spend reported")
        async with watched(url) as seen:
            with pytest.raises(RateLimitedError) as refused:
                await governor.admit("a", route, tokens=0)  # the lease covers the request: the budget does not
        assert refused.value.code == "insufficient_quota"
        assert len(seen.sent_naming("EVALSHA")) == 1  # Redis was asked
        await client.delete(SPENT)  # Redis says otherwise now (an operator set the spend back)
        assert await governor.admit("a", route, tokens=0) is not None
        assert governor.spending.reported[SPENT] == 0.0
    finally:
        await governor.close()
        await client.aclose()


async def test_a_replica_idle_since_its_last_report_asks_redis_before_it_admits(url: str) -> None:
    """Another replica spent the budget while this one was idle: its next admission is refused, not let through
    on the spend it last heard of."""
    clock = Clock()
    idle, other = redis_governor(url, CONFIG, wall=Clock(NOON), clock=clock), redis_governor(url, CONFIG, wall=Clock(NOON))
    route = CONFIG.routes["fast"]
    try:
        first = await idle.admit("a", route, tokens=0)  # its lease and the spend reported ($0)
        assert first is not None
        idle.settle(first, tokens=None, cost_usd=0.0)
        spent = await other.admit("a", route, tokens=0)
        assert spent is not None
        other.settle(spent, tokens=None, cost_usd=1.5)
        await eventually(lambda: other.spending.reported.get(SPENT) == 1.5, what="the other replica's spend in Redis")
        clock.now += FRESH_SECONDS  # idle since
        with pytest.raises(RateLimitedError) as refused:
            await idle.admit("a", route, tokens=0)
        assert refused.value.code == "insufficient_quota"
    finally:
        await idle.close()
        await other.close()


async def test_a_settlement_whose_reply_never_came_is_charged_once(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis ran the call but its reply never came (a stall past the client's timeout): the spend, sent again once
    Redis answers, is added once."""
    governor = redis_governor(url, CONFIG, wall=Clock(NOON), retry_seconds=0.1)
    route = CONFIG.routes["fast"]
    script, lost = governor._script, []

    async def ran_but_lost(**call: Any) -> Any:
        reply = await script(**call)
        if not lost and any(arg == "S" for arg in call["args"]):
            lost.append(call)
            raise TimeoutError("the reply never came")
        return reply

    client = aioredis.Redis.from_url(url)
    try:
        admission = await governor.admit("a", route, tokens=0)
        assert admission is not None
        monkeypatch.setattr(governor, "_script", ran_but_lost)
        governor.settle(admission, tokens=None, cost_usd=0.25)
        await eventually(lambda: governor.spending.reported.get(SPENT, 0.0) > 0, what="the spend sent again, answered")
        assert lost and governor.spending.reported[SPENT] == 0.25
        assert float(await client.get(SPENT)) == 0.25
    finally:
        await governor.close()
        await client.aclose()

"""Redis gone mid-run: requests are still admitted, counted by this process alone, with one warning; shared again once back."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from gateway.core.errors import RateLimitedError
from gateway.core.governance import Budget, BudgetPeriod, RateLimits
from gateway.core.stores import RedisConnection
from gateway.governance.local import Taken
from gateway.governance.policies import Policies
from gateway.governance.redis import RedisGovernor
from gateway.governance.redis_demands import Held
from tests.support.governance import Clock, api_key, limits_config, redis_governor
from tests.support.servers import RedisProcess
from tests.support.waiting import eventually

LIMITS = RateLimits(requests_per_minute=5, concurrent_requests=4)
CONFIG = limits_config(keys=(api_key("a", limits=LIMITS),))


async def test_a_stopped_redis_never_fails_a_request_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    clock = Clock()
    governor = redis_governor(server.url, CONFIG, clock=clock, retry_seconds=5)
    route = CONFIG.routes["fast"]
    try:
        shared = [await governor.admit("a", route, tokens=0) for _ in range(2)]
        assert all(admission is not None and isinstance(admission.handle, Held) for admission in shared)
        server.stop()
        with caplog.at_level(logging.WARNING, logger="gateway.governance"):
            alone = await governor.admit("a", route, tokens=0)  # Redis is found gone here: counted locally
            assert alone is not None and isinstance(alone.handle, Taken)
            for admission in shared:
                governor.settle(admission, tokens=None, cost_usd=0.0)  # kept until Redis is back
            for _ in range(3):
                clock.now += 6  # past retry_seconds: Redis is tried again, and still not there
                local = await governor.admit("a", route, tokens=0)
                assert local is not None and isinstance(local.handle, Taken)
                governor.settle(local, tokens=None, cost_usd=0.0)
            with pytest.raises(RateLimitedError):  # this process's own count: 5 a minute
                for _ in range(5):
                    await governor.admit("a", route, tokens=0)
        lost = [record for record in caplog.records if "unreachable" in record.getMessage()]
        assert len(lost) == 1 and lost[0].levelno == logging.WARNING
        governor.settle(alone, tokens=None, cost_usd=0.0)
        server.start()  # empty: a restarted Redis
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gateway.governance"):
            clock.now += 6
            back = await governor.admit("a", route, tokens=0)
        assert back is not None and isinstance(back.handle, Held)
        assert [record for record in caplog.records if "reachable again" in record.getMessage()]
        # a restarted Redis has none of the slots this process leased before: the next renewal sets its
        # field to what it leases (the one in flight, and the slot the two settled left it), none below zero

        async def counted_again() -> bool:
            return bool((await governor.usage("a"))["limits"]["concurrency"]["in_use"] == 1)

        await eventually(counted_again, what="this process's slots set again on the restarted Redis")
    finally:
        await governor.close()
        server.stop()


async def test_a_redis_never_reached_counts_locally(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = RedisProcess(tmp_path)  # its port, nothing listening
    governor = redis_governor(server.url, CONFIG)
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.governance"):
            admissions = [await governor.admit("a", CONFIG.routes["fast"], tokens=0) for _ in range(4)]
        assert all(admission is not None and isinstance(admission.handle, Taken) for admission in admissions)
        usage = await governor.usage("a")
        assert usage["limits"]["concurrency"] == {"limit": 4, "in_use": 4}
        assert len([record for record in caplog.records if "unreachable" in record.getMessage()]) == 1
    finally:
        await governor.close()


async def test_a_url_the_client_refuses_counts_locally_for_good(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="gateway.governance"):
        governor = RedisGovernor(Policies(CONFIG), RedisConnection(url="bogus://:secret@nowhere"))
    try:
        admission = await governor.admit("a", CONFIG.routes["fast"], tokens=0)
        assert admission is not None and isinstance(admission.handle, Taken)
        message = " ".join(record.getMessage() for record in caplog.records)
        assert "refused" in message and "secret" not in message
    finally:
        await governor.close()


async def test_a_budget_spent_on_redis_stays_spent_while_redis_is_away(tmp_path: Path) -> None:
    """The fallback counts on from the last spend Redis reported, not from $0: every replica would grant a new budget."""
    budgeted = limits_config(keys=(api_key("a", limits=RateLimits(budget=Budget(usd=1.0, period=BudgetPeriod.DAY))),))
    server = RedisProcess(tmp_path)
    server.start()
    clock = Clock()
    governor = redis_governor(server.url, budgeted, clock=clock, retry_seconds=5)
    route = budgeted.routes["fast"]
    try:
        spending = await governor.admit("a", route, tokens=0)
        assert spending is not None and isinstance(spending.handle, Held)
        governor.settle(spending, tokens=None, cost_usd=1.5)
        await governor.close()  # sends the settlement: Redis now holds the spend
        governor = redis_governor(server.url, budgeted, clock=clock, retry_seconds=5)  # another replica, say
        with pytest.raises(RateLimitedError) as refused:
            await governor.admit("a", route, tokens=0)
        assert refused.value.code == "insufficient_quota"
        server.stop()
        with pytest.raises(RateLimitedError) as alone:  # counted here now, from the spend Redis reported
            await governor.admit("a", route, tokens=0)
        assert alone.value.code == "insufficient_quota"
    finally:
        await governor.close()
        server.stop()


async def test_spend_of_requests_admitted_while_redis_was_away_reaches_it_once_back(tmp_path: Path) -> None:
    limits = RateLimits(concurrent_requests=1, budget=Budget(usd=1.0, period=BudgetPeriod.DAY))  # each asks Redis
    budgeted = limits_config(keys=(api_key("a", limits=limits),))
    server = RedisProcess(tmp_path)
    server.start()
    clock = Clock()
    governor = redis_governor(server.url, budgeted, clock=clock, retry_seconds=5)
    route = budgeted.routes["fast"]
    other = None
    try:
        shared = await governor.admit("a", route, tokens=0)
        assert shared is not None and isinstance(shared.handle, Held)
        governor.settle(shared, tokens=None, cost_usd=0.25)
        server.stop()
        for _ in range(2):
            admission = await governor.admit("a", route, tokens=0)
            assert admission is not None and isinstance(admission.handle, Taken)
            governor.settle(admission, tokens=None, cost_usd=0.125)  # counted here, and kept for Redis
        server.start()  # empty: a restarted Redis
        clock.now += 6  # past retry_seconds: the next admission's call carries what waited
        back = await governor.admit("a", route, tokens=0)
        assert back is not None and isinstance(back.handle, Held)
        other = redis_governor(server.url, budgeted)  # another replica reads the spend from Redis

        async def spend_in_redis() -> bool:
            return bool((await other.usage("a"))["limits"]["budget"]["spent_usd"] == 0.5)

        await eventually(spend_in_redis, what="the spend of both outage admissions and the one before in Redis")
    finally:
        await governor.close()
        if other is not None:
            await other.close()
        server.stop()


async def test_a_spend_whose_send_failed_reaches_redis_once_back_without_another_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    limits = RateLimits(budget=Budget(usd=1.0, period=BudgetPeriod.DAY))  # no slots: no liveness renewals to carry it
    budgeted = limits_config(keys=(api_key("a", limits=limits),))
    server = RedisProcess(tmp_path)
    server.start()
    governor = redis_governor(server.url, budgeted, retry_seconds=0.2)
    other = None
    try:
        admission = await governor.admit("a", budgeted.routes["fast"], tokens=0)
        assert admission is not None and isinstance(admission.handle, Held)
        server.stop()
        with caplog.at_level(logging.WARNING, logger="gateway.governance"):
            governor.settle(admission, tokens=None, cost_usd=0.25)  # its send fails: kept, and sent again later
            await eventually(lambda: "redis unreachable" in caplog.text, what="the failed send")
        server.start()  # no request comes after: the governor's own retries must carry it
        other = redis_governor(server.url, budgeted)

        async def spend_in_redis() -> bool:
            return bool((await other.usage("a"))["limits"]["budget"]["spent_usd"] == 0.25)

        await eventually(spend_in_redis, what="the spend settled while Redis was away, in Redis")
    finally:
        await governor.close()
        if other is not None:
            await other.close()
        server.stop()


@pytest.mark.parametrize("last_call", [False, True])  # True: its retry is due, so it tries a last call, which fails
async def test_a_reload_while_redis_is_away_hands_the_unsent_spend_to_the_successor(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, last_call: bool
) -> None:
    budgeted = limits_config(keys=(api_key("a", limits=RateLimits(budget=Budget(usd=1.0, period=BudgetPeriod.DAY))),))
    server = RedisProcess(tmp_path)
    server.start()
    clock = Clock()
    replaced = redis_governor(server.url, budgeted, retry_seconds=5, clock=clock)
    successor = other = None
    try:
        admission = await replaced.admit("a", budgeted.routes["fast"], tokens=0)
        assert admission is not None and isinstance(admission.handle, Held)
        server.stop()
        with caplog.at_level(logging.WARNING, logger="gateway.governance"):
            replaced.settle(admission, tokens=None, cost_usd=0.5)
            await eventually(lambda: "redis unreachable" in caplog.text, what="the failed send")
        # a SIGHUP: the successor takes the process's id, counts and leases (build.open_governor), then the
        # replaced governor closes, Redis still away
        successor = redis_governor(server.url, budgeted, retry_seconds=0.2, live_seconds=0.3, process_id=replaced.process_id,
                                   ledger=replaced.fallback.ledger, holding=replaced.holding)
        if last_call:
            clock.now += 6
        await replaced.close()
        server.start()
        other = redis_governor(server.url, budgeted)

        async def spend_in_redis() -> bool:
            return bool((await other.usage("a"))["limits"]["budget"]["spent_usd"] == 0.5)

        await eventually(spend_in_redis, what="the spend the replaced governor could not send, sent by its successor")
    finally:
        for governor in (replaced, successor, other):
            if governor is not None:
                await governor.close()
        server.stop()


async def test_requests_in_flight_count_across_a_switch_to_the_fallback_and_back(tmp_path: Path) -> None:
    """4 concurrent requests: those admitted through Redis count in the fallback, the fallback's count in Redis."""
    four = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=4)),))
    server = RedisProcess(tmp_path)
    server.start()
    clock = Clock()
    governor = redis_governor(server.url, four, clock=clock, retry_seconds=5)
    route = four.routes["fast"]
    other = None
    try:
        shared = [await governor.admit("a", route, tokens=0) for _ in range(3)]
        assert all(admission is not None and isinstance(admission.handle, Held) for admission in shared)
        server.stop()
        alone = await governor.admit("a", route, tokens=0)
        assert alone is not None and isinstance(alone.handle, Taken)
        with pytest.raises(RateLimitedError):  # 3 admitted through Redis, and this one: 4
            await governor.admit("a", route, tokens=0)
        assert shared[0] is not None
        governor.settle(shared[0], tokens=None, cost_usd=0.0)  # ended while Redis is away: its slot is free here
        again = await governor.admit("a", route, tokens=0)
        assert again is not None and isinstance(again.handle, Taken)
        server.start()  # empty: a restarted Redis
        clock.now += 6
        other = redis_governor(server.url, four)

        async def all_four_in_redis() -> bool:  # the renewal's correction: 2 through Redis, 2 by the fallback
            return bool((await other.usage("a"))["limits"]["concurrency"]["in_use"] == 4)

        await eventually(all_four_in_redis, what="the fallback's requests in flight counted in Redis")
        with pytest.raises(RateLimitedError):
            await other.admit("a", route, tokens=0)
    finally:
        await governor.close()
        if other is not None:
            await other.close()
        server.stop()


async def test_admissions_redis_never_answered_are_counted_once_by_the_fallback(tmp_path: Path) -> None:
    """Slots a lease covered for admissions whose call failed are back before the fallback counts those in flight."""
    limited = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=40, requests_per_minute=5)),))
    server = RedisProcess(tmp_path)
    server.start()
    governor = redis_governor(server.url, limited, retry_seconds=60)
    route = limited.routes["fast"]
    try:
        first = await governor.admit("a", route, tokens=0)  # takes a slot and leases 4 more
        assert first is not None and isinstance(first.handle, Held)
        server.stop()
        alone = await asyncio.gather(*(governor.admit("a", route, tokens=0) for _ in range(3)))  # slots covered
        assert all(admission is not None and isinstance(admission.handle, Taken) for admission in alone)
        assert governor.fallback.ledger.keys["a"].in_use == 4  # the one through Redis, the 3 by the fallback
    finally:
        await governor.close()
        server.stop()

"""RedisGovernor on a real Redis: the same rules as the local one, one script call per batch, shared by replicas."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
import uvloop

from gateway.core.errors import PermissionDeniedError, RateLimitedError
from gateway.core.governance import Budget, BudgetPeriod, LimitKind, Quota, RateLimits
from gateway.core.settings import Config
from gateway.core.stores import RedisConnection
from gateway.core.tree import Route
from gateway.governance.admission import Admission, Governor
from gateway.governance.local import Taken
from gateway.governance.policies import INLINE_ROUTE, Policies
from gateway.governance.redis import RedisGovernor
from gateway.governance.redis_demands import Held
from gateway.governance.stored_keys import StoredKey, StoredKeys
from tests.support.governance import Clock, Heard, api_key, limits_config, redis_governor
from tests.support.redis_monitor import watched
from tests.support.servers import flush_redis
from tests.support.waiting import eventually

ALL = RateLimits(requests_per_minute=5, tokens_per_minute=100, concurrent_requests=3)


@pytest.fixture(params=["lean", "redis-py"])
async def url(redis_url: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The session's Redis, emptied; through the lean client and through redis-py (GATEWAY_REDIS_LEAN=off)."""
    if request.param == "redis-py":
        monkeypatch.setenv("GATEWAY_REDIS_LEAN", "off")
    await flush_redis(redis_url)
    return redis_url


async def admitted(governor: Governor, tenant: str, route: Route, tokens: int = 0) -> Admission:
    admission = await governor.admit(tenant, route, tokens=tokens)
    assert admission is not None
    return admission


async def test_requests_tokens_and_slots_are_taken_and_refused_as_locally(url: str) -> None:
    config = limits_config(keys=(api_key("a", limits=ALL),))
    heard = Heard()
    governor = redis_governor(url, config, listener=heard)
    route = config.routes["fast"]
    try:
        first = await admitted(governor, "a", route, tokens=30)
        assert first.requests is not None and first.requests.remaining == 4
        assert first.tokens is not None and (first.tokens.limit, first.tokens.remaining) == (100, 70)
        await admitted(governor, "a", route, tokens=30)
        await admitted(governor, "a", route, tokens=30)
        with pytest.raises(RateLimitedError) as refused:
            await governor.admit("a", route, tokens=30)
        assert "concurrent" in refused.value.message
        assert refused.value.headers["x-ratelimit-remaining-tokens"] == "10"  # as it stood: nothing taken
        governor.settle(first, tokens=10, cost_usd=0.0)  # 20 of its 30 come back
        second = await admitted(governor, "a", route, tokens=25)  # its settlement rode along with this call
        assert second.tokens is not None and second.tokens.remaining == 5
        assert heard.refusals == [("a", "fast", LimitKind.CONCURRENCY)]
        usage = (await governor.usage("a"))["limits"]
        assert usage["concurrency"] == {"limit": 3, "in_use": 3}
        assert (usage["requests"]["remaining"], usage["tokens"]["remaining"]) == (1, 5)
    finally:
        await governor.close()


async def test_a_refusal_names_the_limit_and_when_to_come_back(url: str) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=2)),))
    governor = redis_governor(url, config)
    route = config.routes["fast"]
    try:
        await admitted(governor, "a", route)
        await admitted(governor, "a", route)
        with pytest.raises(RateLimitedError) as refused:
            await governor.admit("a", route, tokens=0)
        error = refused.value
        assert (error.status, error.code, error.type) == (429, "rate_limit_exceeded", "requests")
        assert 25 <= int(error.headers["retry-after"]) <= 30  # one back every 30 s, less the moments since
        assert error.headers["x-ratelimit-remaining-requests"] == "0"
    finally:
        await governor.close()


async def test_the_route_refuses_and_the_key_keeps_what_it_had(url: str) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=100)), api_key("b")),
                           routes={"smart": RateLimits(requests_per_minute=1)})
    governor = redis_governor(url, config)
    smart = config.routes["smart"]
    try:
        only = await admitted(governor, "b", smart)
        assert only.requests == Quota(limit=1, remaining=0, reset_seconds=pytest.approx(60, abs=1))
        with pytest.raises(RateLimitedError) as refused:
            await governor.admit("a", smart, tokens=40)
        assert "route 'smart'" in refused.value.message
        assert (await governor.usage("a"))["limits"]["tokens"]["remaining"] == 100
    finally:
        await governor.close()


async def test_a_restricted_key_is_refused_another_route_without_a_call(url: str) -> None:
    config = limits_config(keys=(api_key("a", routes={"fast"}, limits=ALL),))
    governor = redis_governor(url, config)
    try:
        async with watched(url) as seen:
            with pytest.raises(PermissionDeniedError):
                await governor.admit("a", config.routes["smart"], tokens=0)
        assert seen.sent_naming("EVALSHA") == []
    finally:
        await governor.close()


async def test_a_stored_key_patched_is_held_to_its_new_routes_and_limits_at_its_next_request(url: str) -> None:
    """What a tenant's requests on a route draw on is made once per policy and route: a PATCH (a new policy) is seen at once."""
    stored = StoredKeys()
    config = limits_config()
    governor = RedisGovernor(Policies(config, stored=stored), RedisConnection(url=url), timeout=10.0)
    route = config.routes["fast"]
    try:
        stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", limits=RateLimits(requests_per_minute=1))}
        await admitted(governor, "issued", route)
        with pytest.raises(RateLimitedError):
            await governor.admit("issued", route, tokens=0)
        five = RateLimits(concurrent_requests=5)
        stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", limits=five)}
        assert (await admitted(governor, "issued", route)).requests is None  # no requests limit any more
        stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", routes=frozenset({"smart"}), limits=five)}
        with pytest.raises(PermissionDeniedError):  # its routes alone changed
            await governor.admit("issued", route, tokens=0)
        stored.by_name = {}  # revoked: the defaults (none)
        assert await governor.admit("issued", route, tokens=0) is None
    finally:
        await governor.close()


async def test_requests_on_routes_given_in_x_gateway_config_share_one_demand(url: str) -> None:
    """Such a route is built anew for each request: what its requests draw on is not made again for each."""
    config = limits_config(keys=(api_key("a", limits=ALL),))
    governor = redis_governor(url, config)
    fast = config.routes["fast"]
    try:
        first, second = [await admitted(governor, "a", dataclasses.replace(fast, name=INLINE_ROUTE)) for _ in range(2)]
        assert isinstance(first.handle, Held) and isinstance(second.handle, Held)
        assert first.handle.demand is second.handle.demand
    finally:
        await governor.close()


async def test_a_budget_is_spent_at_settlement_and_refuses_when_spent(url: str) -> None:
    budget = Budget(usd=1.0, period=BudgetPeriod.MONTH)
    config = limits_config(keys=(api_key("a", limits=RateLimits(budget=budget)),))
    heard = Heard()
    wall = Clock(now=datetime(2026, 11, 29, 18, tzinfo=UTC).timestamp())
    governor = redis_governor(url, config, listener=heard, wall=wall)
    route = config.routes["fast"]
    try:
        governor.settle(await admitted(governor, "a", route), tokens=5, cost_usd=0.75)
        governor.settle(await admitted(governor, "a", route), tokens=5, cost_usd=0.5)
        # the second was admitted by this process (the spend it knew left some of the budget), and the
        # two settlements may go to Redis as one spend: the last told is their sum
        await eventually(lambda: bool(heard.spends) and heard.spends[-1][1] > 1.2, what="both spends told")
        assert heard.spends[-1] == ("a", pytest.approx(1.25), 1.0)
        with pytest.raises(RateLimitedError) as refused:
            await governor.admit("a", route, tokens=0)
        assert (refused.value.code, refused.value.type) == ("insufficient_quota", "insufficient_quota")
        assert refused.value.headers["retry-after"] == str(30 * 3600)  # 1 December, 00:00 UTC
        shown = (await governor.usage("a"))["limits"]["budget"]
        assert (shown["spent_usd"], shown["remaining_usd"], shown["period"]) == (1.25, 0.0, "month")
        wall.now = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
        await admitted(governor, "a", route)  # a new month
    finally:
        await governor.close()


async def test_admissions_of_one_loop_pass_go_in_one_call_and_the_next_come_from_its_lease(url: str) -> None:
    limits = RateLimits(requests_per_minute=1000, tokens_per_minute=10**6)
    config = limits_config(keys=(api_key("a", limits=limits), api_key("b", limits=limits)))
    governor = redis_governor(url, config, clock=Clock())  # the headers show no refill, however slow the machine
    route = config.routes["fast"]
    try:
        await admitted(governor, "b", route, tokens=100)  # the script is loaded
        async with watched(url) as seen:
            first = await asyncio.gather(*(admitted(governor, "a", route, tokens=10) for _ in range(50)))
        assert len(seen.sent_naming("EVALSHA")) == 1
        # the first of them leased a tenth of each limit (100 requests, 100,000 tokens): the next 50 need no call
        async with watched(url) as seen:
            second = await asyncio.gather(*(admitted(governor, "a", route, tokens=10) for _ in range(50)))
            for admission in (*first, *second):
                governor.settle(admission, tokens=5, cost_usd=0.0)
        assert seen.sent_naming("EVALSHA") == []
        shown = [admission.requests.remaining for admission in second if admission.requests]
        assert shown == sorted(shown, reverse=True) and 850 <= shown[-1] <= shown[0] <= 951
    finally:
        await governor.close()


async def test_a_settlement_alone_is_sent_within_moments(url: str) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=1000)),))
    governor, reader = redis_governor(url, config), redis_governor(url, config)
    try:
        admission = await admitted(governor, "a", config.routes["fast"], tokens=600)
        governor.settle(admission, tokens=100, cost_usd=0.0)

        async def given_back() -> bool:
            return bool((await reader.usage("a"))["limits"]["tokens"]["remaining"] >= 900)

        await eventually(given_back, what="the settlement sent without an admission to ride with")
    finally:
        await governor.close()
        await reader.close()


async def test_an_admission_whose_caller_left_gives_back_what_it_took(url: str) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=1, tokens_per_minute=100)),))
    governor = redis_governor(url, config)
    route = config.routes["fast"]
    try:
        leaving = asyncio.ensure_future(governor.admit("a", route, tokens=50))
        await asyncio.sleep(0)  # queued for the call at the end of this pass
        leaving.cancel()

        await admitted_once_given_back(governor, route, what="the slot of an admission nobody awaited came back")
    finally:
        await governor.close()


async def test_an_admission_cancelled_once_redis_answered_gives_back_what_it_took(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=1, tokens_per_minute=100)),))
    governor = redis_governor(url, config)
    route = config.routes["fast"]
    script, leaving = governor._script, asyncio.ensure_future(governor.admit("a", route, tokens=50))

    async def answered_as_its_client_leaves(**call: Any) -> Any:
        reply = await script(**call)
        asyncio.get_running_loop().call_soon(leaving.cancel)  # before the admission resumes with its outcome
        return reply

    monkeypatch.setattr(governor, "_script", answered_as_its_client_leaves)
    try:
        with pytest.raises(asyncio.CancelledError):
            await leaving
        monkeypatch.setattr(governor, "_script", script)
        await admitted_once_given_back(governor, route, what="the slot of an admission cancelled after Redis took it came back")
    finally:
        await governor.close()


async def admitted_once_given_back(governor: RedisGovernor, route: Route, *, what: str) -> None:
    """Admit 50 tokens of "a", refused (taking nothing) until what another admission took is back: its slot and its tokens."""
    admissions: list[Admission] = []

    async def let_in() -> bool:
        try:
            admissions.append(await admitted(governor, "a", route, tokens=50))
        except RateLimitedError:
            return False
        return True

    await eventually(let_in, what=what)
    assert admissions[0].tokens is not None and admissions[0].tokens.remaining == 50  # its tokens too


async def attempts(governors: tuple[RedisGovernor, ...], tenant: str, route: Route, *, each: int) -> list[Admission]:
    """`each` admissions of `tenant` on `route` through every governor at once; those let in."""

    async def attempt(governor: RedisGovernor) -> Admission | None:
        try:
            return await governor.admit(tenant, route, tokens=100)
        except RateLimitedError:
            return None

    held = await asyncio.gather(*(attempt(governor) for _ in range(each) for governor in governors))
    let_in = [admission for admission in held if admission is not None]
    assert not any(isinstance(admission.handle, Taken) for admission in let_in)  # every one through Redis
    return let_in


async def test_two_replicas_together_never_hold_more_slots_than_the_limit(url: str) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=40)),))
    replicas = redis_governor(url, config), redis_governor(url, config)
    route = config.routes["fast"]
    try:
        let_in = await attempts(replicas, "a", route, each=200)
        assert len(let_in) == 40
        for admission in let_in:  # settled through one of them, whichever let it in
            replicas[0].settle(admission, tokens=None, cost_usd=0.0)
        assert len(await attempts(replicas, "a", route, each=200)) == 40  # every slot came back
    finally:
        for governor in replicas:
            await governor.close()


@pytest.mark.parametrize("limited", ["key", "route"])
async def test_two_replicas_together_never_let_more_requests_through_than_the_limit(url: str, limited: str) -> None:
    # 12 a minute: one more every 5 s, longer than 400 admissions take
    twelve = RateLimits(requests_per_minute=12)
    if limited == "key":
        config = limits_config(keys=(api_key("a", limits=twelve),))
    else:
        config = limits_config(keys=(api_key("a"),), routes={"fast": twelve})
    await twelve_let_in(url, config)


async def test_two_replicas_together_never_take_more_tokens_than_the_limit(url: str) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=1200)),))  # 100 per request
    await twelve_let_in(url, config)


async def twelve_let_in(url: str, config: Config) -> None:
    """400 admissions at once through two replicas of `config` on `url` let exactly 12 through."""
    replicas = redis_governor(url, config), redis_governor(url, config)
    try:
        assert len(await attempts(replicas, "a", config.routes["fast"], each=200)) == 12
    finally:
        for governor in replicas:
            await governor.close()


async def test_a_slot_freed_on_one_replica_admits_on_another_at_once(url: str) -> None:
    """One concurrent request across two replicas, a client taking turns between them: no 429 while
    the first replica's freed slot waits for the settlements' timer (here an hour)."""
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=1)),))
    route = config.routes["fast"]
    replicas = (redis_governor(url, config, settle_seconds=3600), redis_governor(url, config, settle_seconds=3600))
    try:
        for turn in range(4):
            governor = replicas[turn % 2]
            admission = await admitted(governor, "a", route)
            governor.settle(admission, tokens=None, cost_usd=0.0)
    finally:
        for governor in replicas:
            await governor.close()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_an_admission_does_not_wait_for_the_settlements_timer(redis_url: str, loop: str) -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=5)),))

    async def scenario() -> None:
        await flush_redis(redis_url)
        governor = redis_governor(redis_url, config, settle_seconds=3600)  # settlements alone: within the hour
        try:
            first = await admitted(governor, "a", config.routes["fast"])
            governor.settle(first, tokens=None, cost_usd=0.0)  # sets the hour's timer
            # the next admission goes at once, the settlement with it (else this waits for the hour)
            await asyncio.wait_for(admitted(governor, "a", config.routes["fast"]), 30)
            assert (await governor.usage("a"))["limits"]["concurrency"]["in_use"] == 1
        finally:
            await governor.close()

    (uvloop.run if loop == "uvloop" else asyncio.run)(scenario())

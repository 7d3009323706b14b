"""The Redis governor's calls (gateway.governance.redis_calls), on a real Redis: when a correction goes.

A correction sets this process's slots in Redis to those it holds. It rides on the call a
renewal sends each second, after the settlements waiting (which the leases count already) and
before the admissions, whenever no other call of the process is in flight: so it comes within a
second, under steady load too. Not while a reload's governor and the one it replaces share the
process's leases: the other's settlements would be counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import redis.asyncio as aioredis

from gateway.core.governance import Budget, BudgetPeriod, RateLimits
from gateway.core.settings import Config
from gateway.governance.local import Taken
from gateway.governance.redis import RedisGovernor
from gateway.governance.redis_script import live_key, slots_key, spent_key
from tests.support.governance import api_key, limits_config, redis_governor
from tests.support.servers import RedisProcess, flush_redis
from tests.support.waiting import eventually

KEY = slots_key("key", "a")
LIMITS = RateLimits(concurrent_requests=100, budget=Budget(usd=1_000, period=BudgetPeriod.MONTH))


def config() -> Config:
    return limits_config(keys=(api_key("a", limits=LIMITS),))


async def field(client: aioredis.Redis, governor: RedisGovernor) -> int:
    return int(await client.hget(KEY, governor.process_id) or 0)


def watch(governor: RedisGovernor, before: Callable[[list[object]], Awaitable[None]] | None = None) -> list[list[object]]:
    """The arguments of every call `governor` makes from now on; `before` runs first (to slow a call, or fail it)."""
    script, calls = governor._script, []

    async def watched(*, keys: list[str], args: list[object]) -> object:
        calls.append(args)
        if before is not None:
            await before(args)
        return await script(keys=keys, args=args)

    governor._script = watched
    return calls


def successor_of(predecessor: RedisGovernor, url: str, limited: Config, **options: object) -> RedisGovernor:
    """A reload's governor, as gateway.governance.build makes it: the predecessor's process id and leases, renewed."""
    successor = redis_governor(url, limited, process_id=predecessor.process_id, holding=predecessor.holding, **options)
    successor.keep_alive()
    return successor


async def closed(client: aioredis.Redis, *governors: RedisGovernor | None) -> None:
    """Close each governor (again, for one its test closed: harmless), then `client`."""
    for governor in governors:
        if governor is not None:
            await governor.close()
    await client.aclose()


async def test_a_correction_goes_with_the_settlements_waiting(redis_url: str) -> None:
    await flush_redis(redis_url)
    limited = config()
    # a spend waits for the next call: the renewal's, within a second; no lease goes back idle meanwhile
    governor = redis_governor(redis_url, limited, settle_seconds=30.0, idle_seconds=60.0)
    client = aioredis.Redis.from_url(redis_url)
    try:
        first, second = [await governor.admit("a", limited.routes["fast"], tokens=0) for _ in range(2)]
        assert first is not None and second is not None
        governor.settle(first, tokens=0, cost_usd=0.25)  # its spend waits; its slot stays in the lease
        held = governor.holding.slots[KEY].leased
        assert await field(client, governor) == held
        await client.hincrby(KEY, governor.process_id, 5)  # as if a reply were lost after its script took five more

        async def spent() -> bool:
            spends = await client.keys(spent_key("a", "*"))
            return [float(value) for value in await client.mget(spends)] == [0.25] if spends else False

        await eventually(spent, seconds=5, what="the spend sent by the renewal's call")
        assert await field(client, governor) == held  # set right in the same call
    finally:
        await closed(client, governor)


async def test_a_correction_comes_under_steady_load(redis_url: str) -> None:
    """Requests start and end every few milliseconds, each ending sending its spend within 20 ms: a slot count
    gone wrong is right again within a few seconds all the same."""
    await flush_redis(redis_url)
    limited = config()
    governor = redis_governor(redis_url, limited, settle_seconds=0.02)
    client = aioredis.Redis.from_url(redis_url)
    stop = asyncio.Event()

    async def load() -> None:
        while not stop.is_set():
            admission = await governor.admit("a", limited.routes["fast"], tokens=0)
            assert admission is not None
            await asyncio.sleep(0.003)
            governor.settle(admission, tokens=0, cost_usd=0.001)

    loads = [asyncio.create_task(load()) for _ in range(4)]
    try:
        await eventually(lambda: governor.holding.slots.get(KEY) is not None, what="slots leased")
        await asyncio.sleep(0.2)
        await client.hincrby(KEY, governor.process_id, 5)

        async def corrected() -> bool:
            return await field(client, governor) == governor.holding.slots[KEY].leased

        await asyncio.sleep(0.05)
        assert not await corrected()
        await eventually(corrected, seconds=5, what="the slots set right while requests keep coming")
        assert not any(task.done() for task in loads)  # the load ran throughout
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.gather(*loads)
        await governor.close()
        await client.aclose()


async def test_no_correction_while_a_reloads_governors_share_the_leases(redis_url: str) -> None:
    """A reload's governor takes the process's id and leases: neither it nor the one it replaces corrects
    until that one closed (a settlement waiting in either would be counted twice); then the successor does."""
    await flush_redis(redis_url)
    limited = config()
    predecessor = redis_governor(redis_url, limited, idle_seconds=60.0)
    client = aioredis.Redis.from_url(redis_url)
    successor: RedisGovernor | None = None
    try:
        admission = await predecessor.admit("a", limited.routes["fast"], tokens=0)
        assert admission is not None
        successor = successor_of(predecessor, redis_url, limited, idle_seconds=60.0)
        held = predecessor.holding.slots[KEY].leased
        await client.hincrby(KEY, predecessor.process_id, 5)
        await asyncio.sleep(2.5)  # two renewals of each
        assert await field(client, predecessor) == held + 5
        predecessor.settle(admission, tokens=0, cost_usd=0.0)  # its last request ends: it is closed
        await predecessor.close()

        async def corrected() -> bool:
            return await field(client, predecessor) == predecessor.holding.slots[KEY].leased

        await eventually(corrected, seconds=5, what="the successor's correction once it is the only one")
    finally:
        await closed(client, successor, predecessor)


async def test_a_closing_governor_does_not_correct(redis_url: str) -> None:
    """A reload's predecessor, closing, is no longer a holder of the leases: the calls it still sends carry no
    correction, which could undo an admission of its successor that Redis ran and has not answered yet."""
    await flush_redis(redis_url)
    limited = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=9)),))  # a slot ends: sent at once
    predecessor = redis_governor(redis_url, limited, idle_seconds=0.1)  # renewing ten times a second
    client = aioredis.Redis.from_url(redis_url)
    successor: RedisGovernor | None = None
    calls = watch(predecessor)
    try:
        admission = await predecessor.admit("a", limited.routes["fast"], tokens=0)
        assert admission is not None
        successor = successor_of(predecessor, redis_url, limited, idle_seconds=0.1)
        await asyncio.sleep(0.35)  # renewals of both while they share the leases: corrections due, none sent
        sent = len(calls)
        assert not any("C" in args for args in calls)
        predecessor.settle(admission, tokens=0, cost_usd=0.0)  # its last request ends: its slot goes at once
        await predecessor.close()
        assert len(calls) > sent and not any("C" in args for args in calls)
    finally:
        await closed(client, successor, predecessor)


async def test_closing_waits_for_the_admissions_a_correction_held_back(redis_url: str) -> None:
    """An admission that waited for a correction to end goes before the governor's last call retires the
    process: its slot does not outlive it in Redis."""
    await flush_redis(redis_url)
    limited = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=9)),))  # no top-ups: calls
    governor = redis_governor(redis_url, limited, idle_seconds=0.1)
    client = aioredis.Redis.from_url(redis_url)
    correcting = asyncio.Event()

    async def slow_corrections(args: list[object]) -> None:
        if "C" in args:
            correcting.set()
            await asyncio.sleep(0.2)

    watch(governor, slow_corrections)
    try:
        first = await governor.admit("a", limited.routes["fast"], tokens=0)
        assert first is not None
        await asyncio.wait_for(correcting.wait(), 5)
        waiting = asyncio.create_task(governor.admit("a", limited.routes["fast"], tokens=0))
        await asyncio.sleep(0.02)  # it waits for the correction to end
        governor.settle(first, tokens=0, cost_usd=0.0)
        await governor.close()
        assert (await waiting) is not None
        assert not await client.exists(live_key(governor.process_id))  # retired: no field of it counts
    finally:
        await closed(client, governor)


async def test_an_idle_process_stops_calling_once_it_holds_no_slot(redis_url: str) -> None:
    """Its slots given back idle, a correction finds none: no call after it, and its liveness record ends. A
    request later takes a slot, and the renewals start again."""
    await flush_redis(redis_url)
    limited = config()
    governor = redis_governor(redis_url, limited, idle_seconds=0.1, live_seconds=0.6)  # renewals every 0.1 s
    client = aioredis.Redis.from_url(redis_url)
    calls = watch(governor)
    try:
        admission = await governor.admit("a", limited.routes["fast"], tokens=0)
        assert admission is not None and governor.holds_slots
        governor.settle(admission, tokens=0, cost_usd=0.0)
        await eventually(lambda: not governor.holds_slots, what="a correction that found no slot held")
        quiet = len(calls)
        await asyncio.sleep(1.0)  # ten renewals' time
        assert len(calls) == quiet
        assert not await client.exists(live_key(governor.process_id))
        again = await governor.admit("a", limited.routes["fast"], tokens=0)
        assert again is not None and governor.holds_slots
        await eventually(lambda: len(calls) > quiet + 3, what="renewals again while it holds a slot")
    finally:
        await closed(client, governor)


async def test_a_request_let_in_while_redis_was_away_counts_there_once_it_is_back(tmp_path: Path) -> None:
    """An idle process (no renewals) loses Redis and admits a request alone; Redis comes back empty: its
    renewals, tried again, reach it and the correction counts that request's slot there, with no other traffic."""
    server = RedisProcess(tmp_path)
    server.start()
    limited = config()
    governor = redis_governor(server.url, limited, idle_seconds=0.1, retry_seconds=0.3, timeout=1.0)
    client = aioredis.Redis.from_url(server.url)
    try:
        first = await governor.admit("a", limited.routes["fast"], tokens=0)
        assert first is not None
        governor.settle(first, tokens=0, cost_usd=0.0)
        await eventually(lambda: not governor.holds_slots, what="renewals stopped")
        server.stop()
        alone = await governor.admit("a", limited.routes["fast"], tokens=0)
        assert alone is not None and isinstance(alone.handle, Taken)
        server.start()

        async def counted() -> bool:
            with contextlib.suppress(Exception):
                return await client.hget(KEY, governor.process_id) == b"1"
            return False

        await eventually(counted, seconds=10, what="the request let in alone counted in Redis")
        governor.settle(alone, tokens=0, cost_usd=0.0)
    finally:
        await closed(client, governor)
        server.stop()


async def test_slots_a_lease_kept_for_a_caller_that_left_keep_the_process_alive(redis_url: str) -> None:
    """An idle process (no renewals) asks Redis for a request whose client leaves before the answer: the lease
    keeps the slots Redis granted, the next request is taken from it without a call, and the process's liveness
    is renewed all the same (else other replicas would drop its slots and admit over the limit)."""
    await flush_redis(redis_url)
    limited = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=100)),))  # no budget to ask of Redis
    governor = redis_governor(redis_url, limited, idle_seconds=0.5, live_seconds=0.6)  # renewals every 0.2 s
    client = aioredis.Redis.from_url(redis_url)
    slowed: list[object] = []

    async def slow_once(args: list[object]) -> None:
        if not slowed:  # the first call from then on
            slowed.append(args)
            await asyncio.sleep(0.3)

    try:
        first = await governor.admit("a", limited.routes["fast"], tokens=0)
        assert first is not None
        governor.settle(first, tokens=0, cost_usd=0.0)
        await eventually(lambda: not governor.holds_slots, what="renewals stopped")
        calls = watch(governor, slow_once)
        leaving = asyncio.create_task(governor.admit("a", limited.routes["fast"], tokens=0))
        await asyncio.sleep(0.1)
        leaving.cancel()  # its client left while the call was in flight
        await eventually(lambda: len(calls) >= 1 and governor.holding.slots[KEY].leased > 0, what="slots granted")
        taken = await governor.admit("a", limited.routes["fast"], tokens=0)  # from the lease
        assert taken is not None
        await asyncio.sleep(1.5)  # over twice the liveness record's 0.6 s
        assert await client.exists(live_key(governor.process_id))
        governor.settle(taken, tokens=0, cost_usd=0.0)
    finally:
        await closed(client, governor)


async def test_a_governor_closed_while_its_call_fails_makes_no_call_after(redis_url: str) -> None:
    await flush_redis(redis_url)
    limited = config()
    governor = redis_governor(redis_url, limited, idle_seconds=0.1, retry_seconds=0.2)
    async def failing(args: list[object]) -> None:
        await asyncio.sleep(0.2)
        raise ConnectionError("Redis went away")

    calls = watch(governor, failing)
    asking = asyncio.create_task(governor.admit("a", limited.routes["fast"], tokens=0))
    await asyncio.sleep(0.05)  # its call is in flight
    await governor.close()
    await asking
    made = len(calls)
    await asyncio.sleep(1.0)  # retries' and renewals' time, several times over
    assert len(calls) == made


async def test_a_key_first_seen_while_redis_is_away_counts_there_once_it_is_back(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    limited = limits_config(keys=tuple(api_key(name, limits=LIMITS) for name in "abc"))
    governor = redis_governor(server.url, limited, idle_seconds=0.1, retry_seconds=0.3, timeout=1.0)
    client = aioredis.Redis.from_url(server.url)
    try:
        first = await governor.admit("a", limited.routes["fast"], tokens=0)
        assert first is not None
        server.stop()
        noticed = await governor.admit("c", limited.routes["fast"], tokens=0)  # Redis is found away here
        assert noticed is not None and isinstance(noticed.handle, Taken)
        alone = await governor.admit("b", limited.routes["fast"], tokens=0)  # b's leases made while it is away
        assert alone is not None and isinstance(alone.handle, Taken)
        server.start()

        async def counted() -> bool:
            with contextlib.suppress(Exception):
                return await client.hget(slots_key("key", "b"), governor.process_id) == b"1"
            return False

        await eventually(counted, seconds=10, what="b's request let in alone counted in Redis")
        for admission in (alone, noticed, first):
            governor.settle(admission, tokens=0, cost_usd=0.0)
    finally:
        await closed(client, governor)
        server.stop()

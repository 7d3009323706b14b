"""Circuit breakers: the state machine on a fake clock, the local board, and one contract for it and Redis."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.core.breaker import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    ORDINARY,
    PROBE,
    REFUSED,
    SKIPPED,
    Admission,
    Breaker,
    State,
)
from gateway.core.memory.settings import MemorySettings
from gateway.core.routing import Outcome
from gateway.core.tree import BreakerPolicy, Fallback, LoadBalance, Route, Single, Target
from gateway.upstream.breakers.board import Breakers, LocalBreakers
from gateway.upstream.breakers.redis import RedisBreakers
from tests.support.servers import RedisProcess, flush_redis

ORDER = list(Admission)  # to sort admissions by
POLICY = BreakerPolicy(failures=3, failure_rate=0.5, min_requests=10, window_seconds=10, cooldown_seconds=5, max_cooldown_seconds=20)
OK, FAIL = Outcome(200), Outcome(503)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def t(name: str, policy: BreakerPolicy = POLICY, **options: object) -> Target:
    return Target(name=name, provider="mock", base_url="", api_key="", breaker=policy, **options)  # type: ignore[arg-type]


def route(root: object, name: str = "r") -> Route:
    return Route(name, root, MemorySettings())  # type: ignore[arg-type]


# ---------------------------------------------------------------- the state machine


def test_consecutive_failures_open_it_and_a_success_resets_the_count() -> None:
    breaker = Breaker(POLICY)
    for _ in range(2):
        assert not breaker.record(True, 0.0)
    breaker.record(False, 0.1)
    assert not breaker.record(True, 0.2) and not breaker.record(True, 0.3)
    assert breaker.phase(0.3) == CLOSED
    assert breaker.record(True, 0.4)  # the third in a row
    assert breaker.phase(0.4) == OPEN and not breaker.available(0.4)
    assert breaker.open_until == pytest.approx(5.4)


def test_failure_rate_over_the_window_opens_it_once_enough_calls_were_seen() -> None:
    policy = BreakerPolicy(failures=100, failure_rate=0.5, min_requests=10, window_seconds=10)
    breaker = Breaker(policy)
    for i in range(4):  # alternate so the in-a-row count never matters: 4 ok, 5 failed = 9 calls
        breaker.record(False, i * 0.1)
        breaker.record(True, i * 0.1 + 0.05)
    breaker.record(True, 0.5)
    assert breaker.phase(0.5) == CLOSED  # 5/9 failed, but fewer than minRequests calls
    assert breaker.record(True, 0.6)  # 6/10 > 0.5
    assert breaker.phase(0.6) == OPEN


def test_a_rate_exactly_at_the_threshold_does_not_open_it() -> None:
    breaker = Breaker(BreakerPolicy(failures=100, failure_rate=0.5, min_requests=10))
    for i in range(5):
        breaker.record(False, i)
        breaker.record(True, i + 0.5)
    assert breaker.phase(6) == CLOSED  # 5/10 is not above 0.5


def test_failures_older_than_the_window_are_forgotten() -> None:
    breaker = Breaker(BreakerPolicy(failures=100, failure_rate=0.5, min_requests=4, window_seconds=10))
    for i in range(3):
        breaker.record(True, i * 0.1)
    for i in range(3):
        breaker.record(False, 11 + i * 0.1)  # the failures aged out: 0 failed of 3
    assert not breaker.record(True, 11.5)  # 1 of 4 failed
    assert breaker.window.totals(11.5) == (4, 1)


def test_the_window_slides_a_slice_at_a_time() -> None:
    breaker = Breaker(BreakerPolicy(failures=100, window_seconds=10))
    for _ in range(3):
        breaker.record(True, 0.5)  # the slice [0, 1)
    breaker.record(False, 5.0)
    assert breaker.window.totals(9.9) == (4, 3)
    breaker.record(False, 10.5)  # the slice [10, 11) takes the place of [0, 1)
    assert breaker.window.totals(10.5) == (2, 0)
    assert breaker.window.totals(15.5) == (1, 0)


def test_half_open_admits_exactly_one_trial_until_its_lease_ends_or_it_is_released() -> None:
    breaker = Breaker(POLICY)
    for _ in range(3):
        breaker.record(True, 0.0)
    assert not breaker.claim(4.9, lease=2)  # still cooling down
    assert breaker.phase(5.0) == HALF_OPEN and breaker.available(5.0)
    assert breaker.claim(5.0, lease=2)
    assert not breaker.available(5.1) and not breaker.claim(5.1, lease=2)
    assert breaker.claim(7.0, lease=2)  # the first trial's lease ran out
    breaker.release()
    assert breaker.claim(7.5, lease=2)


def test_the_trial_decides_and_the_cooldown_doubles_per_trip_in_a_row_up_to_the_cap() -> None:
    breaker = Breaker(POLICY)
    for _ in range(3):
        breaker.record(True, 0.0)
    cooldowns = [breaker.open_until]
    now = breaker.open_until
    for _ in range(3):  # trials that fail: 10 s, 20 s, then capped at 20 s
        assert breaker.claim(now, lease=1)
        assert breaker.record(True, now, probe=True)
        cooldowns.append(breaker.open_until - now)
        now = breaker.open_until
    assert cooldowns == [5.0, 10.0, 20.0, 20.0]
    assert breaker.claim(now, lease=1)
    assert breaker.record(False, now, probe=True)
    assert breaker.phase(now) == CLOSED and breaker.trips == 0
    for _ in range(3):
        breaker.record(True, now)
    assert breaker.open_until - now == 5.0  # the doubling starts over


def test_a_retry_after_longer_than_the_cooldown_extends_it_up_to_the_cap() -> None:
    breaker = Breaker(POLICY)
    for _ in range(2):
        breaker.record(True, 0.0)
    breaker.record(True, 0.0, retry_after=12)
    assert breaker.open_until == 12.0
    breaker.record(True, 1.0, retry_after=2)  # shorter: no change
    assert breaker.open_until == 12.0
    breaker.record(True, 1.0, retry_after=3600)  # a straggler's Retry-After, capped at maxCooldownSeconds
    assert breaker.open_until == 21.0


def test_calls_that_began_before_it_opened_change_nothing_but_a_probe_does() -> None:
    breaker = Breaker(POLICY)
    for _ in range(3):
        breaker.record(True, 0.0)
    assert not breaker.record(False, 1.0) and not breaker.record(True, 1.0)
    assert breaker.phase(1.0) == OPEN and breaker.open_until == 5.0
    assert not breaker.record(True, 1.0, probe=True)  # a forced call failing while it cools down: no doubling
    assert breaker.open_until == 5.0 and breaker.trips == 1
    assert breaker.record(False, 2.0, probe=True)  # a forced call that succeeds closes it
    assert breaker.phase(2.0) == CLOSED


# ---------------------------------------------------------------- the board


class Heard:
    def __init__(self) -> None:
        self.states: list[tuple[str, int]] = []
        self.changed = asyncio.Event()

    def breaker_changed(self, target: Target, state: int) -> None:
        self.states.append((target.name, state))
        self.changed.set()


def test_health_is_none_while_every_target_of_the_route_is_closed() -> None:
    a, b, c = t("a"), t("b"), t("c")
    first, second = route(Fallback("f", 1, (a, b)), "first"), route(c, "second")
    clock = Clock()
    board = LocalBreakers({"first": first, "second": second}, clock=clock)
    assert board.health(first) is None
    for _ in range(3):
        board.record(a, FAIL)
    assert board.health(first) is board and board.health(second) is None
    assert not board.available(a) and board.available(b) and board.reopens_at(a) == 1005.0
    clock.now = 1005.0
    assert board.available(a)  # half-open, its trial untaken
    assert board.health(route(a, "first")) is None  # another route by that name (an inline one) is not this one


async def test_admit_gives_the_trial_to_one_call_and_release_gives_it_back() -> None:
    a = t("a")
    clock = Clock()
    board = LocalBreakers({"r": route(a)}, clock=clock)
    assert await board.admit(a) == ORDINARY
    for _ in range(3):
        board.record(a, FAIL)
    clock.now += 5
    assert await board.admit(a) == PROBE
    assert await board.admit(a) == REFUSED
    board.release(a)
    assert await board.admit(a) == PROBE
    board.record(a, OK, probe=True)
    assert board.health(route(a)) is None and await board.admit(a) == ORDINARY


@pytest.mark.parametrize(
    ("parent", "counted", "ignored"),
    [
        ("fallback-429", [Outcome(429), Outcome(502, transport=True), Outcome(504, transport=True)], [Outcome(500), Outcome(404)]),
        ("fallback", [Outcome(500), Outcome(404), Outcome(401)], [Outcome(400), Outcome(413), Outcome(422)]),
        ("single", [Outcome(500), Outcome(503), Outcome(429)], [Outcome(400), Outcome(404), Outcome(401)]),
        ("loadbalance", [Outcome(502), Outcome(502, transport=True)], [Outcome(400), Outcome(404)]),
    ],
)
def test_what_counts_as_a_failure_is_what_the_parent_moves_on_from_and_never_a_400(
    parent: str, counted: list[Outcome], ignored: list[Outcome]
) -> None:
    a, b = t("a", BreakerPolicy(failures=1)), t("b")
    nodes = {
        "fallback-429": Fallback("f", 1, (a, b), frozenset({429})),
        "fallback": Fallback("f", 1, (a, b)),
        "single": Single("s", 1, (a,)),
        "loadbalance": LoadBalance("lb", 1, (a, b)),  # judged by nobody: the default trigger codes
    }
    for outcome in counted:
        board = LocalBreakers({"r": route(nodes[parent])}, clock=Clock())
        board.record(a, outcome)
        assert not board.available(a), outcome
    for outcome in ignored:
        board = LocalBreakers({"r": route(nodes[parent])}, clock=Clock())
        board.record(a, outcome)
        assert board.available(a), outcome


def test_a_disabled_breaker_and_a_target_not_in_the_config_never_open() -> None:
    off = t("off", BreakerPolicy(enabled=False, failures=1))
    board = LocalBreakers({"r": route(off)}, clock=Clock())
    stranger = t("inline", BreakerPolicy(failures=1))
    for target in (off, stranger):
        assert board.record(target, FAIL) is None
        assert board.available(target)


async def test_listeners_hear_open_half_open_and_closed() -> None:
    a = t("a", BreakerPolicy(failures=1, cooldown_seconds=0.05))
    heard = Heard()
    board = LocalBreakers({"r": route(a)}, listener=heard)
    board.record(a, FAIL)
    assert heard.states == [("a", OPEN)]
    heard.changed.clear()
    await asyncio.wait_for(heard.changed.wait(), 5)  # the end of the cooldown is reported when it comes
    assert heard.states[-1] == ("a", HALF_OPEN)
    assert await board.admit(a) == PROBE
    board.record(a, OK, probe=True)
    assert heard.states == [("a", OPEN), ("a", HALF_OPEN), ("a", CLOSED)]
    await board.close()


async def test_the_snapshot_lists_every_target_with_its_window_and_cooldown() -> None:
    a, b, off = t("a"), t("b"), t("off", BreakerPolicy(enabled=False))
    clock = Clock()
    board = LocalBreakers({"r": route(Fallback("f", 1, (a, b, off)))}, clock=clock)
    board.record(b, OK)
    board.record(b, FAIL)
    for _ in range(3):
        board.record(a, FAIL)
    clock.now += 2
    snapshot = (await board.snapshot())["r"]
    assert [(h.name, h.state_name) for h in snapshot] == [("a", "open"), ("b", "closed"), ("off", "disabled")]
    assert snapshot[0].cooldown == pytest.approx(3.0)
    assert (snapshot[1].calls, snapshot[1].failures, snapshot[1].failure_rate) == (2, 1, 0.5)
    assert snapshot[1].consecutive_failures == 1 and snapshot[1].cooldown is None


# ---------------------------------------------------------------- one contract, local and Redis


@pytest.fixture(params=["local", "redis"])
async def make_board(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Breakers]]:
    boards: list[Breakers] = []
    url = ""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        await flush_redis(url)

    def make(routes: dict[str, Route], **options: Any) -> Breakers:
        board: Breakers = RedisBreakers(routes, url, **options) if url else LocalBreakers(routes, **options)
        boards.append(board)
        return board

    yield make
    for board in boards:
        await board.close()


async def note(board: Breakers, target: Target, outcome: Outcome, **options: Any) -> None:
    """Record an outcome as the dispatcher does: awaiting the shared store when it must hear of it."""
    told = board.record(target, outcome, **options)
    if told is not None:
        await told


def test_states_and_admissions_are_closed_sets_with_the_values_metrics_show() -> None:
    """A state is the breaker gauge's value (0 closed, 1 half-open, 2 open) and names itself; SKIPPED is a reason."""
    assert [(state, int(state), state.label) for state in State] == [
        (CLOSED, 0, "closed"), (HALF_OPEN, 1, "half_open"), (OPEN, 2, "open"),
    ]  # fmt: skip
    assert float(CLOSED) == 0.0 and SKIPPED == "circuit_open"
    assert isinstance(ORDINARY, Admission) and {ORDINARY, PROBE, REFUSED} < set(Admission)
    breaker = Breaker(POLICY)
    assert breaker.phase(0.0) is State.CLOSED


FAST = BreakerPolicy(failures=2, cooldown_seconds=0.2, max_cooldown_seconds=1.0)


async def test_contract_open_trial_and_recovery(make_board: Callable[..., Breakers]) -> None:
    a = t("a", FAST)
    r = route(a)
    board = make_board({"r": r})
    await note(board, a, FAIL)
    assert board.available(a)
    await note(board, a, FAIL)
    assert board.health(r) is not None and not board.available(a)
    assert await board.admit(a) == REFUSED  # cooling down
    await asyncio.sleep(0.25)  # the cooldown itself is what is waited for
    admitted = await asyncio.gather(board.admit(a), board.admit(a), board.admit(a))
    assert sorted(admitted, key=ORDER.index) == [PROBE, REFUSED, REFUSED]
    await note(board, a, OK, probe=True)
    assert board.health(r) is None and board.available(a)
    assert [(h.state_name, h.consecutive_failures) for h in (await board.snapshot())["r"]] == [("closed", 0)]


async def test_contract_a_failed_trial_doubles_the_cooldown(make_board: Callable[..., Breakers]) -> None:
    a = t("a", FAST)
    board = make_board({"r": route(a)})
    for _ in range(2):
        await note(board, a, FAIL)
    await asyncio.sleep(0.25)
    assert await board.admit(a) == PROBE
    await note(board, a, FAIL, probe=True)
    [health] = (await board.snapshot())["r"]
    assert health.state == OPEN and health.cooldown is not None and 0.3 < health.cooldown <= 0.4


async def test_contract_a_released_trial_can_be_taken_again(make_board: Callable[..., Breakers]) -> None:
    a = t("a", FAST)
    board = make_board({"r": route(a)})
    for _ in range(2):
        await note(board, a, FAIL)
    await asyncio.sleep(0.25)
    assert await board.admit(a) == PROBE
    board.release(a)
    if isinstance(board, RedisBreakers):
        await board.settled()  # Redis hears of the release in the background
    assert await board.admit(a) == PROBE


async def test_contract_retry_after_and_failure_rate(make_board: Callable[..., Breakers]) -> None:
    a = t("a", BreakerPolicy(failures=1, cooldown_seconds=1, max_cooldown_seconds=60))
    b = t("b", BreakerPolicy(failures=100, failure_rate=0.5, min_requests=4))
    board = make_board({"r": route(Fallback("f", 1, (a, b)))})
    await note(board, a, Outcome(429), retry_after=30)
    for outcome, still_closed in [(OK, True), (FAIL, True), (OK, True), (FAIL, True), (FAIL, False)]:
        await note(board, b, outcome)
        assert board.available(b) == still_closed
    health = {h.name: h for h in (await board.snapshot())["r"]}
    assert health["a"].cooldown is not None and 29 < health["a"].cooldown <= 30
    assert health["b"].state == OPEN


# ---------------------------------------------------------------- Redis: shared, cheap, and never in the way


async def evalsha_calls(url: str) -> int:
    client = aioredis.Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_redis_healthy_calls_cost_no_round_trip_and_a_failure_costs_one(redis_url: str) -> None:
    await flush_redis(redis_url)
    a = t("a", FAST)
    r = route(a)
    clock = Clock()
    board = RedisBreakers({"r": r}, redis_url, clock=clock)
    try:
        await board.snapshot()  # one fresh read: the cached view is good for the ttl
        before = await evalsha_calls(redis_url)
        for _ in range(200):
            assert board.health(r) is None
            assert board.record(a, OK) is None
            assert board.record(a, Outcome(400)) is None  # not a failure: as cheap as a success
        assert await evalsha_calls(redis_url) == before
        await note(board, a, FAIL)
        assert await evalsha_calls(redis_url) == before + 1
        await note(board, a, OK)  # ends a run of failures: the shared count must hear it
        await note(board, a, OK)
        assert await evalsha_calls(redis_url) == before + 2
        [health] = (await board.snapshot())["r"]
        assert (health.calls, health.failures, health.consecutive_failures) == (403, 1, 0)  # the successes were handed over
    finally:
        await board.close()


async def test_redis_state_is_shared_by_every_process(redis_url: str) -> None:
    await flush_redis(redis_url)
    a, b = t("a", FAST), t("b", FAST)
    r = route(Fallback("f", 1, (a, b)))
    heard = Heard()
    clocks = {1: Clock(), 2: Clock()}  # each process's clock: moved past the 1 s ttl of its cached view
    first = RedisBreakers({"r": r}, redis_url, clock=clocks[1])
    second = RedisBreakers({"r": r}, redis_url, clock=clocks[2], listener=heard)
    boards = {1: first, 2: second}

    async def reread(number: int) -> None:
        clocks[number].now += 1.1
        boards[number].health(r)  # past the ttl: reads the shared state, in the background
        await boards[number].settled()

    try:
        await note(first, a, FAIL)
        await note(second, a, FAIL)  # failures in a row, counted across processes
        assert not second.available(a) and heard.states == [("a", OPEN)]
        assert first.available(a) and first.health(r) is None  # its cached view is still fresh
        await reread(1)
        assert not first.available(a) and first.health(r) is first
        await asyncio.sleep(0.25)  # Redis' clock decides when the cooldown is over
        admitted = await asyncio.gather(first.admit(a), second.admit(a), first.admit(a), second.admit(a))
        assert sorted(admitted, key=ORDER.index) == [PROBE, REFUSED, REFUSED, REFUSED]  # one trial in all processes
        prober, other = (1, 2) if PROBE in (admitted[0], admitted[2]) else (2, 1)
        await note(boards[prober], a, OK, probe=True)
        assert boards[prober].health(r) is None
        await reread(other)
        assert boards[other].available(a) and boards[other].health(r) is None
        assert heard.states[-1] == ("a", CLOSED)
    finally:
        await first.close()
        await second.close()


async def test_redis_unreachable_never_fails_a_call_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisProcess(tmp_path)  # its port, not yet listening
    a = t("a", FAST)
    r = route(a)
    clock = Clock()
    board = RedisBreakers({"r": r}, server.url, clock=clock, retry_seconds=5)
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.breakers"):
            await note(board, a, FAIL)
            await note(board, a, FAIL)  # decided here, on this process's view
            assert not board.available(a) and board.health(r) is not None
            clock.now += 0.3
            assert await board.admit(a) == PROBE
            await note(board, a, OK, probe=True)
            assert board.available(a)
            for _ in range(5):
                clock.now += 6  # past retry_seconds: Redis is tried again, and still not there
                await note(board, a, FAIL)
                await board.snapshot()
        lost = [r for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(lost) == 1
        server.start()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gateway.breakers"):
            clock.now += 6
            await board.snapshot()
        assert [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]
    finally:
        await board.close()
        server.stop()

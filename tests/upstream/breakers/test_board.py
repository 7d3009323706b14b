"""gateway.upstream.breakers.board: the local board on a fake clock, and one contract for it and the Redis board."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.core.breaker import CLOSED, HALF_OPEN, OPEN, ORDINARY, PROBE, REFUSED
from gateway.core.routing import Outcome
from gateway.core.tree import BreakerPolicy, Fallback, LoadBalance, Route, Single
from gateway.upstream.breakers.board import Breakers, LocalBreakers
from gateway.upstream.breakers.redis import RedisBreakers
from tests.support.breakers import FAIL, FAST, OK, ORDER, PATIENT, Clock, Heard, cooled, note, route, t
from tests.support.servers import flush_redis


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


# One contract, local and Redis.


@pytest.fixture(params=["local", "redis"])
async def make_board(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Breakers]]:
    boards: list[Breakers] = []
    url = ""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        await flush_redis(url)

    def make(routes: dict[str, Route], **options: Any) -> Breakers:
        board: Breakers = RedisBreakers(routes, url, timeout=PATIENT, **options) if url else LocalBreakers(routes, **options)
        boards.append(board)
        return board

    yield make
    for board in boards:
        await board.close()


async def test_contract_open_trial_and_recovery(make_board: Callable[..., Breakers]) -> None:
    a = t("a", FAST)
    r = route(a)
    board = make_board({"r": r})
    await note(board, a, FAIL)
    assert board.available(a)
    await note(board, a, FAIL)
    assert board.health(r) is not None and not board.available(a)
    assert await board.admit(a) == REFUSED  # cooling down
    await cooled()  # the cooldown itself is what is waited for
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
    await cooled()
    assert await board.admit(a) == PROBE
    await note(board, a, FAIL, probe=True)
    [health] = (await board.snapshot())["r"]
    assert health.state == OPEN and health.cooldown is not None
    assert FAST.cooldown_seconds < health.cooldown <= 2 * FAST.cooldown_seconds


async def test_contract_a_released_trial_can_be_taken_again(make_board: Callable[..., Breakers]) -> None:
    a = t("a", FAST)
    board = make_board({"r": route(a)})
    for _ in range(2):
        await note(board, a, FAIL)
    await cooled()
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
    assert health["a"].cooldown is not None and 20 < health["a"].cooldown <= 30  # the retry-after's, not the policy's 1 or 60
    assert health["b"].state == OPEN

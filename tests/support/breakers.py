"""Circuit breakers in tests: targets with a policy, a route around them, a clock that stands still, a listener."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.core.breaker import Admission
from gateway.core.memory.settings import MemorySettings
from gateway.core.routing import Outcome
from gateway.core.tree import BreakerPolicy, Route, Target
from gateway.upstream.breakers.board import Breakers

ORDER = list(Admission)  # to sort admissions by
POLICY = BreakerPolicy(failures=3, failure_rate=0.5, min_requests=10, window_seconds=10, cooldown_seconds=5, max_cooldown_seconds=20)
# Seconds a test's board waits on Redis: a loaded machine may take longer than the 0.5 s a gateway allows.
PATIENT = 5.0
# A cooldown tests wait out, yet long enough that the checks made inside it pass on a loaded machine.
FAST = BreakerPolicy(failures=2, cooldown_seconds=1.0, max_cooldown_seconds=4.0)
# A cooldown no test waits out: a breaker that opens stays open while the test looks at it.
HELD = BreakerPolicy(failures=2, cooldown_seconds=60.0)
OK, FAIL = Outcome(200), Outcome(503)


class Clock:
    """A board's clock that stands still until a test moves `now`."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def t(name: str, policy: BreakerPolicy = POLICY, **options: object) -> Target:
    """A mock target with the breaker `policy`."""
    return Target(name=name, provider="mock", base_url="", api_key="", breaker=policy, **options)  # type: ignore[arg-type]


def route(root: object, name: str = "r") -> Route:
    """A route over `root`, without memory."""
    return Route(name, root, MemorySettings())  # type: ignore[arg-type]


class Heard:
    """A breaker listener that keeps every state change it hears, and says when one came."""

    def __init__(self) -> None:
        self.states: list[tuple[str, int]] = []
        self.changed = asyncio.Event()

    def breaker_changed(self, target: Target, state: int) -> None:
        self.states.append((target.name, state))
        self.changed.set()


async def cooled(policy: BreakerPolicy = FAST) -> None:
    """Wait out a breaker's first cooldown (the breaker's own timer, or Redis' clock: nothing a test can await)."""
    await asyncio.sleep(policy.cooldown_seconds + 0.05)


async def note(board: Breakers, target: Target, outcome: Outcome, **options: Any) -> None:
    """Record an outcome as the dispatcher does: awaiting the shared store when it must hear of it."""
    told = board.record(target, outcome, **options)
    if told is not None:
        await told

"""Every configured target's breaker in one process, as the dispatcher and the health page see them.

The dispatcher asks `health(route)` before walking a route: None while every target of the route
is closed (the common case costs a dict lookup), else the board itself, which the walk asks which
targets it may call. It reports each attempt with `record` (a closed breaker's success is a few
attribute updates), claims a half-open target's trial with `admit`, and gives an abandoned trial
back with `release`. Targets that are not in the config (a client's inline route) have no breaker.

With `gateway serve --workers N` each worker keeps its own board: a target opens in a worker once
that worker has seen it fail. `RedisBreakers` shares one state between processes and hosts.
Either way, a stream is judged at its first event (as the route judges it): a failure after it
reached the client does not count against the target.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from gateway.core.breaker import CLOSED, OPEN, ORDINARY, PROBE, REFUSED, Admission, Breaker, State
from gateway.core.routing import Health, Outcome, judging_codes, triggers
from gateway.core.settings import BreakerStoreKind
from gateway.core.tree import Route, Target, iter_targets

log = logging.getLogger("gateway.breakers")

# Statuses that describe the request, not the target: they never count as a failure.
CLIENT_MISTAKES: Final = frozenset({400, 413, 415, 422})




class Breakers(Protocol):
    """Where breaker state lives: what the dispatcher and the health page ask of it."""

    kind: BreakerStoreKind

    def health(self, route: Route) -> Health | None:
        """What the walk may call on `route`; None while every one of its targets is closed."""
        ...

    def available(self, target: Target) -> bool: ...

    async def admit(self, target: Target) -> Admission:
        """ORDINARY, PROBE or REFUSED, for a target the walk chose while its route had a breaker not closed."""
        ...

    def record(
        self, target: Target, outcome: Outcome, *, probe: bool = False, retry_after: float | None = None
    ) -> Awaitable[None] | None:
        """Take one attempt's outcome; an awaitable when a shared store must hear of it first."""
        ...

    def release(self, target: Target) -> None:
        """A PROBE call ended without an outcome (its client left)."""
        ...

    async def snapshot(self) -> dict[str, list[TargetHealth]]:
        """Every route's targets in configured order, with their breakers as of now."""
        ...

    async def close(self) -> None: ...


class BreakerListener(Protocol):
    """Told when a breaker's state changes (metrics keep a gauge per target)."""

    def breaker_changed(self, target: Target, state: State) -> None: ...


def counts_as_failure(codes: frozenset[int] | None, outcome: Outcome) -> bool:
    """Whether an outcome counts against the target: what its judging node moves on from,
    except the statuses that describe the request."""
    return outcome.status not in CLIENT_MISTAKES and triggers(codes, outcome)


@dataclass(frozen=True, slots=True)
class TargetHealth:
    """One target's breaker as the health page shows it; `cooldown` is seconds left, if open."""

    name: str
    enabled: bool
    state: State = CLOSED
    calls: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    cooldown: float | None = None

    @property
    def state_name(self) -> str:
        return self.state.label if self.enabled else "disabled"

    @property
    def failure_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0


class Guard:
    """One target's breaker and what the board keeps around it."""

    __slots__ = ("breaker", "calls", "codes", "failed", "key", "pending", "reported", "route", "target", "timer", "token")

    def __init__(self, route: RouteGuards, target: Target, codes: frozenset[int] | None) -> None:
        self.route = route
        self.target = target
        self.codes = codes  # the statuses that count as failures (None: any non-2xx)
        self.breaker = Breaker(target.breaker)
        self.reported = CLOSED  # the phase listeners last heard
        self.timer: asyncio.TimerHandle | None = None  # reports the end of the cooldown
        self.key = ""  # the shared store's key
        self.pending = 0  # successes the shared store has not heard of yet
        self.calls = self.failed = 0  # the shared window, as last read
        self.token = ""  # this process's claim on the shared trial


class RouteGuards:
    __slots__ = ("fresh_until", "guards", "route", "unsettled")

    def __init__(self, route: Route) -> None:
        self.route = route
        self.guards: list[Guard] = []
        self.unsettled = 0  # guards whose breaker is not closed
        self.fresh_until = 0.0  # the shared store's state is re-read after this


class LocalBreakers:
    """The breakers of one process (also the Health the routing walk reads)."""

    kind = BreakerStoreKind.LOCAL

    def __init__(
        self,
        routes: Mapping[str, Route],
        *,
        listener: BreakerListener | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._listener = listener
        self._guards: dict[Target, Guard] = {}
        self._routes: dict[str, RouteGuards] = {}
        self._unsettled = 0  # guards whose breaker is not closed, on every route
        for name, route in routes.items():
            entry = self._routes[name] = RouteGuards(route)
            for target, codes in judging_codes(route.root):
                if target.breaker.enabled:
                    guard = self._guards[target] = Guard(entry, target, codes)
                    entry.guards.append(guard)

    # ---- what the dispatcher uses

    def health(self, route: Route) -> LocalBreakers | None:
        """The walk's view of `route`'s targets; None when every one is closed."""
        if not self._unsettled:  # every breaker of the board is closed: the common case, one read
            return None
        entry = self._routes.get(route.name)
        if entry is None or entry.route is not route or not entry.unsettled:
            return None
        return self

    def available(self, target: Target) -> bool:
        guard = self._guards.get(target)
        return guard is None or guard.breaker.available(self._clock())

    def reopens_at(self, target: Target) -> float:
        guard = self._guards.get(target)
        return 0.0 if guard is None else guard.breaker.open_until

    async def admit(self, target: Target) -> Admission:
        """Before calling a target the walk chose while its route had a breaker not closed."""
        guard = self._guards.get(target)
        if guard is None or guard.breaker.state == CLOSED:
            return ORDINARY
        return PROBE if guard.breaker.claim(self._clock(), trial_lease(target)) else REFUSED

    def record(
        self, target: Target, outcome: Outcome, *, probe: bool = False, retry_after: float | None = None
    ) -> Awaitable[None] | None:
        """Take one attempt's outcome; an awaitable when a shared store must hear of it first."""
        guard = self._guards.get(target)
        if guard is None:
            return None
        breaker = guard.breaker
        if breaker.state == CLOSED and outcome.ok:
            breaker.succeeded(self._clock())
            return None
        self._record(guard, counts_as_failure(guard.codes, outcome), probe=probe, retry_after=retry_after)
        return None

    def release(self, target: Target) -> None:
        """The trial call ended without an outcome (its client left)."""
        guard = self._guards.get(target)
        if guard is not None:
            guard.breaker.release()

    # ---- what the health page uses

    async def snapshot(self) -> dict[str, list[TargetHealth]]:
        """Every route's targets in configured order, with their breakers as of now."""
        return self._snapshot()

    async def close(self) -> None:
        for guard in self._guards.values():
            if guard.timer is not None:
                guard.timer.cancel()

    # ---- shared with the Redis board

    def _record(self, guard: Guard, failed: bool, *, probe: bool, retry_after: float | None) -> None:
        if guard.breaker.record(failed, self._clock(), probe=probe, retry_after=retry_after):
            self._changed(guard)
        elif guard.breaker.state != CLOSED and failed and retry_after is not None:
            self._changed(guard)  # a Retry-After may have moved the cooldown's end

    def _changed(self, guard: Guard) -> None:
        """Keep the route's count, the listeners and the end-of-cooldown timer in step with the breaker."""
        breaker, now = guard.breaker, self._clock()
        phase = breaker.phase(now)
        was_closed = guard.reported == CLOSED
        if (breaker.state == CLOSED) != was_closed:
            change = 1 if was_closed else -1
            guard.route.unsettled += change
            self._unsettled += change
        if guard.timer is not None:
            guard.timer.cancel()
            guard.timer = None
        if phase == OPEN:
            guard.timer = _call_later(breaker.open_until - now, self._changed, guard)
        if phase == guard.reported:
            return
        guard.reported = phase
        target = guard.target
        if phase == OPEN:
            log.warning("circuit of %s / %s open for %.3gs", guard.route.route.name, target.name, breaker.open_until - now)
        else:
            log.info("circuit of %s / %s %s", guard.route.route.name, target.name, phase.label.replace("_", "-"))
        if self._listener is not None:
            self._listener.breaker_changed(target, phase)

    def _snapshot(self) -> dict[str, list[TargetHealth]]:
        now = self._clock()
        routes: dict[str, list[TargetHealth]] = {}
        for name, entry in self._routes.items():
            routes[name] = [self._target_health(target, now) for target in iter_targets(entry.route.root)]
        return routes

    def _target_health(self, target: Target, now: float) -> TargetHealth:
        guard = self._guards.get(target)
        if guard is None:
            return TargetHealth(target.name, enabled=False)
        breaker = guard.breaker
        phase = breaker.phase(now)
        calls, failures = self._window(guard, now)
        cooldown = breaker.open_until - now if phase == OPEN else None
        return TargetHealth(
            target.name, True, phase, calls=calls, failures=failures, consecutive_failures=breaker.failures, cooldown=cooldown
        )

    def _window(self, guard: Guard, now: float) -> tuple[int, int]:
        return guard.breaker.window.totals(now)


def trial_lease(target: Target) -> float:
    """How long a trial may hold a half-open breaker: its answer (or first event) comes within the timeout."""
    return target.timeout + 1.0


def _call_later(delay: float, callback: Callable[[Guard], None], guard: Guard) -> asyncio.TimerHandle | None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # driven without an event loop (unit tests): phases are still read on demand
        return None
    return loop.call_later(max(delay, 0.0), callback, guard)

"""One target's circuit breaker as a pure state machine: the caller passes the time in.

    CLOSED ──(failures in a row ≥ failures, or failure rate > failureRate over ≥ minRequests
              within windowSeconds)──► OPEN for the cooldown (doubled per trip in a row, capped)
    OPEN ──(cooldown over)──► HALF_OPEN: one trial call, claimed with a lease
    HALF_OPEN ──(trial succeeds)──► CLOSED      HALF_OPEN ──(trial fails)──► OPEN, cooldown doubled

A Retry-After longer than the cooldown extends it (up to maxCooldownSeconds). Outcomes of calls
that began before the breaker opened change nothing once it is open; a probe (the trial, or a call
forced because every target of a route is open) that succeeds closes it.
"""

from __future__ import annotations

from enum import Enum, IntEnum, auto
from typing import Final

from gateway.core.failures import Failure
from gateway.core.tree import BreakerPolicy


class State(IntEnum):
    """A circuit's state; its value is the gateway_breaker_state gauge's (0 closed, 1 half-open, 2 open)."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2

    @property
    def label(self) -> str:
        """The state as the health page and the logs name it: closed, half_open, open."""
        return self.name.lower()


# The states by their names alone, as every call reads them: a module's name is looked up in a
# fraction of the time an Enum class's attribute takes (on 3.11).
CLOSED: Final = State.CLOSED
HALF_OPEN: Final = State.HALF_OPEN
OPEN: Final = State.OPEN

BUCKETS: Final = 10  # the failure-rate window is kept as this many slices of windowSeconds


class Window:
    """Calls and failures over the last windowSeconds, in BUCKETS slices that age out in turn.

    The slice of the latest count is at index `here` and spans [begins, ends): a count within it
    costs a comparison, not a division (the breaker's success counts inline).
    """

    __slots__ = ("begins", "calls", "ends", "failures", "here", "slot", "width")

    def __init__(self, seconds: float) -> None:
        self.width = seconds / BUCKETS
        self.calls = [0] * BUCKETS
        self.failures = [0] * BUCKETS
        self._enter(0)

    def add(self, now: float, *, calls: int = 1, failures: int = 0) -> None:
        if not self.begins <= now < self.ends:
            self._advance(int(now // self.width))
        self.calls[self.here] += calls
        if failures:
            self.failures[self.here] += failures

    def totals(self, now: float) -> tuple[int, int]:
        """(calls, failures) within the window as of `now`."""
        if now >= self.ends:
            self._advance(max(int(now // self.width), self.slot))
        return sum(self.calls), sum(self.failures)

    def clear(self) -> None:
        self.calls = [0] * BUCKETS
        self.failures = [0] * BUCKETS

    def _advance(self, slot: int) -> None:
        if slot - self.slot >= BUCKETS or slot < self.slot:
            self.clear()
        else:
            for aged in range(self.slot + 1, slot + 1):
                self.calls[aged % BUCKETS] = self.failures[aged % BUCKETS] = 0
        self._enter(slot)

    def _enter(self, slot: int) -> None:
        self.slot, self.here = slot, slot % BUCKETS
        self.begins, self.ends = slot * self.width, (slot + 1) * self.width


class Breaker:
    """The state of one target's circuit; every method takes `now` from the caller's clock."""

    __slots__ = ("failures", "open_until", "policy", "state", "trial_until", "trips", "window")

    def __init__(self, policy: BreakerPolicy) -> None:
        self.policy = policy
        self.state: State = CLOSED  # CLOSED or OPEN; HALF_OPEN is OPEN once the cooldown is over
        self.failures = 0  # in a row
        self.trips = 0  # in a row: the cooldown doubles with each
        self.open_until = 0.0
        self.trial_until = 0.0  # a trial is under way until its lease ends
        self.window = Window(policy.window_seconds)

    def phase(self, now: float) -> State:
        """CLOSED, HALF_OPEN or OPEN as of `now`."""
        if self.state == CLOSED:
            return CLOSED
        return OPEN if now < self.open_until else HALF_OPEN

    def available(self, now: float) -> bool:
        """Closed, or half-open with no trial under way."""
        return self.state == CLOSED or (now >= self.open_until and now >= self.trial_until)

    def claim(self, now: float, lease: float) -> bool:
        """Take the half-open breaker's one trial (for at most `lease` seconds); False if not half-open or taken."""
        if self.state == CLOSED or now < self.open_until or now < self.trial_until:
            return False
        self.trial_until = now + lease
        return True

    def release(self) -> None:
        """The trial ended without an outcome (the client left): the next call may take it."""
        self.trial_until = 0.0

    def succeeded(self, now: float) -> None:
        """A closed breaker's call that did not fail: the common case, two stores while its slice lasts."""
        self.failures = 0
        window = self.window
        if window.begins <= now < window.ends:
            window.calls[window.here] += 1
        else:
            window.add(now)

    def record(self, failed: bool, now: float, *, probe: bool = False, retry_after: float | None = None) -> bool:
        """Take one call's outcome; True when the breaker opened or closed."""
        if self.state == CLOSED:
            if not failed:
                self.succeeded(now)
                return False
            self.failures += 1
            self.window.add(now, failures=1)
            if self.failures >= self.policy.failures or self._rate_exceeded(now):
                self._trip(now, retry_after)
                return True
            return False
        if probe:
            self.trial_until = 0.0
            if not failed:
                self._close()
                return True
            if now >= self.open_until:  # the trial failed: open again, for longer
                self._trip(now, retry_after)
                return True
        if failed and retry_after is not None:
            self.open_until = max(self.open_until, now + min(retry_after, self.policy.max_cooldown_seconds))
        return False

    def cooldown(self) -> float:
        """The next trip's cooldown: doubled per trip in a row, capped."""
        policy = self.policy
        return min(policy.cooldown_seconds * 2.0 ** min(self.trips, 64), policy.max_cooldown_seconds)

    def _rate_exceeded(self, now: float) -> bool:
        calls, failures = self.window.totals(now)
        return calls >= self.policy.min_requests and failures > self.policy.failure_rate * calls

    def _trip(self, now: float, retry_after: float | None) -> None:
        extended = min(retry_after or 0.0, self.policy.max_cooldown_seconds)
        self.open_until = now + max(self.cooldown(), extended)
        self.state, self.trips, self.failures, self.trial_until = OPEN, self.trips + 1, 0, 0.0

    def _close(self) -> None:
        self.state, self.trips, self.failures, self.trial_until = CLOSED, 0, 0, 0.0
        self.window.clear()  # the failures that opened it must not open it again by their rate


SKIPPED: Final = Failure.CIRCUIT_OPEN  # the reason a route moved on from a target it did not call


class Admission(Enum):
    """How a call to a target comes about: what the breakers' `admit` says (ORDINARY, PROBE, REFUSED), or FORCED."""

    ORDINARY = auto()  # closed (maybe meanwhile): an ordinary call
    PROBE = auto()  # the half-open trial: its outcome closes or reopens the breaker
    REFUSED = auto()  # another call has the trial: skip the target
    FORCED = auto()  # every target the route could use is open: called anyway; a success closes it


# By their names alone, as the dispatcher reads them on every call (see CLOSED)
ORDINARY: Final = Admission.ORDINARY
PROBE: Final = Admission.PROBE
REFUSED: Final = Admission.REFUSED
FORCED: Final = Admission.FORCED

"""gateway.core.breaker: one breaker's state machine, on times given to it."""

from __future__ import annotations

import pytest

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
from gateway.core.tree import BreakerPolicy
from tests.support.breakers import POLICY


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


def test_states_and_admissions_are_closed_sets_with_the_values_metrics_show() -> None:
    """A state is the breaker gauge's value (0 closed, 1 half-open, 2 open) and names itself; SKIPPED is a reason."""
    assert [(state, int(state), state.label) for state in State] == [
        (CLOSED, 0, "closed"), (HALF_OPEN, 1, "half_open"), (OPEN, 2, "open"),
    ]  # fmt: skip
    assert float(CLOSED) == 0.0 and SKIPPED == "circuit_open"
    assert isinstance(ORDINARY, Admission) and {ORDINARY, PROBE, REFUSED} < set(Admission)
    breaker = Breaker(POLICY)
    assert breaker.phase(0.0) is State.CLOSED

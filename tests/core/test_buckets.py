"""Token buckets: refill at limit/60 a second, all-or-nothing takes, give-backs, and what the headers show."""

from __future__ import annotations

import math

import pytest

from gateway.core.buckets import Bucket
from gateway.core.governance import Quota


def test_a_full_bucket_lets_the_whole_minute_through_at_once_then_refuses() -> None:
    bucket: Bucket | None = Bucket.full(60, now=0.0)
    for _ in range(60):
        assert bucket is not None
        bucket = bucket.take(1, now=0.0)
    assert bucket is not None
    assert bucket.take(1, now=0.0) is None


def test_it_refills_limit_over_sixty_a_second() -> None:
    bucket = Bucket(capacity=120, level=0.0, at=10.0)
    assert bucket.level_at(10.5) == pytest.approx(1.0)
    assert bucket.take(1, now=10.4) is None
    assert bucket.take(1, now=10.5) is not None
    assert bucket.level_at(1000.0) == 120  # never above its capacity


def test_a_refused_take_takes_nothing() -> None:
    bucket = Bucket(capacity=100, level=5.0, at=0.0)
    assert bucket.take(6, now=0.0) is None
    assert bucket.level_at(0.0) == 5.0


def test_a_take_larger_than_the_capacity_takes_the_capacity() -> None:
    bucket = Bucket.full(100, now=0.0)
    taken = bucket.take(10_000, now=0.0)
    assert taken is not None and taken.level == 0.0
    assert bucket.wait_seconds(10_000, now=0.0) == 0.0


def test_give_back_may_go_below_zero_but_not_above_capacity() -> None:
    bucket = Bucket(capacity=60, level=10.0, at=0.0)
    assert bucket.give_back(-30, now=0.0).level == -20.0
    assert bucket.give_back(500, now=0.0).level == 60.0
    assert bucket.give_back(-30, now=0.0).quota(0.0).remaining == -20


def test_wait_and_reset_seconds() -> None:
    bucket = Bucket(capacity=60, level=0.5, at=0.0)  # one a second
    assert bucket.wait_seconds(1, now=0.0) == pytest.approx(0.5)
    assert bucket.wait_seconds(3, now=0.0) == pytest.approx(2.5)
    assert bucket.reset_seconds(0.0) == pytest.approx(59.5)
    assert Bucket.full(60, 0.0).reset_seconds(0.0) == 0.0


def test_quota_floors_what_is_left() -> None:
    bucket = Bucket(capacity=600, level=10.9, at=0.0)
    assert bucket.quota(0.0) == Quota(limit=600, remaining=10, reset_seconds=pytest.approx(58.91))


def test_a_clock_that_went_back_refills_nothing() -> None:
    assert Bucket(capacity=60, level=1.0, at=5.0).level_at(4.0) == 1.0


def test_resizing_keeps_what_it_holds_up_to_the_new_capacity() -> None:
    bucket = Bucket(capacity=100, level=80.0, at=0.0)
    assert bucket.resized(100, now=0.0) is bucket
    assert bucket.resized(50, now=0.0).level == 50.0
    assert bucket.resized(1000, now=0.0) == Bucket(capacity=1000, level=80.0, at=0.0)


def test_an_empty_capacity_never_refills() -> None:
    bucket = Bucket(capacity=0, level=0.0, at=0.0)
    assert bucket.take(1, now=0.0) is not None  # min(1, capacity) is nothing
    assert bucket.reset_seconds(0.0) == 0.0
    assert math.isinf(Bucket(capacity=0, level=-1.0, at=0.0).wait_seconds(1, now=0.0))

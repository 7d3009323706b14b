"""Token buckets: refill at limit/60 a second, takes made only when held, give-backs, and what the headers show."""

from __future__ import annotations

import math

import pytest

from gateway.core.buckets import Bucket
from gateway.core.governance import Quota


def test_a_full_bucket_lets_the_whole_minute_through_at_once_then_refuses() -> None:
    bucket = Bucket.full(60, now=0.0)
    for _ in range(60):
        assert bucket.take(1, now=0.0)
    assert not bucket.take(1, now=0.0)
    assert bucket.level == 0.0


def test_it_refills_limit_over_sixty_a_second() -> None:
    bucket = Bucket(120, level=0.0, at=10.0)
    assert bucket.level_at(10.5) == pytest.approx(1.0)
    assert not bucket.take(1, now=10.4)
    assert bucket.take(1, now=10.5)
    assert bucket.level_at(1000.0) == 120  # never above its capacity


def test_a_refused_take_takes_nothing() -> None:
    bucket = Bucket(60, level=5.0, at=0.0)
    assert not bucket.take(6, now=0.0) and bucket.level == 5.0
    assert bucket.take(6, now=1.0)  # refilled by one
    assert bucket.level == 0.0


def test_refill_brings_it_to_now_and_no_further_back() -> None:
    bucket = Bucket(60, level=5.0, at=10.0)
    assert bucket.refill(12.0) == 7.0 and bucket.at == 12.0
    assert bucket.refill(11.0) == 7.0 and bucket.at == 12.0


def test_a_take_larger_than_the_capacity_takes_the_capacity() -> None:
    bucket = Bucket.full(100, now=0.0)
    assert bucket.wait_seconds(10_000, now=0.0) == 0.0
    assert bucket.take(10_000, now=0.0)
    assert bucket.level == 0.0


def test_give_back_may_go_below_zero_but_not_above_capacity() -> None:
    bucket = Bucket(60, level=10.0, at=0.0)
    bucket.give_back(-30, now=0.0)
    assert bucket.level == -20.0
    assert bucket.quota(0.0).remaining == -20
    bucket.give_back(500, now=0.0)
    assert bucket.level == 60.0


def test_wait_and_reset_seconds() -> None:
    bucket = Bucket(60, level=0.5, at=0.0)  # one a second
    assert bucket.wait_seconds(1, now=0.0) == pytest.approx(0.5)
    assert bucket.wait_seconds(3, now=0.0) == pytest.approx(2.5)
    assert bucket.reset_seconds(0.0) == pytest.approx(59.5)
    assert Bucket.full(60, 0.0).reset_seconds(0.0) == 0.0


def test_quota_floors_what_is_left() -> None:
    bucket = Bucket(600, level=10.9, at=0.0)
    assert bucket.quota(0.0) == Quota(limit=600, remaining=10, reset_seconds=pytest.approx(58.91))


def test_a_clock_that_went_back_refills_nothing() -> None:
    assert Bucket(60, level=1.0, at=5.0).level_at(4.0) == 1.0


def test_resizing_keeps_what_it_holds_up_to_the_new_capacity() -> None:
    bucket = Bucket(100, level=80.0, at=0.0)
    bucket.resize(100, now=30.0)
    assert (bucket.level, bucket.at) == (80.0, 0.0)  # the same limit: untouched
    bucket.resize(50, now=0.0)
    assert (bucket.capacity, bucket.level) == (50, 50.0)
    bucket.resize(1000, now=0.0)
    assert (bucket.capacity, bucket.level, bucket.rate) == (1000, 50.0, pytest.approx(1000 / 60))


def test_an_empty_capacity_takes_nothing_and_never_refills() -> None:
    bucket = Bucket(0, level=0.0, at=0.0)
    assert bucket.take(1, now=0.0) and bucket.level == 0.0  # min(1, capacity) is nothing
    assert bucket.reset_seconds(0.0) == 0.0 and bucket.quota(0.0).reset_seconds == 0.0
    assert math.isinf(Bucket(0, level=-1.0, at=0.0).wait_seconds(1, now=0.0))


def test_it_shows_its_state() -> None:
    assert repr(Bucket(5, level=1.0, at=2.0)) == "Bucket(capacity=5, level=1.0, at=2.0)"


def test_a_quota_unchanged_is_the_one_given_last_and_a_changed_one_is_new() -> None:
    bucket = Bucket.full(600, now=0.0)
    bucket.take(1, now=0.0)
    first = bucket.quota(0.0)
    assert bucket.quota(0.0) is first  # nothing changed: the same (frozen) quota
    bucket.refill(1.0)  # full again
    bucket.take(1, now=1.0)
    assert bucket.quota(1.0) is first  # full again, then the same take: the same figures
    bucket.take(1, now=1.0)
    second = bucket.quota(1.0)
    assert second is not first and second == Quota(limit=600, remaining=598, reset_seconds=pytest.approx(0.2))
    bucket.resize(700, now=1.0)  # a higher limit: the same level, another quota
    assert bucket.quota(1.0) == Quota(limit=700, remaining=598, reset_seconds=pytest.approx(102 / (700 / 60)))
    bucket.resize(300, now=1.0)
    assert bucket.quota(1.0) == Quota(limit=300, remaining=300, reset_seconds=0.0)

"""Token buckets for per-minute limits, as pure values on a clock the caller gives.

A bucket holds up to `capacity` (the per-minute limit) and refills continuously, capacity / 60
a second, so a client that keeps under the limit is never refused and one that bursts gets the
whole minute's worth at once, then the refill's pace. A take is all-or-nothing and never more
than the capacity (one large request is not refused for ever); a give-back may leave the bucket
below zero (a request used more than it reserved) but never above its capacity. The Redis
governor's script does the same arithmetic in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gateway.core.governance import Quota

SECONDS_PER_REFILL = 60.0  # a bucket refills from empty to full in a minute


@dataclass(frozen=True, slots=True)
class Bucket:
    """A bucket of `capacity` holding `level` at clock time `at` (seconds)."""

    capacity: int
    level: float
    at: float

    @classmethod
    def full(cls, capacity: int, now: float) -> Bucket:
        """A bucket no one has taken from yet."""
        return cls(capacity=capacity, level=float(capacity), at=now)

    @property
    def rate(self) -> float:
        """What it regains a second."""
        return self.capacity / SECONDS_PER_REFILL

    def level_at(self, now: float) -> float:
        """What it holds at `now` (a clock that went back refills nothing)."""
        return min(float(self.capacity), self.level + max(0.0, now - self.at) * self.rate)

    def take(self, amount: int, now: float) -> Bucket | None:
        """The bucket after `amount` (at most its capacity) is taken at `now`; None when it holds less."""
        wanted = min(amount, self.capacity)
        level = self.level_at(now)
        if level < wanted:
            return None
        return Bucket(capacity=self.capacity, level=level - wanted, at=now)

    def give_back(self, amount: float, now: float) -> Bucket:
        """The bucket after `amount` is returned at `now` (negative: more is taken), never above its capacity."""
        return Bucket(capacity=self.capacity, level=min(float(self.capacity), self.level_at(now) + amount), at=now)

    def wait_seconds(self, amount: int, now: float) -> float:
        """How long until a take of `amount` would succeed (0: now)."""
        missing = min(amount, self.capacity) - self.level_at(now)
        return max(0.0, missing / self.rate) if self.capacity > 0 else math.inf

    def reset_seconds(self, now: float) -> float:
        """How long until it is full again."""
        return (self.capacity - self.level_at(now)) / self.rate if self.capacity > 0 else 0.0

    def quota(self, now: float) -> Quota:
        """The limit, what is left (whole, floored) and when it is full again, for the x-ratelimit-* headers."""
        return Quota(limit=self.capacity, remaining=math.floor(self.level_at(now)), reset_seconds=self.reset_seconds(now))

    def resized(self, capacity: int, now: float) -> Bucket:
        """The bucket under a new limit: what it holds, cut to the new capacity (a reload's or a PATCH's limits)."""
        if capacity == self.capacity:
            return self
        return Bucket(capacity=capacity, level=min(float(capacity), self.level_at(now)), at=now)

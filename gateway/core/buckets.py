"""Token buckets for per-minute limits: arithmetic on a clock the caller gives, no I/O.

A bucket holds up to `capacity` (the per-minute limit) and refills continuously, capacity / 60
a second, so a client that keeps under the limit is never refused and one that bursts gets the
whole minute's worth at once, then the refill's pace. A take is never more than the capacity
(one large request is not refused for ever); a give-back may leave the bucket below zero (a
request used more than it reserved) but never above its capacity. The Redis governor's script
does the same arithmetic in milliseconds.

A bucket is changed in place: it is on every limited request's path, where a new object per
take cost more than the arithmetic (bench/README.md, issue 25). Several buckets taken from all
or none are taken from in turn (`take`), and what was taken is given back when a later one
refuses (`give_back`).
"""

from __future__ import annotations

import math

from gateway.core.governance import Quota

SECONDS_PER_REFILL = 60.0  # a bucket refills from empty to full in a minute


class Bucket:
    """A bucket of `capacity` holding `level` at clock time `at` (seconds)."""

    __slots__ = ("at", "capacity", "level", "rate", "shown", "shown_level")

    def __init__(self, capacity: int, *, level: float, at: float) -> None:
        self.capacity = capacity
        self.rate = capacity / SECONDS_PER_REFILL  # what it regains a second
        self.level = level
        self.at = at
        self.shown: Quota | None = None  # the quota it gave last, at the level `shown_level` (see `quota`)
        self.shown_level = 0.0

    @classmethod
    def full(cls, capacity: int, now: float) -> Bucket:
        """A bucket no one has taken from yet."""
        return cls(capacity, level=float(capacity), at=now)

    def __repr__(self) -> str:
        return f"Bucket(capacity={self.capacity}, level={self.level}, at={self.at})"

    def level_at(self, now: float) -> float:
        """What it holds at `now` (a clock that went back refills nothing)."""
        elapsed = now - self.at
        if elapsed <= 0:
            return self.level
        level = self.level + elapsed * self.rate
        return level if level < self.capacity else self.capacity

    def refill(self, now: float) -> float:
        """Bring it to `now` (what it regained since it was last changed, in place); what it holds."""
        elapsed = now - self.at
        if elapsed > 0:
            level = self.level + elapsed * self.rate
            self.level = level if level < self.capacity else self.capacity
            self.at = now
        return self.level

    def take(self, amount: int, now: float) -> bool:
        """Take `amount`, at most its capacity, at `now` if it holds that much: whether it did (refused: nothing taken)."""
        taken = amount if amount < self.capacity else self.capacity
        if self.refill(now) < taken:
            return False
        self.level -= taken
        return True

    def give_back(self, amount: float, now: float) -> None:
        """Return `amount` at `now` (negative: more is taken), never above its capacity."""
        level = self.refill(now) + amount
        self.level = level if level < self.capacity else self.capacity

    def wait_seconds(self, amount: int, now: float) -> float:
        """How long until a take of `amount` would succeed (0: now)."""
        if self.capacity <= 0:
            return 0.0 if amount <= 0 else math.inf
        return max(0.0, (min(amount, self.capacity) - self.level_at(now)) / self.rate)

    def reset_seconds(self, now: float) -> float:
        """How long until it is full again."""
        return (self.capacity - self.level_at(now)) / self.rate if self.capacity > 0 else 0.0

    def quota(self, now: float) -> Quota:
        """The limit, what is left (whole, floored) and when it is full again, for the x-ratelimit-* headers.

        A quota follows from the level alone (until a resize): the one it gave last is given again
        at the same level, as it is for a bucket full again before each request (one far from its
        limit), which then neither works it out nor builds another.
        """
        level = self.level if now == self.at else self.refill(now)  # a take at `now` just brought it there
        shown = self.shown
        if shown is None or level != self.shown_level:
            reset = (self.capacity - level) / self.rate if self.capacity > 0 else 0.0
            self.shown = shown = Quota(self.capacity, math.floor(level), reset)
            self.shown_level = level
        return shown

    def resize(self, capacity: int, now: float) -> None:
        """Take a new limit (a reload's or a PATCH's): what it holds, cut to the new capacity."""
        if capacity != self.capacity:
            self.level = min(capacity, self.level_at(now))
            self.at = now
            self.capacity = capacity
            self.rate = capacity / SECONDS_PER_REFILL
            self.shown = None  # its quotas say the new limit

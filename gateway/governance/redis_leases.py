"""Capacity a process took from Redis' shared limits ahead of its requests: admissions it covers make no round trip.

A lease is this process's share of one Redis item: tokens (or requests) of a bucket, or slots of
a key's concurrency. It is taken in the same atomic script call as a request that the lease
could not cover (redis_script's top-up, sized there on Redis' numbers), so what the leases of
every replica hold plus what Redis holds never exceeds a limit: admitting from a lease is exact.

- A bucket lease's `left` is what the process may take without asking; settlements reconcile
  into it (reserved - used), so it may fall below 0: a debt, charged to Redis by the next call
  that needs the bucket, or by the flush of idle leases.
- A slots lease's `leased` is the process's field in the slots hash; requests in flight take
  from it (`in_flight` <= `leased`), and a request's end frees its slot here.
- What a lease holds unused for `IDLE_SECONDS` is given back (a bucket's `left`, slots over the
  requests in flight), and everything when the governor closes. A killed process's bucket lease
  is lost with it and comes back as the bucket refills (within the minute); its slots free when
  its liveness record ends (redis_script).

The headers a lease admission shows are approximate across replicas: the level Redis last
reported, refilled since at the bucket's rate, plus what the lease holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import floor
from typing import Final

from gateway.core.buckets import SECONDS_PER_REFILL
from gateway.core.governance import Quota
from gateway.governance.local import Counts, Ledger
from gateway.governance.redis_script import Item, ItemKind, Outcome, Unsent

IDLE_SECONDS: Final = 1.0  # a lease unused this long is given back
ROUTE: Final = "route"  # the subject of a route's limits (a key's: "key")
LEASE_SHARE: Final = 10  # a lease keeps at most limit // LEASE_SHARE unused (the script's top-up is as large)


class BucketLease:
    """What this process holds of the bucket `key` of `capacity`, and the level Redis last reported of it."""

    __slots__ = ("asking", "at", "capacity", "key", "left", "open", "rate", "seen", "shown", "shown_level", "used_at")

    def __init__(self, key: str, capacity: int) -> None:
        self.key = key
        self.capacity = capacity
        self.rate = capacity / SECONDS_PER_REFILL
        self.left = 0.0  # below 0: a debt (requests used more than they reserved)
        self.asking = False  # a call leasing a top-up of it is under way
        self.used_at = 0.0
        self.seen = float(capacity)  # Redis' level, reported at `at` (this process's clock)
        self.at = 0.0
        self.open = True  # False once given back for good (closed): settlements then go to Redis
        self.shown: Quota | None = None  # the quota it gave last, at the level `shown_level` (see `quota`)
        self.shown_level = 0.0

    def resize(self, capacity: int) -> None:
        """Take a new limit (a reload's or a PATCH's); lowered, it drops what it holds (a debt stays owed).

        Kept, a lease would add to the bucket Redis caps at the new limit: every replica up to a
        tenth of it over. Given back, it would refill the bucket after other replicas drained it
        under the new limit: as much over. Dropped, it is lost for the minute the bucket takes to
        refill (Redis caps the bucket to the new limit as well).
        """
        lowered, self.capacity, self.rate = capacity < self.capacity, capacity, capacity / SECONDS_PER_REFILL
        self.shown = None  # its quotas say the new limit
        if lowered:
            self.left = min(self.left, 0.0)

    def has_room(self) -> bool:
        """Whether it covers a request's part of at least one."""
        return self.left > 0

    def reported(self, level: float, now: float) -> None:
        """Redis said the bucket holds `level` at `now`."""
        self.seen = level
        self.at = now

    def quota(self, now: float) -> Quota:
        """The limit, what is left (Redis' last level, refilled since, and this lease) and when it is full again.

        A quota follows from the level alone (until a resize): the one it gave last is given again
        at the same level, as it is for a bucket far from its limit.
        """
        capacity = self.capacity
        level = self.seen + (now - self.at) * self.rate
        level = (level if level < capacity else capacity) + self.left
        if level > capacity:
            level = capacity
        shown = self.shown
        if shown is None or level != self.shown_level:
            reset = (capacity - level) / self.rate if capacity > 0 else 0.0
            self.shown = shown = Quota(capacity, floor(level), reset)
            self.shown_level = level
        return shown

    def settle(self, amount: float) -> list[Item]:
        """`amount` back (reserved - used: below 0, more taken); items returning to Redis what exceeds a full lease.

        A lease given back for good (its governor closed) returns it all.
        """
        if not self.open:
            return [Item.bucket(self.key, self.capacity, amount)]
        self.left += amount
        surplus = self.left - self.capacity // LEASE_SHARE
        if surplus <= 0:
            return []
        self.left -= surplus
        return [Item.bucket(self.key, self.capacity, surplus)]

    def give_back(self) -> list[Item]:
        """An item returning what it holds to Redis (a debt: charging it); it holds nothing after."""
        left, self.left = self.left, 0.0
        return [Item.bucket(self.key, self.capacity, left)] if left else []


class SlotsLease:
    """The slots of the concurrency key `key` this process leased, and how many its requests in flight hold."""

    __slots__ = ("asking", "counts", "in_flight", "key", "leased", "lent", "limit", "open", "stale", "used_at", "whose")

    def __init__(self, key: str, limit: int) -> None:
        self.key = key
        self.limit = limit
        self.leased = 0  # this process's field in the slots hash
        self.in_flight = 0
        self.asking = False
        self.used_at = 0.0
        self.open = True
        self.stale = False  # the limit was lowered since Redis last granted it slots: it covers no request
        self.whose: tuple[str, str] | None = None  # the subject (key or route) and name whose concurrency it is
        self.counts: Counts | None = None  # the same concurrency as the local fallback counts it, once Redis was lost
        self.lent = 0  # of its requests in flight, those the fallback counts too (Redis is away)

    def resize(self, limit: int) -> list[Item]:
        """Take a new limit (a reload's or a PATCH's); lowered, items giving back at once the slots no request holds.

        Other replicas may hold slots leased under the old limit too: until Redis, which counts them
        all, grants this lease slots under the new one, it covers no request (`stale`).
        """
        lowered, self.limit = limit < self.limit, limit
        if not lowered:
            return []
        self.stale = True
        return self.give_back()

    def has_room(self) -> bool:
        """Whether it has a slot no request holds, leased under the limit as it is."""
        return self.in_flight < self.leased and not self.stale

    def granted(self, more: int, *, limit: float) -> None:
        """Redis admitted a request under `limit` and leased `more` slots: one taken, and covering again when
        `limit` is the lease's."""
        self.leased += 1 + more
        self.in_flight += 1
        self.stale = self.stale and limit != self.limit

    def free(self) -> list[Item]:
        """A request holding one of its slots ended; items freeing in Redis what exceeds a full lease (a stale
        lease keeps none unused)."""
        self.in_flight = max(0, self.in_flight - 1)
        if self.lent and self.counts is not None:  # Redis is away: the fallback counted it too
            self.lent -= 1
            self.counts.in_use = max(0, self.counts.in_use - 1)
        surplus = self.leased - self.in_flight - (0 if self.stale else self.limit // LEASE_SHARE)
        if surplus <= 0 or not self.open:
            return []
        self.leased -= surplus
        return [Item.slots(self.key, 0, -surplus)]

    def give_back(self) -> list[Item]:
        """An item freeing its slots no request holds; it leases its requests in flight after."""
        surplus = self.leased - self.in_flight
        if surplus <= 0:
            return []
        self.leased = self.in_flight
        return [Item.slots(self.key, 0, -surplus)]


Lease = BucketLease | SlotsLease


@dataclass(slots=True)
class Holding:
    """Every lease this process holds, by Redis key.

    A reload's successor (the same process id) takes it over: leases and slots stay the process's, and
    the settlements the governor it replaces could not send (Redis away) are `handed` to it.
    """

    buckets: dict[str, BucketLease] = field(default_factory=dict)
    slots: dict[str, SlotsLease] = field(default_factory=dict)
    resized: list[Item] = field(default_factory=list)  # what leases gave back under a lowered limit, to send
    holders: set[str] = field(default_factory=set)  # the governors sharing it: the last to close gives it back
    handed: list[Unsent] = field(default_factory=list)  # a closed governor's settlements, for its successor to send

    def bucket(self, key: str, capacity: int) -> BucketLease:
        """The lease of the bucket `key`, under the limit `capacity`."""
        lease = self.buckets.get(key)
        if lease is None:
            lease = self.buckets[key] = BucketLease(key, capacity)
        elif lease.capacity != capacity:
            lease.resize(capacity)
        return lease

    def slot(self, key: str, limit: int, *, whose: tuple[str, str] | None = None) -> SlotsLease:
        """The lease of the concurrency key `key` (of `whose`: a subject and a name), under the limit `limit`."""
        lease = self.slots.get(key)
        if lease is None:
            lease = self.slots[key] = SlotsLease(key, limit)
            lease.whose = whose
        elif lease.limit != limit:
            self.resized += lease.resize(limit)
        return lease

    def take_resized(self) -> list[Item]:
        """What leases gave back under a lowered limit since last asked (see SlotsLease.resize)."""
        resized, self.resized = self.resized, []
        return resized

    def take_handed(self) -> list[Unsent]:
        """The settlements a closed governor handed over since last asked."""
        handed, self.handed = self.handed, []
        return handed

    def all(self) -> tuple[Lease, ...]:
        """Every lease it holds."""
        return (*self.buckets.values(), *self.slots.values())

    def holds_slots(self) -> bool:
        """Whether any slots lease holds a slot in Redis (leased; or counted by the fallback while Redis was away)."""
        return any(lease.leased or (lease.counts is not None and lease.counts.in_use > lease.lent)
                   for lease in self.slots.values())  # fmt: skip

    def corrections(self) -> list[Item]:
        """An item setting each slots field of this process to what it leased, and the requests the fallback
        admitted while Redis was away still hold (none: the field goes)."""
        return [Item.slots(key, 0, lease.leased + (lease.counts.in_use - lease.lent if lease.counts else 0))
                for key, lease in self.slots.items()]  # fmt: skip

    def lend(self, ledger: Ledger) -> None:
        """Redis is lost: the fallback's `ledger` counts this process's requests in flight under each lease too,
        so that it admits no more than the limit with them."""
        for lease in self.slots.values():
            if lease.whose is not None and lease.counts is None:
                subject, name = lease.whose
                lease.counts = (ledger.routes if subject == ROUTE else ledger.keys).setdefault(name, Counts())
            if lease.counts is not None:
                lease.counts.in_use += lease.in_flight - lease.lent
                lease.lent = lease.in_flight

    def reclaim(self) -> None:
        """Redis is back: the fallback counts only the requests it admitted (the corrections add them to Redis')."""
        for lease in self.slots.values():
            if lease.counts is not None:
                lease.counts.in_use = max(0, lease.counts.in_use - lease.lent)
            lease.lent = 0

    def idle(self, now: float, *, seconds: float = IDLE_SECONDS) -> list[Item]:
        """Items giving back what the leases unused for `seconds` hold (they hold nothing unused after)."""
        items = []
        for lease in self.all():
            if now - lease.used_at >= seconds:
                items += lease.give_back()
        return items

    def give_all_back(self) -> list[Item]:
        """Items giving back every lease; settlements of its requests still in flight then go to Redis."""
        items = []
        for lease in self.all():
            items += lease.give_back()
            lease.open = False
        return items


@dataclass(slots=True)
class Asked:
    """One admission sent to Redis: per item, the lease it draws on, what the lease covered and what it asked of Redis.

    Built by `ask`, which takes the covered part from the leases at once (another admission
    cannot count it twice); `answered` grants the top-ups, or puts the covered part back when
    Redis refused.
    """

    args: list[str | int | float]
    leases: tuple[Lease | None, ...]
    kinds: tuple[ItemKind, ...]
    covered: tuple[float, ...]  # per item: taken from its lease (a bucket's amount; a slot: 1)
    limits: tuple[float, ...]  # per item: the limit Redis checks it against
    debts: list[Item]  # bucket debts charged before the admission (settled in the same call)

    def answered(self, outcome: Outcome, now: float) -> None:
        """Redis' answer: grants and levels into the leases; when refused, what they covered back."""
        admitted = outcome.refused is None
        for lease, kind, covered, limit, (value, _), more in zip(
            self.leases, self.kinds, self.covered, self.limits, outcome.values, outcome.granted, strict=True
        ):
            if lease is None:
                continue
            if kind in (ItemKind.BUCKET_LEASED, ItemKind.SLOTS_LEASED):
                lease.asking = False
            if isinstance(lease, BucketLease):
                lease.reported(float(value), now)
                lease.left += more if admitted else covered
            elif not admitted:
                lease.in_flight -= int(covered)
            elif kind is not ItemKind.SLOTS_COVERED:
                lease.granted(int(more), limit=limit)

    def unanswered(self) -> None:
        """No answer came (Redis unreachable, or the governor closed): what the leases covered goes back."""
        for lease, kind, covered in zip(self.leases, self.kinds, self.covered, strict=True):
            if lease is None:
                continue
            if kind in (ItemKind.BUCKET_LEASED, ItemKind.SLOTS_LEASED):
                lease.asking = False
            if isinstance(lease, BucketLease):
                lease.left += covered
            else:
                lease.in_flight -= int(covered)


def ask(items: Sequence[tuple[Item, Lease | None]], now: float) -> Asked:
    """The admission of `items` (each the amount a request needs, and the lease it may draw on) to send to Redis.

    A lease covers what it can (a bucket's whole `left`, below the amount; a slot when one is
    free) and is taken from now; Redis is asked the rest, and the first admission asking of a
    lease also leases a top-up. A bucket's debt is charged first (`debts`).
    """
    args: list[str | int | float] = []
    kinds, covered, limits, debts = [], [], [], []
    for item, lease in items:
        kind, amount, part = item.kind, item.amount, 0.0
        if isinstance(lease, BucketLease):
            lease.used_at = now
            if lease.left < 0:
                debts += lease.give_back()
            part = max(0.0, min(lease.left, amount))
            lease.left -= part
            amount -= part
            kind = ItemKind.BUCKET_COVERED if amount <= 0 else kind
        elif isinstance(lease, SlotsLease):
            lease.used_at = now
            if lease.has_room():
                lease.in_flight += 1
                part, amount, kind = 1, 0, ItemKind.SLOTS_COVERED
        if kind in (ItemKind.BUCKET, ItemKind.SLOTS) and lease is not None and not lease.asking:
            lease.asking = True
            kind = ItemKind.BUCKET_LEASED if kind is ItemKind.BUCKET else ItemKind.SLOTS_LEASED
        args += (kind, item.key, item.limit, amount)
        kinds.append(kind)
        covered.append(part)
        limits.append(item.limit)
    leases = tuple(lease for _, lease in items)
    return Asked(
        args=args, leases=leases, kinds=tuple(kinds), covered=tuple(covered), limits=tuple(limits), debts=debts
    )

"""What one request asks of the Redis script or of the process's leases (its items, in admission order), and what
it gives back when it ends.

The order is the admission order of every governor: the key's budget, the key's concurrency,
requests and tokens, then the route's. A request is taken from the leases when they cover all of
it (`Demand.take`), else sent to Redis for what they do not (`Demand.ask`); either way it holds
what `Held` says until its settlement gives it back to the leases (redis_leases).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from gateway.core.errors import RateLimitedError
from gateway.core.governance import Budget, LimitKind, Quota, RateLimits
from gateway.core.periods import Span
from gateway.governance.admission import Admission
from gateway.governance.redis_leases import ROUTE, Asked, BucketLease, Holding, Lease, SlotsLease, ask
from gateway.governance.redis_script import Call, Item, Op, Outcome, Unsent, bucket_key, slots_key, spent_key
from gateway.governance.refusals import rate_limited

KEY = "key"
SPEND_KEPT_SECONDS = 86_400  # a period's spend is kept a day past its end


@dataclass(slots=True)
class Check:
    """One item of an admission, with the limit it stands for and whose it is (KEY or ROUTE, and the name)."""

    item: Item
    kind: LimitKind
    subject: str
    name: str

    def refusal(self, wait_seconds: float, *, quotas: tuple[Quota | None, Quota | None]) -> RateLimitedError:
        """The 429 of a request this check refused (a rate limit: the budget's is refusals.budget_spent)."""
        subject, limit = f"{self.subject} '{self.name}'", int(self.item.limit)
        return rate_limited(self.kind, subject=subject, limit=limit, wait_seconds=wait_seconds, quotas=quotas)


@dataclass(slots=True)
class Held:
    """What an admission holds until it ends: `tokens` of each tokens lease of `demand` (at most its capacity when
    `demand` was made: a limit changed since does not change what it reserved), and a slot of each slots lease."""

    demand: Demand
    tokens: int

    def settle(self, used: int | None) -> list[Item]:
        """The request ended having used `used` tokens (None: unknown): slots freed, tokens reconciled in the leases.

        The items for Redis: what exceeds a full lease (redis_leases.LEASE_SHARE), or what a lease
        given back for good (its governor closed) cannot take.
        """
        items = []
        for slots in self.demand.slots:
            items += slots.free()
        tokens = self.tokens
        if used is not None and tokens > 0:
            for lease, capacity in zip(self.demand.tokens, self.demand.capacities, strict=True):
                items += lease.settle((tokens if tokens < capacity else capacity) - used)
        return items

    def admission(self, route: str, now: float) -> Admission:
        """The admission holding this on `route`, with the quotas its leases show at `now`."""
        requests, tokens = self.demand.quotas(now)
        return Admission(self.demand.whose[0], route, self.tokens, requests=requests, tokens=tokens, handle=self)

    def release(self) -> list[Item]:
        """The request never ran (its caller left): every slot and token it took back (see `settle`)."""
        items = []
        for slots in self.demand.slots:
            items += slots.free()
        for lease, capacity in zip(self.demand.tokens, self.demand.capacities, strict=True):
            items += lease.settle(min(self.tokens, capacity))
        return items


def subject_checks(subject: str, name: str, limits: RateLimits, *, tokens: int) -> list[Check]:
    """The concurrency, requests and tokens checks of `subject` `name` under `limits`."""
    checks = []
    if limits.concurrent_requests is not None:
        item = Item.slots(slots_key(subject, name), limits.concurrent_requests, 1)
        checks.append(Check(item=item, kind=LimitKind.CONCURRENCY, subject=subject, name=name))
    if limits.requests_per_minute is not None:
        item = Item.bucket(bucket_key(subject, name, "requests"), limits.requests_per_minute, 1)
        checks.append(Check(item=item, kind=LimitKind.REQUESTS, subject=subject, name=name))
    if limits.tokens_per_minute is not None:
        wanted = min(tokens, limits.tokens_per_minute)
        item = Item.bucket(bucket_key(subject, name, "tokens"), limits.tokens_per_minute, wanted)
        checks.append(Check(item=item, kind=LimitKind.TOKENS, subject=subject, name=name))
    return checks


def admission_checks(
    tenant: str, limits: RateLimits, *, route: tuple[str, RateLimits], tokens: int, span: Span | None
) -> tuple[Check, ...]:
    """Every check of one request of `tenant` on `route` (its name and limits), in admission order."""
    checks = []
    if limits.budget is not None and span is not None:
        item = Item.spend(spent_key(tenant, span.id), limits.budget.usd)
        checks.append(Check(item=item, kind=LimitKind.BUDGET, subject=KEY, name=tenant))
    checks += subject_checks(KEY, tenant, limits, tokens=tokens)
    checks += subject_checks(ROUTE, route[0], route[1], tokens=tokens)
    return tuple(checks)


@dataclass(slots=True)
class Demand:
    """Every check of a tenant's requests on a route, made once for its key's policy and the route's limits
    (`made_for`) and budget period, with the lease each draws on (None: the budget's), the leases by what they count,
    and those the headers show."""

    checks: tuple[Check, ...]
    leases: tuple[Lease | None, ...]
    slots: tuple[SlotsLease, ...]
    requests: tuple[BucketLease, ...]
    tokens: tuple[BucketLease, ...]
    capacities: tuple[int, ...]  # of each tokens lease, when made: the most of it an admission reserved
    shown: tuple[BucketLease | None, BucketLease | None]
    made_for: tuple[object, object]  # the key's policy and the route's limits: the same objects until a reload or a PATCH
    budget: Budget | None  # the key's
    whose: tuple[str, str]  # the tenant, and the process id of the governor whose leases these are
    spend: tuple[str, float] | None  # the budget period's spend key, and when it expires
    until: float  # when the budget's period ends (epoch seconds): it is made anew then

    @classmethod
    def of(
        cls, checks: tuple[Check, ...], *, holding: Holding, made_for: tuple[object, object],
        whose: tuple[str, str], span: Span | None = None, budget: Budget | None = None,
    ) -> Demand:  # fmt: skip
        leases = tuple(lease_of(check, holding) for check in checks)
        by_kind: dict[LimitKind, list[Lease]] = {}
        for check, lease in zip(checks, leases, strict=True):
            if lease is not None:
                by_kind.setdefault(check.kind, []).append(lease)
        requests = tuple(lease for lease in by_kind.get(LimitKind.REQUESTS, ()) if isinstance(lease, BucketLease))
        tokens = tuple(lease for lease in by_kind.get(LimitKind.TOKENS, ()) if isinstance(lease, BucketLease))
        spend = None
        if span is not None and checks and checks[0].kind is LimitKind.BUDGET:
            spend = spend_of(whose[0], span)
        return cls(
            checks=checks, leases=leases, requests=requests, tokens=tokens, made_for=made_for, budget=budget, whose=whose,
            spend=spend,
            capacities=tuple(int(check.item.limit) for check in checks if check.kind is LimitKind.TOKENS),
            until=span.ends_at if span is not None and span.ends_at is not None else math.inf,
            slots=tuple(lease for lease in by_kind.get(LimitKind.CONCURRENCY, ()) if isinstance(lease, SlotsLease)),
            shown=(requests[0] if requests else None, tokens[0] if tokens else None),
        )  # fmt: skip

    def fits(self, policy: object, route_limits: object, now: float) -> bool:
        """Whether it was made for this policy and route's limits (the same objects: a reload or a PATCH makes new
        ones, and the policy's limits and routes with them), and its budget period has not ended by `now` (epoch
        seconds). The route's limits, not the route: a route given in x-gateway-config is built anew for each request."""
        made_policy, made_route_limits = self.made_for
        return made_policy is policy and made_route_limits is route_limits and now < self.until

    def take(self, tokens: int, now: float) -> bool:
        """Take a request needing `tokens` from the leases when they cover every limit (else take nothing): whether taken."""
        for slots in self.slots:
            if slots.in_flight >= slots.leased or slots.stale:  # stale: a limit lowered since Redis granted it
                return False
        for lease in self.requests:
            if lease.left < 1:
                return False
        for lease in self.tokens:
            if lease.left < (tokens if tokens < lease.capacity else lease.capacity):
                return False
        for slots in self.slots:
            slots.in_flight += 1
            slots.used_at = now
        for lease in self.requests:
            lease.left -= 1
            lease.used_at = now
        for lease in self.tokens:
            lease.left -= tokens if tokens < lease.capacity else lease.capacity
            lease.used_at = now
        return True

    def ask(self, tokens: int, now: float) -> Asked:
        """What to ask of Redis for a request needing `tokens` the leases do not cover (see redis_leases.ask)."""
        items = []
        for check, lease in zip(self.checks, self.leases, strict=True):
            item = check.item
            if check.kind is LimitKind.TOKENS:
                item = Item.bucket(item.key, item.limit, tokens if tokens < item.limit else item.limit)
            items.append((item, lease))
        return ask(items, now)

    def held(self, tokens: int) -> Held:
        """What a request needing `tokens` holds until it is settled."""
        return Held(self, tokens)

    def quotas(self, now: float) -> tuple[Quota | None, Quota | None]:
        """The requests and tokens quotas an admission shows: the key's, else the route's (see BucketLease.quota)."""
        requests, tokens = self.shown
        return (requests.quota(now) if requests is not None else None,
                tokens.quota(now) if tokens is not None else None)  # fmt: skip


def spend_of(tenant: str, span: Span) -> tuple[str, float]:
    """The key of `tenant`'s spend in the budget period `span`, and when it expires (0: never)."""
    return spent_key(tenant, span.id), 0 if span.ends_at is None else int(span.ends_at) + SPEND_KEPT_SECONDS


def lease_of(check: Check, holding: Holding) -> Lease | None:
    """The lease `check` draws on (None: a budget, checked against the spend Redis reported)."""
    if check.kind is LimitKind.CONCURRENCY:
        return holding.slot(check.item.key, int(check.item.limit), whose=(check.subject, check.name))
    if check.kind is LimitKind.BUDGET:
        return None
    return holding.bucket(check.item.key, int(check.item.limit))


def quotas_of(
    checks: tuple[Check, ...], leases: tuple[Lease | None, ...], now: float, *, key_only: bool = False
) -> tuple[Quota | None, Quota | None]:
    """The requests and tokens quotas the leases show: the key's, else the route's (`key_only`: the key's alone)."""
    requests = tokens = None
    for check, lease in zip(checks, leases, strict=True):
        kind = check.kind  # the key's checks come before the route's: the first of a kind wins
        if not isinstance(lease, BucketLease) or (key_only and check.subject != KEY):
            continue
        if kind is LimitKind.REQUESTS and requests is None:
            requests = lease.quota(now)
        elif kind is LimitKind.TOKENS and tokens is None:
            tokens = lease.quota(now)
    return requests, tokens


def refusal_quotas(
    checks: tuple[Check, ...], leases: tuple[Lease | None, ...], *, refused: int, now: float
) -> tuple[Quota | None, Quota | None]:
    """A refusal's quotas: the key's own when the key (or its budget) refused it, else as refusals.route_refusal_quotas.

    Refused by the route: its quota for the limit that refused, and for the other the key's, else the route's.
    """
    refusing, lease = checks[refused], leases[refused]
    if refusing.subject == KEY:
        return quotas_of(checks, leases, now, key_only=True)
    requests, tokens = quotas_of(checks, leases, now)
    if isinstance(lease, BucketLease):
        if refusing.kind is LimitKind.REQUESTS:
            requests = lease.quota(now)
        elif refusing.kind is LimitKind.TOKENS:
            tokens = lease.quota(now)
    return requests, tokens


@dataclass(slots=True)
class Waiting:
    """An admission waiting for the next call: what it asks, what it will hold, where its outcome goes (None: count locally)."""

    asked: Asked
    held: Held
    outcome: asyncio.Future[Outcome | None]

    def answered(self, outcome: Outcome, now: float) -> list[Item]:
        """Redis' answer, into the leases and to the admission; when its caller already left, items giving back
        what an admitting answer took."""
        self.asked.answered(outcome, now)
        if not self.outcome.done():
            self.outcome.set_result(outcome)
            return []
        return self.held.release() if outcome.refused is None else []

    def unanswered(self) -> None:
        """No answer comes (Redis unreachable, or the governor closed): what the leases covered back, and the
        admission told to count locally."""
        self.asked.unanswered()
        if not self.outcome.done():
            self.outcome.set_result(None)

    def left(self) -> list[Item]:
        """Its caller left (cancelled, or failed): items giving back what an admitting answer handed to it took.

        None when no answer came yet: `answered` gives it back when one comes.
        """
        if not self.outcome.done():
            self.outcome.cancel()
        if self.outcome.cancelled():
            return []
        outcome = self.outcome.result()
        return self.held.release() if outcome is not None and outcome.refused is None else []


def peeked(
    checks: tuple[Check, ...], outcome: Outcome, *, holding: Holding, now: float
) -> tuple[tuple[Quota | None, Quota | None], int, float]:
    """What a peek at `checks` (a key's, for GET /v1/gateway/usage) found: the key's quotas (with this process's
    leases), its requests in flight (slots other processes leased count as in use) and its spend."""
    leases = tuple(lease_of(check, holding) for check in checks)
    in_use, spent = 0, 0.0
    for check, lease, (value, _) in zip(checks, leases, outcome.values, strict=True):
        if isinstance(lease, BucketLease):
            lease.reported(float(value), now)
        elif isinstance(lease, SlotsLease):
            in_use = max(0, int(value) - (lease.leased - lease.in_flight))
        elif check.kind is LimitKind.BUDGET:
            spent = float(value)
    return quotas_of(checks, leases, now, key_only=True), in_use, spent


def settle_in(call: Call, unsent: list[Unsent]) -> list[list[Unsent]]:
    """Add `unsent` to `call`: one settlement per process whose slots they free and, for spend, call it was first
    sent in (this one, if never sent: Redis adds a spend once, however often it is sent); each operation's."""
    batches: dict[tuple[str, str], list[Unsent]] = {}
    for each in unsent:
        if each.items:
            if each.charge is not None:
                each.first_call = each.first_call or call.call_id
            batches.setdefault((each.owner, each.first_call), []).append(each)
    for (owner, first_call), settlements in batches.items():
        call.add(Op.SETTLE, [item for each in settlements for item in each.items], owner=owner, first_call=first_call)
    return list(batches.values())

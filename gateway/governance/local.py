"""Limits counted in this process's memory: each process (and each of --workers N) holds its own.

The same rules as the Redis governor, without a store: a request's route is checked, then the
key's budget, then the key's concurrency, requests and tokens, then the route's; a request is
taken from all of them or from none. The counts (a Ledger) outlive a reload: the governor a
SIGHUP builds takes its predecessor's ledger, and buckets take the new limits as they are used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.core.buckets import Bucket
from gateway.core.errors import RateLimitedError
from gateway.core.governance import Budget, KeyPolicy, LimitKind, Quota, RateLimits
from gateway.core.periods import budget_span
from gateway.core.tree import Route
from gateway.governance.admission import Admission, GovernanceListener
from gateway.governance.policies import Policies, check_route
from gateway.governance.refusals import budget_spent, rate_limited
from gateway.governance.usage import usage_report


@dataclass(slots=True)
class Counts:
    """One key's or one route's counts: its buckets (None until limited) and the requests it has in flight."""

    requests: Bucket | None = None
    tokens: Bucket | None = None
    in_use: int = 0

    def quotas(self, limits: RateLimits, now: float) -> tuple[Quota | None, Quota | None]:
        """Its requests and tokens quotas under `limits` at `now` (None: that one is not limited)."""
        requests = tokens = None
        if limits.requests_per_minute is not None:
            requests = current(self.requests, limits.requests_per_minute, now).quota(now)
        if limits.tokens_per_minute is not None:
            tokens = current(self.tokens, limits.tokens_per_minute, now).quota(now)
        return requests, tokens


@dataclass(slots=True)
class Ledger:
    """Every count of a local governor: keys' and routes' counts, and each key's spend in its budget's period."""

    keys: dict[str, Counts] = field(default_factory=dict)
    routes: dict[str, Counts] = field(default_factory=dict)
    spent: dict[str, tuple[str, float]] = field(default_factory=dict)  # tenant: (period id, USD)


@dataclass(frozen=True, slots=True)
class Taken:
    """What a local admission took: tokens of the key's and the route's buckets, their slots, and the budget to charge."""

    key_tokens: int = 0
    route_tokens: int = 0
    key_slot: bool = False
    route_slot: bool = False
    budget: Budget | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Which limit refused, at what limit, and how long until it would not."""

    kind: LimitKind
    limit: int
    wait_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Plan:
    """A subject's buckets after a take, and whether it holds a slot (applied only if every subject agrees)."""

    requests: Bucket | None
    tokens: Bucket | None
    slot: bool

    def apply(self, counts: Counts) -> None:
        counts.requests = self.requests or counts.requests
        counts.tokens = self.tokens or counts.tokens
        if self.slot:
            counts.in_use += 1


def current(bucket: Bucket | None, capacity: int, now: float) -> Bucket:
    """`bucket` under the limit `capacity` now: a full one when there was none."""
    return Bucket.full(capacity, now) if bucket is None else bucket.resized(capacity, now)


def plan_take(counts: Counts, limits: RateLimits, *, tokens: int, now: float) -> Plan | Refusal:
    """What taking one request needing `tokens` from `counts` under `limits` leaves, or the first limit refusing it."""
    slots = limits.concurrent_requests
    if slots is not None and counts.in_use >= slots:
        return Refusal(LimitKind.CONCURRENCY, slots)
    requests = taken_tokens = None
    if limits.requests_per_minute is not None:
        bucket = current(counts.requests, limits.requests_per_minute, now)
        requests = bucket.take(1, now)
        if requests is None:
            return Refusal(LimitKind.REQUESTS, bucket.capacity, bucket.wait_seconds(1, now))
    if limits.tokens_per_minute is not None:
        bucket = current(counts.tokens, limits.tokens_per_minute, now)
        taken_tokens = bucket.take(tokens, now)
        if taken_tokens is None:
            return Refusal(LimitKind.TOKENS, bucket.capacity, bucket.wait_seconds(tokens, now))
    return Plan(requests=requests, tokens=taken_tokens, slot=slots is not None)


class LocalGovernor:
    """Admits requests against limits counted in this process; `ledger` carries a predecessor's counts over."""

    def __init__(
        self,
        policies: Policies,
        *,
        listener: GovernanceListener | None = None,
        ledger: Ledger | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.policies = policies
        self.ledger = ledger if ledger is not None else Ledger()
        self._listener = listener
        self._clock = clock
        self._wall = wall

    def policy(self, tenant: str) -> KeyPolicy:
        return self.policies.policy(tenant)

    async def admit(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        return self.take(tenant, route, tokens=tokens)

    def take(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        """admit's work, without awaiting: also the Redis governor's while Redis cannot be reached."""
        policy = self.policies.policy(tenant)
        check_route(policy, route)
        limits = self.policies.limits(policy)
        if not limits.any and not route.limits.any:
            return None
        now = self._clock()
        key = self.ledger.keys.setdefault(tenant, Counts())
        budget = limits.budget
        if budget is not None:
            wall = self._wall()
            span = budget_span(budget.period, wall)
            if self.spent(tenant, span.id) >= budget.usd:
                self._refused(tenant, route, LimitKind.BUDGET)
                raise budget_spent(tenant, budget, span=span, now=wall, quotas=key.quotas(limits, now))
        key_plan = plan_take(key, limits, tokens=tokens, now=now)
        if isinstance(key_plan, Refusal):
            raise self._refusal(key_plan, subject=f"key '{tenant}'", where=(tenant, route),
                                quotas=key.quotas(limits, now))
        counts = self.ledger.routes.setdefault(route.name, Counts())
        route_plan = plan_take(counts, route.limits, tokens=tokens, now=now)
        if isinstance(route_plan, Refusal):
            raise self._refusal(route_plan, subject=f"route '{route.name}'", where=(tenant, route),
                                quotas=key.quotas(limits, now))
        key_plan.apply(key)
        route_plan.apply(counts)
        requests = key_plan.requests or route_plan.requests  # the headers show the key's, else the route's
        taken_tokens = key_plan.tokens or route_plan.tokens
        handle = Taken(
            key_tokens=min(tokens, key_plan.tokens.capacity) if key_plan.tokens else 0,
            route_tokens=min(tokens, route_plan.tokens.capacity) if route_plan.tokens else 0,
            key_slot=key_plan.slot,
            route_slot=route_plan.slot,
            budget=budget,
        )
        return Admission(
            tenant=tenant, route=route.name, reserved_tokens=tokens, handle=handle,
            requests=requests.quota(now) if requests else None,
            tokens=taken_tokens.quota(now) if taken_tokens else None,
        )  # fmt: skip

    def settle(self, admission: Admission, *, tokens: int | None, cost_usd: float) -> None:
        taken = admission.handle
        if admission.settled or not isinstance(taken, Taken):
            return
        admission.settled = True
        now = self._clock()
        for counts, reserved, slot in (
            (self.ledger.keys.get(admission.tenant), taken.key_tokens, taken.key_slot),
            (self.ledger.routes.get(admission.route), taken.route_tokens, taken.route_slot),
        ):
            if counts is None:
                continue
            if slot:
                counts.in_use = max(0, counts.in_use - 1)
            if tokens is not None and reserved and counts.tokens is not None:
                counts.tokens = counts.tokens.give_back(reserved - tokens, now)
        if taken.budget is not None and cost_usd > 0:
            self.spend(admission.tenant, taken.budget, cost_usd=cost_usd)

    def spent(self, tenant: str, period: str) -> float:
        """What `tenant` spent in the budget period `period` (an id of core.periods)."""
        spent = self.ledger.spent.get(tenant)
        return spent[1] if spent is not None and spent[0] == period else 0.0

    def spend(self, tenant: str, budget: Budget, *, cost_usd: float) -> None:
        """Add `cost_usd` to `tenant`'s spend in `budget`'s period now, and tell the listener."""
        period = budget_span(budget.period, self._wall()).id
        total = self.spent(tenant, period) + cost_usd
        self.ledger.spent[tenant] = (period, total)
        if self._listener is not None:
            self._listener.budget_spent(tenant, spent_usd=total, budget_usd=budget.usd)

    async def usage(self, tenant: str) -> dict[str, Any]:
        limits = self.policies.limits(self.policies.policy(tenant))
        counts = self.ledger.keys.get(tenant, Counts())
        budget = limits.budget
        span = budget_span(budget.period, self._wall()) if budget is not None else None
        return usage_report(
            tenant, limits, quotas=counts.quotas(limits, self._clock()), in_use=counts.in_use,
            spent_usd=self.spent(tenant, span.id) if span is not None else 0.0, span=span,
        )  # fmt: skip

    async def close(self) -> None:
        return None

    def _refusal(
        self, refusal: Refusal, *, subject: str, where: tuple[str, Route], quotas: tuple[Quota | None, Quota | None]
    ) -> RateLimitedError:
        self._refused(*where, refusal.kind)
        return rate_limited(
            refusal.kind, subject=subject, limit=refusal.limit, wait_seconds=refusal.wait_seconds, quotas=quotas
        )

    def _refused(self, tenant: str, route: Route, kind: LimitKind) -> None:
        if self._listener is not None:
            self._listener.rate_limited(tenant, route.name, kind)

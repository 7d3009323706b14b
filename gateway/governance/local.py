"""Limits counted in this process's memory: each process (and each of --workers N) holds its own.

The same rules as the Redis governor, without a store: a request's route is checked, then the
key's budget, then the key's concurrency, requests and tokens, then the route's; a request is
taken from all of them or from none. What a tenant's requests on a route are held to (Terms) is
worked out once per policy and route limits; each request then only counts. The counts (a Ledger)
outlive a reload: the governor a SIGHUP builds takes its predecessor's ledger, and a bucket
takes its new limit at the first request held to it (a PATCH makes a new policy, so new Terms).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.core.buckets import Bucket
from gateway.core.errors import RateLimitedError
from gateway.core.governance import Budget, KeyPolicy, LimitKind, Quota, RateLimits
from gateway.core.periods import Spans
from gateway.core.tree import Route
from gateway.governance.admission import Admission, GovernanceListener
from gateway.governance.policies import Policies, check_route
from gateway.governance.refusals import budget_spent, rate_limited, route_refusal_quotas
from gateway.governance.usage import usage_report


def sized(bucket: Bucket | None, capacity: int, now: float) -> Bucket:
    """`bucket` under the limit `capacity`: a full one when there was none, resized when the limit changed."""
    if bucket is None:
        return Bucket.full(capacity, now)
    if bucket.capacity != capacity:  # a reload or a PATCH changed the limit
        bucket.resize(capacity, now)
    return bucket


@dataclass(slots=True)
class Counts:
    """One key's or one route's counts: its buckets (None until limited) and the requests it has in flight."""

    requests: Bucket | None = None
    tokens: Bucket | None = None
    in_use: int = 0

    def requests_bucket(self, capacity: int, now: float) -> Bucket:
        """Its requests bucket under the limit `capacity` (full when there was none)."""
        self.requests = bucket = sized(self.requests, capacity, now)
        return bucket

    def tokens_bucket(self, capacity: int, now: float) -> Bucket:
        """Its tokens bucket under the limit `capacity` (full when there was none)."""
        self.tokens = bucket = sized(self.tokens, capacity, now)
        return bucket

    def quotas(self, limits: RateLimits, now: float) -> tuple[Quota | None, Quota | None]:
        """Its requests and tokens quotas under `limits` at `now` (None: that one is not limited)."""
        requests = tokens = None
        if limits.requests_per_minute is not None:
            requests = self.requests_bucket(limits.requests_per_minute, now).quota(now)
        if limits.tokens_per_minute is not None:
            tokens = self.tokens_bucket(limits.tokens_per_minute, now).quota(now)
        return requests, tokens


@dataclass(slots=True)
class Ledger:
    """Every count of a local governor: keys' and routes' counts, and each key's spend in its budget's period."""

    keys: dict[str, Counts] = field(default_factory=dict)
    routes: dict[str, Counts] = field(default_factory=dict)
    spent: dict[str, tuple[str, float]] = field(default_factory=dict)  # tenant: (period id, USD)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Which limit refused, at what limit, and how long until it would not."""

    kind: LimitKind
    limit: int
    wait_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Held:
    """A key's or a route's counts under its limits: the slots, requests and tokens buckets a request takes.

    `requests` and `tokens` are its buckets, sized to `limits`, when those are limited (None: not limited).
    """

    counts: Counts
    limits: RateLimits
    requests: Bucket | None
    tokens: Bucket | None

    @classmethod
    def under(cls, counts: Counts, limits: RateLimits, now: float) -> Held:
        """`counts` held to `limits`: its buckets sized to them at `now`."""
        requests = tokens = None
        if limits.requests_per_minute is not None:
            requests = counts.requests_bucket(limits.requests_per_minute, now)
        if limits.tokens_per_minute is not None:
            tokens = counts.tokens_bucket(limits.tokens_per_minute, now)
        return cls(counts, limits, requests=requests, tokens=tokens)

    def take(self, tokens: int, now: float) -> Refusal | None:
        """Take one request needing `tokens` at `now` from every limit or from none: the first that refuses it (None: taken).

        Its slot, then its requests, then its tokens: a bucket that refuses has what the ones
        before it took given back. `give_back` undoes a take (a route refused what a key let through).
        """
        slots = self.limits.concurrent_requests
        if slots is not None and self.counts.in_use >= slots:
            return Refusal(LimitKind.CONCURRENCY, slots)
        requests = self.requests
        if requests is not None and not requests.take(1, now):
            return Refusal(LimitKind.REQUESTS, requests.capacity, requests.wait_seconds(1, now))
        bucket = self.tokens
        if bucket is not None and not bucket.take(tokens, now):
            if requests is not None:
                requests.give_back(1, now)
            return Refusal(LimitKind.TOKENS, bucket.capacity, bucket.wait_seconds(tokens, now))
        if slots is not None:
            self.counts.in_use += 1
        return None

    def tokens_taken(self, tokens: int) -> int:
        """What a take of a request needing `tokens` took of its tokens bucket: at most its capacity (0: none)."""
        bucket = self.tokens
        return 0 if bucket is None else tokens if tokens < bucket.capacity else bucket.capacity

    def give_back(self, tokens: int, now: float) -> None:
        """Undo a take of one request needing `tokens` at `now`."""
        if self.limits.concurrent_requests is not None:
            self.counts.in_use -= 1
        if self.requests is not None:
            self.requests.give_back(1, now)
        if self.tokens is not None:
            self.tokens.give_back(self.tokens_taken(tokens), now)

    def quotas(self, now: float) -> tuple[Quota | None, Quota | None]:
        """Its requests and tokens quotas at `now` (None: that one is not limited)."""
        return self.counts.quotas(self.limits, now)

    def release(self, reserved: int, used: int | None, now: float) -> None:
        """A request `take` let through ended: its slot back, and the tokens `reserved` and not `used` (None: unknown)."""
        if self.limits.concurrent_requests is not None and self.counts.in_use > 0:  # a reload may have forgotten it
            self.counts.in_use -= 1
        if used is not None and reserved and self.tokens is not None:
            self.tokens.give_back(reserved - used, now)


@dataclass(frozen=True, slots=True)
class Terms:
    """What a tenant's requests on a route are held to, worked out once per policy and route limits.

    `key` and `route_held`: the key's and the route's counts under their limits (None: nothing
    limits the request / the route is not limited). `requests` and `tokens`: the buckets an
    admission's headers show, the key's, else the route's (None: neither is limited).
    """

    policy: KeyPolicy
    route_limits: RateLimits
    key: Held | None
    route_held: Held | None
    budget: Budget | None = None
    requests: Bucket | None = None
    tokens: Bucket | None = None


@dataclass(slots=True)
class Taken:
    """What a local admission took: one request of `terms`' counts, and these tokens of the key's and the route's buckets."""

    terms: Terms
    key_tokens: int
    route_tokens: int


def shown(key: Bucket | None, route: Bucket | None) -> Bucket | None:
    """The bucket an admission's headers show: the key's, else the route's (None: neither is limited)."""
    return key if key is not None else route


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
        self.spans = Spans()  # budget periods, worked out once a period
        self._terms: dict[tuple[str, str], Terms] = {}  # by tenant and route name

    def policy(self, tenant: str) -> KeyPolicy:
        return self.policies.policy(tenant)

    async def admit(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        return self.take(tenant, route, tokens=tokens)

    def take(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        """admit's work, without awaiting: also the Redis governor's while Redis cannot be reached."""
        terms = self.terms(tenant, route)
        key = terms.key
        if key is None:
            return None
        now = self._clock()
        budget = terms.budget
        if budget is not None:
            spent = self.ledger.spent.get(tenant)
            # a spend under the budget admits in any period (a new one starts from nothing): no calendar to read
            if spent is not None and spent[1] >= budget.usd:
                wall = self._wall()
                span = self.spans.at(budget.period, wall)
                if spent[0] == span.id:
                    self._refused(tenant, route, LimitKind.BUDGET)
                    raise budget_spent(tenant, budget, span=span, now=wall, quotas=key.quotas(now))
        refusal = key.take(tokens, now)
        if refusal is not None:
            raise self._refusal(refusal, subject=f"key '{tenant}'", where=(tenant, route), quotas=key.quotas(now))
        held = terms.route_held
        if held is not None:
            refusal = held.take(tokens, now)
            if refusal is not None:
                key.give_back(tokens, now)
                quotas = route_refusal_quotas(refusal.kind, key=key.quotas(now), route=held.quotas(now))
                raise self._refusal(refusal, subject=f"route '{route.name}'", where=(tenant, route), quotas=quotas)
        handle = Taken(terms, key.tokens_taken(tokens), held.tokens_taken(tokens) if held is not None else 0)
        requests, tokens_shown = terms.requests, terms.tokens
        return Admission(
            tenant, route.name, tokens, handle=handle,
            requests=requests.quota(now) if requests is not None else None,
            tokens=tokens_shown.quota(now) if tokens_shown is not None else None,
        )  # fmt: skip

    def terms(self, tenant: str, route: Route) -> Terms:
        """What `tenant`'s requests on `route` are held to (PermissionDeniedError when it may not use it)."""
        policy = self.policies.policy(tenant)
        terms = self._terms.get((tenant, route.name))
        if terms is None or terms.policy is not policy or terms.route_limits is not route.limits:
            check_route(policy, route)
            terms = self._terms[(tenant, route.name)] = self._terms_of(tenant, policy, route)
        return terms

    def _terms_of(self, tenant: str, policy: KeyPolicy, route: Route) -> Terms:
        limits = self.policies.limits(policy)
        if not limits.any and not route.limits.any:
            return Terms(policy, route.limits, key=None, route_held=None)
        now = self._clock()
        key = Held.under(self.ledger.keys.setdefault(tenant, Counts()), limits, now)
        held = None
        if route.limits.any:
            held = Held.under(self.ledger.routes.setdefault(route.name, Counts()), route.limits, now)
        return Terms(
            policy, route.limits, key=key, route_held=held, budget=limits.budget,
            requests=shown(key.requests, held.requests if held is not None else None),
            tokens=shown(key.tokens, held.tokens if held is not None else None),
        )  # fmt: skip

    def settle(self, admission: Admission, *, tokens: int | None, cost_usd: float) -> None:
        taken = admission.handle
        if admission.settled or not isinstance(taken, Taken):
            return
        admission.settled = True
        terms = taken.terms
        now = self._clock()
        if terms.key is not None:  # always: a request nothing limits has no admission
            terms.key.release(taken.key_tokens, tokens, now)
        if terms.route_held is not None:
            terms.route_held.release(taken.route_tokens, tokens, now)
        if terms.budget is not None and cost_usd > 0:
            self.spend(admission.tenant, terms.budget, cost_usd=cost_usd)

    def spent(self, tenant: str, period: str) -> float:
        """What `tenant` spent in the budget period `period` (an id of core.periods)."""
        spent = self.ledger.spent.get(tenant)
        return spent[1] if spent is not None and spent[0] == period else 0.0

    def seen_spent(self, tenant: str, spent_usd: float) -> None:
        """What the store says `tenant` spent in its budget's period now: a later count here starts from it."""
        budget = self.policies.limits(self.policies.policy(tenant)).budget
        if budget is not None:
            self.ledger.spent[tenant] = (self.spans.at(budget.period, self._wall()).id, spent_usd)

    def spend(self, tenant: str, budget: Budget, *, cost_usd: float) -> None:
        """Add `cost_usd` to `tenant`'s spend in `budget`'s period now, and tell the listener."""
        period = self.spans.at(budget.period, self._wall()).id
        total = self.spent(tenant, period) + cost_usd
        self.ledger.spent[tenant] = (period, total)
        if self._listener is not None:
            self._listener.budget_spent(tenant, spent_usd=total, budget_usd=budget.usd)

    async def usage(self, tenant: str) -> dict[str, Any]:
        limits = self.policies.limits(self.policies.policy(tenant))
        counts = self.ledger.keys.get(tenant, Counts())
        budget = limits.budget
        span = self.spans.at(budget.period, self._wall()) if budget is not None else None
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

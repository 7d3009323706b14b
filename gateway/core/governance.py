"""Governance settings: what a gateway key may do (its routes, its rate limits, its budget), and what a route may take.

Pure types, read by the config (which builds them), the governance layer (which enforces them)
and the server (which answers at a limit). How limits are counted is the governance layer's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from gateway.core.stores import SentinelSettings


class LimitKind(StrEnum):
    """Which limit refused a request: the `limit` label of gateway_rate_limited_total."""

    REQUESTS = "requests"
    TOKENS = "tokens"
    CONCURRENCY = "concurrency"
    BUDGET = "budget"


class BudgetPeriod(StrEnum):
    """How long a budget lasts: a UTC calendar day, week (from Monday) or month, or for ever."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    TOTAL = "total"


@dataclass(frozen=True, slots=True)
class Budget:
    """USD a key may spend per period, priced as gateway_cost_usd_total is."""

    usd: float
    period: BudgetPeriod = BudgetPeriod.MONTH


@dataclass(frozen=True, slots=True)
class RateLimits:
    """Limits on a key or a route; None: that one is not limited."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    concurrent_requests: int | None = None
    budget: Budget | None = None  # keys only: a route's limits have none

    @property
    def any(self) -> bool:
        """Whether anything is limited."""
        return (
            self.requests_per_minute is not None
            or self.tokens_per_minute is not None
            or self.concurrent_requests is not None
            or self.budget is not None
        )


UNLIMITED = RateLimits()


class Quota(NamedTuple):
    """One limit as OpenAI's x-ratelimit-* headers tell it: the limit, what is left, and when it is whole again.

    A named tuple rather than a frozen dataclass: a limited key's answers look its headers up by
    their quotas (core.ratelimit_headers.WRITTEN), hashed and compared in C.
    """

    limit: int
    remaining: int
    reset_seconds: float


@dataclass(frozen=True, slots=True)
class KeyPolicy:
    """What one gateway key (a tenant) may do.

    `routes`: the routes it may use (None: every route). `limits`: its own limits, or None for
    the configured defaults. An admin key manages keys and is never limited.
    """

    name: str
    routes: frozenset[str] | None = None
    limits: RateLimits | None = None
    admin: bool = False


class LimitStoreKind(StrEnum):
    """Where limits are counted: in each process, or in Redis, shared by every process and replica."""

    LOCAL = "local"
    REDIS = "redis"


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    """The `limits` section: where limits are counted and the keys issued at run time are kept.

    `store` None means: redis when memory.store is redis, local otherwise. A redis store without a
    url or sentinel of its own connects as memory does. `path`: the SQLite file that keeps keys
    issued through the API when the store is local. `defaults`: the limits of keys that name none.
    """

    store: LimitStoreKind | None = None
    defaults: RateLimits = UNLIMITED
    path: str = "gateway-keys.db"
    url: str | None = field(default=None, repr=False)  # its password must never reach a log
    cluster: bool = False
    sentinel: SentinelSettings | None = None

"""The config's governance sections: gateway keys with the routes and limits each may use, admin keys, and where limits are counted.

Their values are checked here; what needs more than one value (a key's routes against the
file's routes, names shared by keys and admin keys, a Redis to count in) is checked by
gateway.config.access, which reads them into gateway.core.governance's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Final, Literal, Self

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import InitErrorDetails, ValidationError

from gateway.config.checks import digest_problem, gateway_key_problem, tenant_problem
from gateway.config.fields import (
    MAX_COUNT,
    AsText,
    Bounds,
    Chosen,
    Flag,
    ListOf,
    PositiveCount,
    Setting,
    holds,
)
from gateway.config.section import Section, refusal
from gateway.config.shared_state import Sentinel
from gateway.core.governance import Budget as BudgetSettings
from gateway.core.governance import LimitsConfig

LimitStore = Literal["local", "redis"]
Period = Literal["day", "week", "month", "total"]
_LIMITS: Final = LimitsConfig()
_PERIOD: Final = BudgetSettings(usd=1).period
Usd = Annotated[float, Bounds(positive=True, maximum=MAX_COUNT, over=f"must be at most {MAX_COUNT} (a billion)")]
RouteName = Annotated[str, AsText()]
RouteNames = Annotated[tuple[RouteName, ...], ListOf("route names", non_empty=True)]  # a key's routes


class Budget(Section):
    """USD a key may spend in a period, priced as gateway_cost_usd_total is; past it, 429 insufficient_quota."""

    usd: Usd = Field(description="The most the key may spend in a period, in USD (> 0).")
    period: Annotated[Period, Chosen(blank_is_default=True)] = Field(
        default=_PERIOD.value,
        description="day, week (from Monday) or month, UTC calendar, or total (never renewed).",
    )


class RouteLimits(Section):
    """Limits on a route as a whole, every key's requests together; past one, 429 rate_limit_exceeded."""

    misplaced: ClassVar[Mapping[str, str]] = {
        "budget": "a route has no budget: a budget is a key's (auth.keys[].limits.budget, or limits.defaults.budget)"
    }

    requests_per_minute: PositiveCount | None = Field(
        default=None, description="Requests a minute, counted as a token bucket refilled continuously."
    )
    tokens_per_minute: PositiveCount | None = Field(
        default=None,
        description="Tokens a minute: each request's prompt (estimated) and the max tokens it asks for, "
        "corrected by the upstream's usage.",
    )
    concurrent_requests: PositiveCount | None = Field(
        default=None, description="Requests in progress at once (a stream until it ends)."
    )


class KeyLimits(RouteLimits):
    """Limits on one gateway key: its rate, its concurrency and its budget."""

    budget: Budget | None = Field(default=None, description=Budget.__doc__)


class BearerKey(Section):
    """A key clients send as their Bearer token; exactly one of key or keySha256."""

    # name is required, and told so with the key's other problems (_whole)
    model_config = ConfigDict(json_schema_extra={"required": ["name"]})

    name: Annotated[str, AsText(), holds(tenant_problem)] | None = Field(
        default=None, description="The caller's tenant: 1-64 letters, digits or ._@-."
    )
    key: Annotated[str, AsText(), holds(gateway_key_problem)] | None = Field(
        default=None, description="The key itself."
    )
    key_sha256: Annotated[str, AsText(), holds(digest_problem)] | None = Field(
        default=None, description="The key's SHA-256 digest, in hex."
    )

    @model_validator(mode="after")
    def _whole(self) -> Self:
        problems: list[InitErrorDetails] = []
        if self.name is None:
            problems.append({"type": refusal("is required"), "loc": ("name",), "input": None})
        if (self.key is None) == (self.key_sha256 is None):
            problems.append(
                {"type": refusal("needs exactly one of key or keySha256"), "loc": (), "input": None}
            )
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self


class GatewayKey(BearerKey):
    """A key clients send as their Bearer token, with the routes it may use and its limits; exactly one of key or keySha256."""

    routes: RouteNames | None = Field(
        default=None, description="The routes it may use (another: 403 route_not_allowed); default: every route."
    )
    limits: KeyLimits | None = Field(
        default=None, description="Its limits; default: limits.defaults."
    )


class AdminKey(BearerKey):
    """A key that manages keys (/v1/gateway/keys) and sees every key's usage; never limited, every route; exactly one of key or keySha256."""


class Auth(Section):
    """Gateway keys; without any (keys or adminKeys), the gateway answers every client."""

    keys: Annotated[tuple[GatewayKey, ...], ListOf(non_empty=True)] = Field(
        default=(), description="The keys clients may send."
    )
    admin_keys: Annotated[tuple[AdminKey, ...], ListOf(non_empty=True)] = Field(
        default=(), description="Keys that manage keys and see every key's usage; a name of their own each."
    )


class RateLimiting(Section):
    """Where keys' and routes' limits are counted, where keys issued through the API are kept, and the limits of keys that name none."""

    store: Annotated[LimitStore, Chosen()] | None = Field(
        default=None,
        description="local (each process counts alone: --workers N gives each worker its own counts) or redis "
        "(shared by every process and replica); default: redis when memory.store is redis.",
    )
    defaults: KeyLimits = Field(
        default_factory=KeyLimits.model_construct, description="The limits of keys that name none of their own."
    )
    path: Setting = Field(
        default=_LIMITS.path, description="The SQLite file of keys issued through the API, with store local."
    )
    url: Setting | None = Field(
        default=None,
        description="The Redis URL of a redis store; default: memory's connection (url, cluster, sentinel).",
    )
    cluster: Flag = Field(default=_LIMITS.cluster, description="url is any node of a Redis Cluster.")
    sentinel: Sentinel | None = Field(default=None, description="The primary Redis Sentinel names, instead of url.")

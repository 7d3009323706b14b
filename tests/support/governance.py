"""Configs, routes and a listener for the governance layer's tests: limits set in code, not YAML."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.config.loader import parse_config
from gateway.core.governance import UNLIMITED, LimitKind, LimitsConfig, LimitStoreKind, RateLimits
from gateway.core.settings import ApiKey, Config
from gateway.core.stores import RedisConnection
from gateway.core.tree import Route
from gateway.governance.policies import Policies
from gateway.governance.redis import RedisGovernor

ROUTES = "routes: {fast: {provider: mock}, smart: {provider: mock}}"


def api_key(name: str, *, routes: set[str] | None = None, limits: RateLimits | None = None) -> ApiKey:
    return ApiKey(
        name=name, sha256=hashlib.sha256(name.encode()).digest(),
        routes=None if routes is None else frozenset(routes), limits=limits,
    )  # fmt: skip


def limits_config(
    *,
    keys: tuple[ApiKey, ...] = (),
    admins: tuple[str, ...] = (),
    defaults: RateLimits = UNLIMITED,
    routes: Mapping[str, RateLimits] | None = None,
    store: LimitStoreKind | None = None,
    url: str | None = None,
    cluster: bool = False,
) -> Config:
    """fast and smart on the mock, with `keys`, admin keys named `admins`, `defaults` and each route's limits."""
    config = parse_config(ROUTES)
    limited = {name: dataclasses.replace(route, limits=(routes or {}).get(name, UNLIMITED))
               for name, route in config.routes.items()}
    return dataclasses.replace(
        config, routes=limited, api_keys=keys, admin_keys=tuple(api_key(name) for name in admins),
        limits=LimitsConfig(store=store, defaults=defaults, url=url, cluster=cluster),
    )  # fmt: skip


def inline_route(config: Config) -> Route:
    """A route as an x-gateway-config tree makes it: named as server.inline names it."""
    return dataclasses.replace(config.routes["fast"], name="other")


@dataclass
class Heard:
    """A GovernanceListener that keeps what it is told."""

    refusals: list[tuple[str, str, LimitKind]] = field(default_factory=list)
    spends: list[tuple[str, float, float]] = field(default_factory=list)

    def rate_limited(self, tenant: str, route: str, limit: LimitKind) -> None:
        self.refusals.append((tenant, route, limit))

    def budget_spent(self, tenant: str, *, spent_usd: float, budget_usd: float) -> None:
        self.spends.append((tenant, spent_usd, budget_usd))


@dataclass
class Clock:
    """A clock a test moves by hand: `now` seconds."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def redis_governor(url: str, config: Config, **options: object) -> RedisGovernor:
    """A RedisGovernor of `config`'s keys on the Redis at `url`, patient as a loaded machine needs."""
    settings: dict[str, Any] = {"timeout": 10.0, **options}
    return RedisGovernor(Policies(config), RedisConnection(url=url, cluster=bool(settings.pop("cluster", False))),
                         **settings)

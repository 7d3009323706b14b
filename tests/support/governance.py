"""Configs, routes and a listener for the governance layer's tests: limits set in code, not YAML."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.config.loader import parse_config
from gateway.core.governance import UNLIMITED, LimitKind, LimitsConfig, LimitStoreKind, RateLimits
from gateway.core.settings import ApiKey, Config
from gateway.core.stores import RedisConnection
from gateway.core.tree import Route
from gateway.governance.policies import Policies
from gateway.governance.redis import RedisGovernor

ROOT = Path(__file__).resolve().parents[2]

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


# A replica in a process of its own: admits `count` requests of key "a" under the limits given
# (RateLimits' fields as JSON), says "holding", and waits to be killed.
_HOLDING_REPLICA = """
import asyncio, json, sys
from gateway.core.governance import RateLimits
from tests.support.governance import api_key, limits_config, redis_governor

async def main() -> None:
    limits = RateLimits(**json.loads(sys.argv[2]))
    config = limits_config(keys=(api_key("a", limits=limits),))
    governor = redis_governor(sys.argv[1], config)
    for _ in range(int(sys.argv[3])):
        await governor.admit("a", config.routes["fast"], tokens=0)
    print("holding", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def holding_replica(url: str, limits: RateLimits, *, count: int = 2) -> AsyncIterator[asyncio.subprocess.Process]:
    """A replica process on the Redis at `url` holding `count` admissions of key "a" under `limits`; killed on exit."""
    fields = {name: value for name, value in dataclasses.asdict(limits).items() if value is not None}
    replica = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLDING_REPLICA, url, json.dumps(fields), str(count),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert replica.stdout is not None
        assert await asyncio.wait_for(replica.stdout.readline(), 60) == b"holding\n"
        yield replica
    finally:
        if replica.returncode is None:
            replica.kill()
            await replica.wait()

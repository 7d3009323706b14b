"""Who may use the gateway, and how much: the keys, admin keys and limits of a validated file, as gateway.core's settings.

With the checks that need more than one value: a key's routes must be the file's routes; keys of
one name are one tenant, so they give the same routes and limits; an admin key is a tenant of
its own (neither its name nor its key is a client key's); limits counted in Redis need a Redis
(their own, or memory's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from gateway.config.governance import AdminKey, Auth, Budget, GatewayKey, KeyLimits, RateLimiting, RouteLimits
from gateway.config.problems import Problems
from gateway.config.stores import check_redis
from gateway.config.validation import placed
from gateway.core.governance import Budget as BudgetSettings
from gateway.core.governance import BudgetPeriod, LimitsConfig, LimitStoreKind, RateLimits
from gateway.core.memory.settings import StoreKind
from gateway.core.settings import ApiKey


def read_keys(
    auth: Auth, *, route_names: Sequence[str], problems: Problems
) -> tuple[tuple[ApiKey, ...], tuple[ApiKey, ...]]:
    """The client keys and the admin keys of `auth`, each problem between them told to `problems`."""
    given = dict(placed(auth.keys, ("auth", "keys"), problems))
    keys = {index: _api_key(key) for index, key in given.items()}
    admin_keys = {index: _api_key(key) for index, key in placed(auth.admin_keys, ("auth", "adminKeys"), problems)}
    _check_routes(given, route_names, problems)
    _check_tenants(keys, problems)
    _check_admins(keys, admin_keys, problems)
    return tuple(keys.values()), tuple(admin_keys.values())


def read_limits(section: RateLimiting, *, memory_store: StoreKind, problems: Problems) -> LimitsConfig:
    """The `limits` section's settings; a redis store needs a Redis to count in."""
    sentinel = check_redis(section, at="limits", problems=problems)
    store = None if section.store is None else LimitStoreKind(section.store)
    own_redis = section.url or section.sentinel is not None
    refused = problems.is_refused(("limits", "url")) or problems.is_refused(("limits", "sentinel"))
    if store == LimitStoreKind.REDIS and memory_store != StoreKind.REDIS and not own_redis and not refused:
        problems.add(
            ("limits", "store"),
            f"redis needs limits.url or limits.sentinel: memory is not on Redis (memory.store: {memory_store}) "
            "to share its connection",
        )
    return LimitsConfig(
        store=store,
        defaults=rate_limits(section.defaults),
        path=section.path,
        url=section.url,
        cluster=section.cluster,
        sentinel=sentinel,
    )


def rate_limits(section: RouteLimits) -> RateLimits:
    """The limits a key's or a route's `limits` give (a route's have no budget)."""
    budget = section.budget if isinstance(section, KeyLimits) else None
    return RateLimits(
        requests_per_minute=section.requests_per_minute,
        tokens_per_minute=section.tokens_per_minute,
        concurrent_requests=section.concurrent_requests,
        budget=None if budget is None else _budget(budget),
    )


def _budget(budget: Budget) -> BudgetSettings:
    return BudgetSettings(usd=budget.usd, period=BudgetPeriod(budget.period))


def _api_key(key: GatewayKey | AdminKey) -> ApiKey:
    digest = (
        hashlib.sha256(key.key.encode()).digest()
        if key.key is not None
        else bytes.fromhex(key.key_sha256 or "")
    )
    if isinstance(key, AdminKey):
        return ApiKey(key.name or "", digest)
    return ApiKey(
        key.name or "",
        digest,
        routes=None if key.routes is None else frozenset(key.routes),
        limits=None if key.limits is None else rate_limits(key.limits),
    )


def unknown_route(route: str, route_names: Sequence[str]) -> str:
    """What a key's route that is not a route of the file is told (check-config and the keys API alike)."""
    return f"no route named {route!r} (routes: {', '.join(route_names)})"


def _check_routes(keys: Mapping[int, GatewayKey], route_names: Sequence[str], problems: Problems) -> None:
    """Each route a key names must be a route of the file (none are known when the file has none: that is told)."""
    if not route_names:
        return
    for index, key in keys.items():
        at = ("auth", "keys", index, "routes")
        for place, route in placed(key.routes or (), at, problems):
            if route not in route_names:
                problems.add((*at, place), unknown_route(route, route_names))


def _check_tenants(keys: Mapping[int, ApiKey], problems: Problems) -> None:
    """Keys of one name are one tenant, counted together: they must give the same routes and limits."""
    first: dict[str, int] = {}
    for index, key in keys.items():
        before = first.setdefault(key.name, index)
        if (keys[before].routes, keys[before].limits) != (key.routes, key.limits):
            problems.add(
                ("auth", "keys", index),
                f"gives other routes or limits than auth.keys[{before}], of the same name {key.name!r}: "
                "keys of one name are one tenant, with one set of routes and limits",
            )


def _check_admins(keys: Mapping[int, ApiKey], admin_keys: Mapping[int, ApiKey], problems: Problems) -> None:
    """An admin key is a tenant of its own: neither its name nor its key is a client key's."""
    names: dict[str, int] = {}
    digests: dict[bytes, int] = {}
    for index, key in keys.items():  # each told as its first key
        names.setdefault(key.name, index)
        digests.setdefault(key.sha256, index)
    for index, admin in admin_keys.items():
        if admin.name in names:
            problems.add(
                ("auth", "adminKeys", index, "name"),
                f"{admin.name!r} is also the name of auth.keys[{names[admin.name]}]: an admin key is a tenant of its own",
            )
        if admin.sha256 in digests:
            problems.add(
                ("auth", "adminKeys", index),
                f"is the same key as auth.keys[{digests[admin.sha256]}]: an admin key must be a key of its own",
            )

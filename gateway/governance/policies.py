"""Each tenant's policy: the routes its key may use and the limits it is held to.

A tenant is a key's name. Its policy comes from the config's keys (auth.keys: their routes and
limits), its admin keys (auth.adminKeys: every route, never limited), or the keys issued through
the API (the StoredKeys snapshot, read at each call: a refresh replaces its maps). A key that
names no limits, and the shared tenant when no key is configured, gets limits.defaults.
"""

from __future__ import annotations

from gateway.config.loader import OTHER_ROUTE
from gateway.core.errors import PermissionDeniedError
from gateway.core.governance import UNLIMITED, KeyPolicy, RateLimits
from gateway.core.settings import Config
from gateway.core.tree import Route
from gateway.governance.stored_keys import StoredKey, StoredKeys

# The name an x-gateway-config tree's route goes by (server.inline.INLINE_ROUTE): a route in no
# key's list, since the client wrote it.
INLINE_ROUTE = OTHER_ROUTE


class Policies:
    """The policies of `config`'s keys and of the stored keys in `stored`, with `config.limits.defaults`."""

    def __init__(self, config: Config, *, stored: StoredKeys | None = None) -> None:
        self._stored = stored
        self.defaults = config.limits.defaults
        self._configured = {key.name: KeyPolicy(name=key.name, admin=True) for key in config.admin_keys}
        self._configured.update(
            {key.name: KeyPolicy(name=key.name, routes=key.routes, limits=key.limits) for key in config.api_keys}
        )
        self._issued: dict[str, tuple[StoredKey, KeyPolicy]] = {}  # the policy made of each stored key, by name
        self._defaulted: dict[str, KeyPolicy] = {}  # the same object for each request of a tenant held to the defaults

    def policy(self, tenant: str) -> KeyPolicy:
        """What `tenant` may do: its configured key's policy, else its stored key's, else the defaults'."""
        configured = self._configured.get(tenant)
        if configured is not None:
            return configured
        stored = self._stored.by_name.get(tenant) if self._stored is not None else None
        if stored is None:
            defaulted = self._defaulted.get(tenant)
            if defaulted is None:
                defaulted = self._defaulted[tenant] = KeyPolicy(name=tenant)
            return defaulted
        issued = self._issued.get(tenant)
        if issued is None or issued[0] is not stored:  # first seen, or changed (PATCH) since
            issued = (stored, KeyPolicy(name=tenant, routes=stored.routes, limits=stored.limits))
            self._issued[tenant] = issued
        return issued[1]

    def limits(self, policy: KeyPolicy) -> RateLimits:
        """The limits `policy`'s key is held to: none for an admin key, its own, else the defaults."""
        if policy.admin:
            return UNLIMITED
        return policy.limits if policy.limits is not None else self.defaults


def check_route(policy: KeyPolicy, route: Route) -> None:
    """Raise PermissionDeniedError (route_not_allowed) when `policy`'s key may not use `route`."""
    if policy.routes is None or policy.admin:
        return
    if route.name == INLINE_ROUTE:
        raise PermissionDeniedError(
            f"The key '{policy.name}' may use only the routes {sorted(policy.routes)}: "
            "a route given in x-gateway-config is not one of them.",
            code="route_not_allowed",
        )
    if route.name not in policy.routes:
        raise PermissionDeniedError(
            f"The key '{policy.name}' may not use the route '{route.name}' "
            f"(it may use {sorted(policy.routes)}).",
            param="model",
            code="route_not_allowed",
        )


def limits_anything(config: Config) -> bool:
    """Whether `config` limits or restricts any key or route (else nothing needs a governor), stored keys aside."""
    keys = (*config.api_keys, *config.admin_keys)
    return (
        config.limits.defaults.any
        or any(key.routes is not None or (key.limits is not None and key.limits.any) for key in keys)
        or any(route.limits.any for route in config.routes.values())
    )

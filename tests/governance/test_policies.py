"""Each tenant's policy from the config's keys, admin keys, stored keys and defaults; which routes it may use."""

from __future__ import annotations

import pytest

from gateway.core.errors import PermissionDeniedError
from gateway.core.governance import UNLIMITED, KeyPolicy, RateLimits
from gateway.governance.policies import Policies, check_route, limits_anything
from gateway.governance.stored_keys import StoredKey, StoredKeys
from tests.support.governance import api_key, inline_route, limits_config

SIXTY = RateLimits(requests_per_minute=60)


def test_a_configured_key_has_its_routes_and_limits() -> None:
    config = limits_config(keys=(api_key("a", routes={"fast"}, limits=SIXTY), api_key("b")),
                           defaults=RateLimits(tokens_per_minute=5))
    policies = Policies(config)
    a = policies.policy("a")
    assert a == KeyPolicy(name="a", routes=frozenset({"fast"}), limits=SIXTY)
    assert policies.limits(a) == SIXTY
    assert policies.limits(policies.policy("b")) == RateLimits(tokens_per_minute=5)  # names none: the defaults


def test_the_shared_tenant_gets_the_defaults() -> None:
    policies = Policies(limits_config(defaults=SIXTY))
    assert policies.limits(policies.policy("default")) == SIXTY


def test_an_admin_key_is_never_limited_and_may_use_every_route() -> None:
    config = limits_config(admins=("root",), defaults=SIXTY)
    policies = Policies(config)
    root = policies.policy("root")
    assert root.admin and root.routes is None
    assert policies.limits(root) is UNLIMITED
    check_route(root, config.routes["smart"])
    check_route(root, inline_route(config))


def test_a_stored_key_is_read_from_the_snapshot_as_it_changes() -> None:
    stored = StoredKeys()
    policies = Policies(limits_config(defaults=SIXTY), stored=stored)
    assert policies.policy("issued") == KeyPolicy(name="issued")
    key = StoredKey(name="issued", sha256=b"x", routes=frozenset({"smart"}), limits=RateLimits(concurrent_requests=2))
    stored.by_name = {"issued": key}
    assert policies.policy("issued") == KeyPolicy(name="issued", routes=key.routes, limits=key.limits)
    patched = StoredKey(name="issued", sha256=b"x", limits=RateLimits(concurrent_requests=9))
    stored.by_name = {"issued": patched}
    assert policies.limits(policies.policy("issued")) == RateLimits(concurrent_requests=9)
    stored.by_name = {}
    assert policies.limits(policies.policy("issued")) == SIXTY


def test_a_configured_key_wins_over_a_stored_one_of_its_name() -> None:
    stored = StoredKeys(by_name={"a": StoredKey(name="a", sha256=b"x", limits=SIXTY)})
    assert Policies(limits_config(keys=(api_key("a"),)), stored=stored).policy("a").limits is None


def test_a_restricted_key_is_refused_another_route_and_an_inline_one() -> None:
    config = limits_config(keys=(api_key("a", routes={"fast"}),))
    policy = Policies(config).policy("a")
    check_route(policy, config.routes["fast"])
    with pytest.raises(PermissionDeniedError) as refused:
        check_route(policy, config.routes["smart"])
    assert (refused.value.status, refused.value.code, refused.value.type) == (403, "route_not_allowed",
                                                                              "invalid_request_error")
    assert "smart" in refused.value.message
    with pytest.raises(PermissionDeniedError) as inline:
        check_route(policy, inline_route(config))
    assert inline.value.code == "route_not_allowed" and "x-gateway-config" in inline.value.message


def test_an_unrestricted_key_may_use_an_inline_route() -> None:
    config = limits_config(keys=(api_key("a", limits=SIXTY),))
    check_route(Policies(config).policy("a"), inline_route(config))


@pytest.mark.parametrize(("options", "limited"), [
    ({}, False),
    ({"keys": (api_key("a"),), "admins": ("root",)}, False),
    ({"defaults": SIXTY}, True),
    ({"keys": (api_key("a", limits=SIXTY),)}, True),
    ({"keys": (api_key("a", limits=UNLIMITED),)}, False),
    ({"keys": (api_key("a", routes={"fast"}),)}, True),
    ({"routes": {"smart": RateLimits(tokens_per_minute=10)}}, True),
])
def test_whether_a_config_limits_anything(options: dict[str, object], limited: bool) -> None:
    assert limits_anything(limits_config(**options)) is limited  # type: ignore[arg-type]


def test_a_tenant_held_to_the_defaults_gets_the_same_policy_each_time() -> None:
    """The governor works out what a policy holds a tenant to once per policy object: one per tenant, not per request."""
    policies = Policies(limits_config(defaults=SIXTY))
    assert policies.policy("default") is policies.policy("default")

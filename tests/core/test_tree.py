"""The strategy tree (gateway.core.tree): targets in order, compared by identity, shown without their secrets."""

from __future__ import annotations

from types import MappingProxyType

from gateway.core.memory.settings import MemorySettings
from gateway.core.tree import Fallback, LoadBalance, Route, Single, Target, iter_targets


def target(name: str, **settings: object) -> Target:
    return Target(name=name, provider="openai", base_url="https://h.example/v1", api_key="sk-secret", **settings)  # type: ignore[arg-type]


def test_targets_are_walked_depth_first_in_configured_order() -> None:
    a, b, c, d = (target(name) for name in "abcd")
    root = Fallback("r", 1.0, (a, LoadBalance("lb", 1.0, (b, Single("s", 1.0, (c,)))), d))
    assert list(iter_targets(root)) == [a, b, c, d]
    assert list(iter_targets(a)) == [a]


def test_targets_are_equal_only_to_themselves() -> None:
    one, same = target("a"), target("a")
    assert one == one and one != same
    assert len({one, same}) == 2  # providers key caches on a target


def test_a_targets_repr_shows_where_it_goes_never_its_secrets() -> None:
    shown = Target(
        name="t", provider="openai", base_url="https://user:pw@h.example/v1/tok-777", api_key="sk-secret",
        headers=MappingProxyType({"x-team": "team-secret"}), param_secrets=("aws-secret",),
        env_refs=MappingProxyType({"tok-777": "${TENANT}"}),
    )  # fmt: skip
    assert repr(shown) == "Target(name='t', provider='openai', base_url='https://***@h.example/v1/${TENANT}')"


def test_a_targets_model_is_its_override_params_model_when_text() -> None:
    assert target("a", override_params={"model": "gpt-4o"}).model == "gpt-4o"
    assert target("a", override_params={"model": 4}).model is None
    assert target("a").model is None


def test_a_route_knows_its_first_target_and_the_model_memory_counts_for() -> None:
    first, second = target("a", override_params={"model": "gpt-4o"}), target("b", override_params={"model": "other"})
    route = Route("r", Fallback("r", 1.0, (LoadBalance("lb", 1.0, (first,)), second)), MemorySettings())
    assert route.first_target is first and route.memory_model == "gpt-4o"
    assert Route("r", target("c"), MemorySettings()).memory_model is None

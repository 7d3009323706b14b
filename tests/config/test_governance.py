"""The governance sections' shape (gateway.config.governance): keys, admin keys, limits, budgets, and what each refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from gateway.config.governance import AdminKey, Budget, GatewayKey, KeyLimits, RateLimiting, RouteLimits
from gateway.config.problems import Problems
from gateway.config.validation import validated
from gateway.core.governance import Budget as BudgetSettings
from gateway.core.governance import LimitsConfig


def checked(model: type[BaseModel], document: Any) -> tuple[Any, list[str]]:
    problems = Problems()
    return validated(model, document, problems), problems.messages


@pytest.mark.parametrize("model", [GatewayKey, AdminKey])
@pytest.mark.parametrize(
    ("key", "problems"),
    [
        ({"name": "ops", "key": "k"}, []),
        ({"name": "ops", "keySha256": "a" * 64}, []),
        ({"name": "ops"}, ["top level: needs exactly one of key or keySha256"]),
        ({"name": "ops", "key": "k", "keySha256": "a" * 64}, ["top level: needs exactly one of key or keySha256"]),
        ({"key": "k"}, ["name: is required"]),
        ({"name": "ops", "keySha256": "xyz"}, ["keySha256: must be 64 hex characters (a SHA-256 digest)"]),
    ],
)
def test_a_key_and_an_admin_key_have_a_name_and_exactly_one_of_key_or_digest(
    model: type[BaseModel], key: dict[str, str], problems: list[str]
) -> None:
    assert checked(model, key)[1] == problems


def test_a_gateway_key_names_its_routes_and_its_limits() -> None:
    key, problems = checked(
        GatewayKey,
        {
            "name": "team-a", "key": "k", "routes": ["fast", "smart"],
            "limits": {"requestsPerMinute": 600, "tokens_per_minute": 200000, "concurrentRequests": 20,
                       "budget": {"usd": 100, "period": "week"}},
        },
    )  # fmt: skip
    assert problems == []
    assert key.routes == ("fast", "smart")
    assert (key.limits.requests_per_minute, key.limits.tokens_per_minute, key.limits.concurrent_requests) == (600, 200000, 20)
    assert (key.limits.budget.usd, key.limits.budget.period) == (100.0, "week")


def test_an_admin_key_has_no_routes_nor_limits() -> None:
    assert checked(AdminKey, {"name": "ops", "key": "k", "routes": ["a"], "limits": {}})[1] == [
        "routes: unknown key (expected one of: key, keySha256, name)",
        "limits: unknown key (expected one of: key, keySha256, name)",
    ]


@pytest.mark.parametrize(
    ("routes", "told"),
    [
        ([], "routes: must be a non-empty list of route names, got an empty list"),
        ("fast", "routes: must be a non-empty list of route names, got 'fast'"),
        ([{"a": 1}], "routes[0]: must be a string, got a mapping"),
    ],
)
def test_a_keys_routes_are_a_list_of_names(routes: Any, told: str) -> None:
    assert checked(GatewayKey, {"name": "a", "key": "k", "routes": routes})[1] == [told]


@pytest.mark.parametrize(
    ("limits", "told"),
    [
        ({"requestsPerMinute": 0}, "requestsPerMinute: must be >= 1, got 0"),
        ({"tokensPerMinute": -5}, "tokensPerMinute: must be >= 1, got -5"),
        ({"concurrentRequests": 1.5}, "concurrentRequests: must be an integer, got 1.5"),
        ({"requestsPerMinute": 10**10}, "requestsPerMinute: must be at most 1000000000 (a billion), got 10000000000"),
        ({"requestsPerMinute": "fast"}, "requestsPerMinute: must be an integer, got 'fast'"),
        ({"budget": {"usd": 0}}, "budget.usd: must be > 0, got 0"),
        ({"budget": {"usd": -1.5}}, "budget.usd: must be > 0, got -1.5"),
        ({"budget": {"usd": float("inf")}}, "budget.usd: must be a number, got inf"),
        ({"budget": {"usd": 1e12}}, "budget.usd: must be at most 1000000000 (a billion), got 1e+12"),
        ({"budget": {"usd": True}}, "budget.usd: must be a number, got a boolean"),
        ({"budget": {"period": "day"}}, "budget.usd: is required"),
        ({"budget": {"usd": 5, "period": "year"}}, "budget.period: must be one of day, week, month, total, got 'year'"),
        ({"budget": 5}, "budget: must be a mapping, got 5"),
        ({"burst": 5}, "burst: unknown key (expected one of: budget, concurrentRequests, requestsPerMinute, tokensPerMinute)"),
    ],
)
def test_a_keys_limits_are_positive_and_its_budget_names_usd_and_a_period(limits: dict[str, Any], told: str) -> None:
    assert checked(KeyLimits, limits)[1] == [told]


def test_a_budget_lasts_a_month_unless_it_says_otherwise() -> None:
    """The schema's default (printed for editors) is core.governance.Budget's."""
    budget, problems = checked(Budget, {"usd": 5})
    assert problems == [] and budget.period == BudgetSettings(usd=5).period
    assert checked(Budget, {"usd": 5, "period": ""})[0].period == "month"


def test_a_route_has_no_budget_and_is_told_where_budgets_go() -> None:
    assert checked(RouteLimits, {"requestsPerMinute": 3000, "budget": {"usd": 5}})[1] == [
        "budget: a route has no budget: a budget is a key's (auth.keys[].limits.budget, or limits.defaults.budget)"
    ]
    assert checked(RouteLimits, {"requestsPerMinute": 0})[1] == ["requestsPerMinute: must be >= 1, got 0"]


def test_the_limits_sections_defaults_are_the_settings_defaults() -> None:
    section, problems = checked(RateLimiting, {})
    settings = LimitsConfig()
    assert problems == []
    assert (section.store, section.path, section.url, section.cluster, section.sentinel) == (
        settings.store, settings.path, settings.url, settings.cluster, settings.sentinel
    )


@pytest.mark.parametrize(
    ("limits", "told"),
    [
        ({"store": "mongo"}, "store: must be local or redis, got 'mongo'"),
        ({"cluster": "yes"}, "cluster: must be true or false, got 'yes'"),
        ({"defaults": {"budget": {"usd": -1}}}, "defaults.budget.usd: must be > 0, got -1"),
        ({"defaults": 5}, "defaults: must be a mapping, got 5"),
        ({"sentinel": {"masterName": "m"}}, "sentinel.nodes: is required"),
        ({"path": []}, "path: must be a string, got an empty list"),
    ],
)
def test_the_limits_section_refuses_what_cannot_be(limits: dict[str, Any], told: str) -> None:
    assert checked(RateLimiting, limits)[1] == [told]

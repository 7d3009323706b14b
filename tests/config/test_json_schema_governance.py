"""`gateway schema` with the governance sections: it takes the keys, admin keys and limits the loader takes, and refuses what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from gateway.config.json_schema import config_json_schema
from gateway.config.loader import ConfigError, parse_config

ROUTES = "routes: {fast: {provider: mock}, smart: {provider: mock}}"


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = config_json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.mark.parametrize(
    "text",
    [
        "auth: {keys: [{name: a, key: k, routes: [fast], limits: {requestsPerMinute: 600, tokensPerMinute: 2000, "
        "concurrentRequests: 20, budget: {usd: 100, period: month}}}]}",
        "auth: {keys: [{name: a, key: k, limits: {requests_per_minute: '${RPM}', budget: {usd: 0.5}}}], "
        "adminKeys: [{name: ops, keySha256: '" + "0" * 64 + "'}]}",
        "limits: {store: redis, url: 'redis://127.0.0.1:6379/0', defaults: {requestsPerMinute: 60, budget: {usd: 5, period: day}}}",
        "limits: {store: local, path: keys.db, cluster: false}",
        "limits: {store: '${LIMIT_STORE}', sentinel: {masterName: m, nodes: ['s:1']}}",
    ],
)
def test_the_schema_takes_the_governance_the_loader_takes(text: str, validator: Draft202012Validator) -> None:
    document = f"{text}\n{ROUTES}"
    parse_config(document, env={"RPM": "60", "LIMIT_STORE": "redis"})
    assert [error.message for error in validator.iter_errors(yaml.safe_load(document))] == []


@pytest.mark.parametrize(
    "text",
    [
        "auth: {keys: [{name: a, key: k, routes: []}]}",
        "auth: {keys: [{name: a, key: k, limits: {requestsPerMinute: 0}}]}",
        "auth: {keys: [{name: a, key: k, limits: {budget: {usd: 0}}}]}",
        "auth: {keys: [{name: a, key: k, limits: {budget: {period: week}}}]}",
        "auth: {keys: [{name: a, key: k, limits: {budget: {usd: 1, period: year}}}]}",
        "auth: {adminKeys: [{name: ops, key: k, routes: [fast]}]}",
        "auth: {adminKeys: [{key: k}]}",
        "limits: {store: mongo}",
        "limits: {defaults: {burst: 5}}",
    ],
)
def test_the_schema_refuses_the_governance_the_loader_refuses(text: str, validator: Draft202012Validator) -> None:
    document = f"{text}\n{ROUTES}"
    with pytest.raises(ConfigError):
        parse_config(document, env={})
    assert list(validator.iter_errors(yaml.safe_load(document)))


def test_a_routes_budget_is_refused_by_the_schema_too(validator: Draft202012Validator) -> None:
    document: Any = yaml.safe_load("routes: {fast: {provider: mock, limits: {requestsPerMinute: 5, budget: {usd: 5}}}}")
    (error,) = validator.iter_errors(document)
    assert list(error.path) == ["routes", "fast", "limits"]
    assert any("'budget' was unexpected" in cause.message for cause in error.context or ())


def test_every_governance_key_says_what_it_is_for() -> None:
    definitions = config_json_schema()["$defs"]
    for name in ("Budget", "RouteLimits", "KeyLimits", "GatewayKey", "AdminKey", "Auth", "RateLimiting"):
        assert definitions[name]["description"], name
        for key, value in definitions[name]["properties"].items():
            referred = definitions.get(value.get("$ref", "").rpartition("/")[2], {})
            options = [definitions.get(option.get("$ref", "").rpartition("/")[2], {}) for option in value.get("anyOf", [])]
            assert value.get("description") or referred.get("description") or any(o.get("description") for o in options), f"{name}.{key}"
